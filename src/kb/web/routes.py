"""The web page's routes: each reads its request (kb.web.forms), calls the part that does the
work (the search service, the note reader, the status report) and renders what it returns
(kb.web.cards, the templates). Every route only reads.

Pages: `/` (search), `/note` (a note, scrolled to a passage, with the notes linking to it and
its unresolved links), `/ask` (an answer streamed as it is written), `/status`. Their JSON
twins: `/api/search`, `/api/note`, `/api/links`, `/api/ask` (server-sent events),
`/api/status`; and `/api/vaults`, the vaults with the folder names Obsidian knows them by
(the plugin's notes are addressed by vault-relative path in its own vault).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import asdict, dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from kb.config import VaultConfig
from kb.container import Container
from kb.db import first_line
from kb.errors import DatabaseError, KbError, LLMError
from kb.results import SearchHit
from kb.search.answer import Answer, Stopped
from kb.services.access import Access, access
from kb.services.note_links import NoteFinder, NoteLinks
from kb.services.note_reader import Vaults
from kb.services.relating import RelatedNotes, RelatedService
from kb.services.request_fields import FILTERS, MODE_CHOICES
from kb.services.searching import SearchRequest, SearchService
from kb.services.status_report import StatusReport, duration
from kb.store.candidates import CandidateReads
from kb.web.cards import Card, answer_pieces, cards, note_lines, note_url, obsidian_url
from kb.web.forms import FormError, SearchForm, line_number, read_form, related_form
from kb.web.guard import Guard

_HERE = files("kb.web")
log = logging.getLogger("kb.web")

# Answers the page writes at once. Each holds the chat model for up to minutes, and more would
# only wait at the model server (which writes llm.concurrency at a time) holding a connection
# each; the pages are never kept waiting by them (their events are awaited, not a thread's).
ANSWERS_AT_ONCE = 4
BUSY = (
    f"kb is writing {ANSWERS_AT_ONCE} answers already, as many as it writes at once: ask again "
    "when one is done"
)
# While the model thinks, a comment line this often: a tab closed meanwhile is noticed (the
# write fails) and its answer stopped, and a proxy in front keeps the connection open.
_KEEP_ALIVE = 5.0


@dataclass(frozen=True)
class Parts:
    """What the page reads from: built by the composition root, like every face's parts."""

    candidates: CandidateReads  # the notes' rows the page lists and links, its marked words
    status: Callable[[], StatusReport]  # read anew for each request
    searches: SearchService
    vaults: Vaults
    related: RelatedService
    links: NoteFinder  # a note's links, both ways


def obsidian_vaults(vaults: Iterable[VaultConfig]) -> dict[str, str]:
    """The vaults that are Obsidian vaults (they hold `.obsidian/`), by name, with the folder
    name Obsidian knows each by."""
    return {v.name: v.path.name for v in vaults if (v.path / ".obsidian").is_dir()}


def web_app(
    container: Container, *, host: str, token: str | None, allow_hosts: tuple[str, ...] = ()
) -> ASGIApp:
    """The page over a container's parts, guarded for an address (`kb serve`, and the page a
    daemon serves): composed here, by the face, as the MCP server is."""
    parts = Parts(
        container.store.candidates,
        container.status_reader(),
        container.search_service(),
        Vaults(container.config.vaults),
        container.related_service(),
        container.note_finder(),
    )
    return build_app(parts, access(host, token, allow_hosts))


def build_app(parts: Parts, rules: Access) -> ASGIApp:
    """The page over kb's parts, behind its guard."""
    pages = _Pages(parts)
    routes = [
        Route("/", pages.search),
        Route("/note", pages.note),
        Route("/ask", pages.ask),
        Route("/status", pages.status),
        Route("/status/panel", pages.status_panel),
        Route("/api/search", pages.search_json),
        Route("/api/note", pages.note_json),
        Route("/api/related", pages.related_json),
        Route("/api/ask", pages.ask_events),
        Route("/api/status", pages.status_json),
        Route("/api/links", pages.links_json),
        Route("/api/vaults", pages.vaults_json),
        Mount("/static", StaticFiles(directory=Path(str(_HERE / "static"))), name="static"),
    ]
    handlers = {404: pages.not_found, Exception: pages.failed}
    return Guard(Starlette(routes=routes, exception_handlers=handlers), rules)


class _Pages:
    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.obsidian = obsidian_vaults(parts.vaults.by_name.values())
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates.globals["duration"] = duration
        self.templates.globals["filters"] = FILTERS
        # The search page's choices of mode: as configured, or one of them (the default first).
        self.templates.globals["modes"] = [("", "as configured"), *MODE_CHOICES]
        self.templates.globals["note_url"] = note_url
        self.answers = threading.BoundedSemaphore(ANSWERS_AT_ONCE)

    # -- pages --------------------------------------------------------------------------------

    def search(self, request: Request) -> Response:
        try:
            form = read_form(request.query_params)
        except FormError as exc:
            return self._page("search.html", 400, form=SearchForm(), error=str(exc))
        if form.request is None:
            return self._page("search.html", form=form)
        try:
            found = self.parts.searches.search(form.request)
        except (LLMError, DatabaseError) as exc:  # a server failed: not the request's fault
            return self._page("search.html", 503, form=form, error=str(exc))
        except KbError as exc:  # the request, refused where it is run (a path filter's "..")
            return self._page("search.html", 400, form=form, error=str(exc))
        return self._page(
            "search.html",
            form=form,
            cards=self._cards(form.q, found.hits),
            warnings=found.warnings,
            mode_used=found.mode_used,
            request_query=request.url.query,
        )

    def note(self, request: Request) -> Response:
        params = request.query_params
        try:
            start, end = line_number(params, "start"), line_number(params, "end")
        except FormError as exc:
            return self._page("error.html", 400, title="No such lines", error=str(exc))
        try:
            note = self.parts.vaults.read(params.get("vault", ""), params.get("path", ""))
        except KbError as exc:
            return self._page("error.html", 404, title="No such note", error=str(exc))
        info = self.parts.candidates.note_info([(note.vault, note.path)])
        folder = self.obsidian.get(note.vault)
        return self._page(
            "note.html",
            note=note,
            info=info.get((note.vault, note.path)),
            links=self._links(note.vault, note.path),
            lines=note_lines(note.text, start, end),
            start=start,
            obsidian_url=obsidian_url(folder, note.path) if folder else None,
            related=self._related(note.vault, note.path),
        )

    def _related(self, vault: str, path: str) -> RelatedNotes | None:
        """The note's related notes it does not link to yet, with why; None for a note the
        index does not hold (yet)."""
        try:
            return self.parts.related.related(vault, path, unlinked=True)
        except KbError:
            return None

    def ask(self, request: Request) -> Response:
        try:
            form = read_form(request.query_params)
        except FormError as exc:
            return self._page("ask.html", 400, form=SearchForm(), error=str(exc))
        if form.request is not None and not self._room_for_an_answer():
            return self._page("ask.html", 503, form=form, error=BUSY)
        return self._page("ask.html", form=form, events_url=_events_url(request))

    def status(self, request: Request) -> Response:
        return self._page("status.html", report=self._report())

    def status_panel(self, request: Request) -> Response:
        return self._page("status_panel.html", report=self._report())

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self._page("error.html", 404, title="Not found", error="no such page")

    async def failed(self, request: Request, exc: Exception) -> Response:
        # A lost database, a model server gone: one line, and the server goes on.
        error = first_line(exc)
        log.error("%s %s: %s: %s", request.method, request.url.path, type(exc).__name__, error)
        return self._page("error.html", 500, title="Something failed", error=error)

    # -- JSON ---------------------------------------------------------------------------------

    def search_json(self, request: Request) -> Response:
        try:
            form = read_form(request.query_params)
            if form.request is None:
                raise FormError("q: a query is needed")
            found = self.parts.searches.search(form.request)
        except KbError as exc:
            return _error_json(exc)
        return JSONResponse(asdict(found))

    def note_json(self, request: Request) -> Response:
        params = request.query_params
        try:
            start, end = line_number(params, "start"), line_number(params, "end")
            note = self.parts.vaults.read(
                params.get("vault", ""), params.get("path", ""), start, end
            )
        except FormError as exc:
            return _error_json(exc)
        except KbError as exc:
            return _error_json(exc, 404)
        return JSONResponse(asdict(note))

    def related_json(self, request: Request) -> Response:
        # The fields of `kb related --json`.
        try:
            form = related_form(request.query_params, list(self.parts.vaults.by_name))
            found = self.parts.related.related(
                form.vault, form.path, line=form.line, top_k=form.top_k, unlinked=form.unlinked
            )
        except FormError as exc:
            return _error_json(exc)
        except KbError as exc:
            return _error_json(exc, 404)
        return JSONResponse(found.as_json())

    def links_json(self, request: Request) -> Response:
        """`/api/links?path=…` (a path inside its vault, or `vault=` and `path=`)."""
        params = request.query_params
        vault, path = params.get("vault", ""), params.get("path", "")
        if not path:
            return _error_json(FormError("path: a note's path inside its vault is needed"))
        try:
            found = self.parts.links.links_of(f"{vault}:{path}" if vault else path, files=False)
        except KbError as exc:
            return _error_json(exc, 404)
        return JSONResponse(found.as_json())

    def _links(self, vault: str, path: str) -> NoteLinks | None:
        """A note's links for its view; none while it waits to be indexed."""
        try:
            return self.parts.links.links_of(f"{vault}:{path}", files=False)
        except KbError:
            return None

    def status_json(self, request: Request) -> Response:
        # As `kb status --json` prints it: its dates and times as ISO text.
        text = json.dumps(self._report().as_json(), ensure_ascii=False, default=str)
        return Response(text, media_type="application/json")

    def vaults_json(self, request: Request) -> Response:
        vaults = self.parts.vaults.by_name.values()
        listed = [
            {"name": v.name, "folder": v.path.name, "obsidian": v.name in self.obsidian}
            for v in vaults
        ]
        return JSONResponse({"vaults": listed})

    async def ask_events(self, request: Request) -> Response:
        """The answer as server-sent events: `text` for each piece as the model writes it,
        then `done` with the answer rendered (citations as links, the sources), or `failure`
        with one line. At most ANSWERS_AT_ONCE at a time: past it, a 503 with one line."""
        try:
            form = read_form(request.query_params)
            if form.request is None:
                raise FormError("q: a question is needed")
        except KbError as exc:
            return _error_json(exc)
        if not self.answers.acquire(blocking=False):
            return JSONResponse({"error": BUSY}, status_code=503, headers={"retry-after": "10"})
        pieces: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()
        # Started now, not when the body is first read: the thread gives the place back
        # however the response ends, even one never sent.
        self._answer(form.request, pieces, stop)
        return StreamingResponse(
            _answer_events(pieces, stop), media_type="text/event-stream", headers=_NO_BUFFERING
        )

    def _answer(
        self, request: SearchRequest, pieces: asyncio.Queue[tuple[str, Any]], stop: threading.Event
    ) -> None:
        """The answer written in a thread of its own (the model's stream and the database
        block), each piece handed to the event loop as it comes; `stop` ends it."""
        loop = asyncio.get_running_loop()

        def put(kind: str, value: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the server has stopped: no one to tell
                loop.call_soon_threadsafe(pieces.put_nowait, (kind, value))

        def answer() -> None:
            try:
                answered = self.parts.searches.ask(
                    request, on_text=lambda text: put("text", text), stop=stop
                )
                put("done", self._answered(answered))
            except Stopped:
                pass  # the page was closed: no one is reading
            except KbError as exc:
                put("failure", str(exc))
            except Exception as exc:  # the page says so; the server goes on
                put("failure", f"{type(exc).__name__}: {first_line(exc)}")
            finally:
                self.answers.release()

        threading.Thread(target=answer, name="kb-web-ask", daemon=True).start()

    def _room_for_an_answer(self) -> bool:
        # A look, not a claim: the page's stream claims its place when it opens.
        if not self.answers.acquire(blocking=False):
            return False
        self.answers.release()
        return True

    def _answered(self, answer: Answer) -> dict[str, Any]:
        html = self.templates.get_template("answer.html").render(
            answer=answer,
            pieces=answer_pieces(answer),
            sources=self._cards(answer.question, [s.hit for s in answer.sources]),
        )
        # The text and sources too, for a client that renders them itself (kb's Obsidian
        # plugin puts no server HTML in the app).
        sources = [
            {
                k: getattr(s.hit, k)
                for k in ("vault", "path", "header_path", "start_line", "end_line")
            }
            for s in answer.sources
        ]
        return {
            "html": html,
            "not_in_notes": answer.not_in_notes,
            "cited": answer.cited,
            "text": answer.text,
            "sources": sources,
        }

    # -- helpers ------------------------------------------------------------------------------

    def _cards(self, query: str, hits: list[SearchHit]) -> list[Card]:
        """The hits as cards: the query's words marked, each note's facts read once."""
        candidates = self.parts.candidates
        marked = candidates.marked(query, [h.content for h in hits])
        facts = candidates.note_info((h.vault, h.path) for h in hits)
        return cards(hits, marked, facts, self.obsidian)

    def _report(self) -> StatusReport:
        return self.parts.status()

    def _page(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        values.setdefault("error", None)
        values.setdefault("warnings", ())
        html = self.templates.get_template(template).render(
            vaults=list(self.parts.vaults.by_name), **values
        )
        return HTMLResponse(html, status_code=status)


# A proxy in front (nginx) would otherwise hold the answer back until it is complete.
_NO_BUFFERING = {"x-accel-buffering": "no"}


async def _answer_events(
    pieces: asyncio.Queue[tuple[str, Any]], stop: threading.Event
) -> AsyncIterator[str]:
    try:
        while True:
            try:
                kind, value = await asyncio.wait_for(pieces.get(), _KEEP_ALIVE)
            except TimeoutError:
                yield ": the model is still writing\n\n"
                continue
            yield _event(kind, value)
            if kind != "text":
                return
    finally:
        # Ended, or its reader went away (a closed tab): the model's stream is closed either way.
        stop.set()


def _event(kind: str, data: object) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _events_url(request: Request) -> str:
    return "/api/ask?" + request.url.query if request.url.query else ""


def _error_json(exc: KbError, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": str(exc)}, status_code=status)
