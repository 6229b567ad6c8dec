"""`kb mcp`: kb's index over the Model Context Protocol, for AI assistants. Read-only.

Tools: `search` (raw chunks, as `kb query`), `get_note` (a note's text, or some of its
lines), `note_links` (the notes a note links to, those linking to it, its unresolved links),
`list_notes` (paged, by folder and tag), `related_notes` (as `kb related --json`), `status`,
and `ask` (an answer with its sources, as `kb ask`). Resources: every note as
`kb://<vault>/<path>`. No tool writes to a vault or to the index, and a path is only ever
read inside a vault's root, after symlinks are resolved.

Transports: stdio (what desktop assistants launch), or streamable HTTP on 127.0.0.1 with an
optional bearer token.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from importlib.metadata import version
from typing import Annotated, Any, Literal

import anyio.to_thread
from pydantic import AfterValidator, Field
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kb.config import SearchMode
from kb.container import Container
from kb.errors import KbError
from kb.mcp.arguments import WHOLE_NUMBER, ArgumentCheckedServer, Name, Offset, PathText, Text
from kb.results import SearchResult
from kb.search.answer import Answer, note_date
from kb.services.access import (
    Access,
    access,
    check_exposure,
    host_refusal,
    serving_token,
    token_matches,
)
from kb.services.note_links import NoteFinder
from kb.services.note_reader import NoteText, Vaults
from kb.services.relating import RelatedService
from kb.services.request_fields import (
    MODES,
    RequestField,
    Use,
    given_values,
    read,
    search_request,
    with_fields,
)
from kb.services.searching import SearchService
from kb.services.status_report import StatusReport
from kb.store import NoteInfo
from kb.store.candidates import CandidateReads
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import ToolAnnotations

Transport = Literal["stdio", "http"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# Descriptions longer than a line are given whole: the SDK sends a docstring as it is written,
# indentation and all.
_SEARCH = (
    "Search the user's notes; the best passages first, each the raw text of a chunk with its "
    "vault, note path, header path, 1-based line span and score. First-person queries "
    '("what did I decide …") are about the user.'
)
_ASK = (
    "Answer a question from the user's notes with kb's local chat model: a short answer that "
    "cites numbered sources ([1], [2]), or one sentence saying the notes don't say. Slower "
    "than `search` (seconds on a local model)."
)
_INSTRUCTIONS = (
    "kb is a search index of the user's Markdown notes. Use `search` to find passages (each "
    "with its vault, path and line span), `get_note` to read a note or some of its lines, "
    "`note_links` for the notes it links to and those that link to it, "
    "`list_notes` to browse, and `ask` for an answer written from the notes with numbered "
    "sources. Questions in the first person are about the user, the notes' owner."
)


@dataclass(frozen=True)
class NoteEntry:
    vault: str
    path: str
    date: str | None  # the note's date (kb.dates)
    modified: str  # ISO 8601, UTC
    tags: list[str]
    chunks: int
    personal: bool  # in the owner's personal folders


@dataclass(frozen=True)
class NoteList:
    notes: list[NoteEntry]
    total: int
    next_offset: int | None  # where the next page starts; None on the last page


@dataclass(frozen=True)
class AnswerSource:
    number: int
    vault: str
    path: str
    header_path: list[str]
    start_line: int
    end_line: int
    date: str | None
    content: str


@dataclass(frozen=True)
class AskResult:
    answer: str
    sources: list[AnswerSource]
    cited: list[int]
    not_in_notes: bool
    model: str | None
    # "text" when the passages came from full-text search alone; warnings say why.
    mode_used: SearchMode
    warnings: list[str]


@contextmanager
def _as_tool_error() -> Iterator[None]:
    # The SDK hides an unexpected exception's text from the client; a KbError's one line is
    # meant for the caller (a bad path, an empty index), so it is passed on as a tool error.
    try:
        yield
    except KbError as exc:
        raise ToolError(str(exc)) from None


def build_server(parts: Container) -> MCPServer:
    """An MCP server over kb's parts; every tool only reads, and each is a thin call into
    the part that does the work."""
    server = ArgumentCheckedServer(
        "kb", instructions=_INSTRUCTIONS, version=version("kb"), log_level="WARNING"
    )
    searches = parts.search_service()
    vaults = Vaults(parts.config.vaults)
    _add_search(server, searches)
    _add_get_note(server, vaults)
    _add_note_links(server, parts.note_finder())
    _add_list_notes(server, searches, candidates=parts.store.candidates)
    _add_related_notes(server, parts.related_service())
    _add_status(server, parts.status_reader())
    _add_ask(server, searches)
    _add_notes_as_resources(server, vaults)
    return server


def _arguments(use: Use) -> Callable[[RequestField], object]:
    """How the tool `search` or `ask` takes each field of its request
    (kb.services.request_fields); a value it cannot read is an invalid argument, said in one
    line (ArgumentCheckedServer)."""

    def argument(field: RequestField) -> object:
        described = Field(description=field.help_in(use))
        if field.kind == "text":
            return Annotated[Text, described]
        if field.kind == "count":
            bounded = Field(ge=1, le=field.most(use), description=field.help_in(use))
            return Annotated[int | None, bounded, WHOLE_NUMBER]
        if field.kind == "mode":
            return Annotated[Literal[MODES] | None, described]
        if not field.filter:
            raise TypeError(f"an MCP tool takes no {field.kind} field ({field.name})")
        parsed = AfterValidator(partial(read, field))
        if field.kind == "tags":
            return Annotated[Annotated[list[Text], parsed] | None, described]
        return Annotated[Annotated[Text, parsed] | None, described]

    return argument


def _add_search(server: MCPServer, searches: SearchService) -> None:
    @server.tool(annotations=_READ_ONLY, description=_SEARCH)
    @with_fields("mcp search", _arguments("mcp search"))
    def search(**fields: object) -> SearchResult:
        request = search_request(given_values("mcp search", fields))
        with _as_tool_error():
            return searches.search(request)


def _add_ask(server: MCPServer, searches: SearchService) -> None:
    @server.tool(annotations=_READ_ONLY, description=_ASK)
    @with_fields("mcp ask", _arguments("mcp ask"))
    async def ask(**fields: object) -> AskResult:
        request = search_request(given_values("mcp ask", fields))
        stop = threading.Event()
        try:
            with _as_tool_error():
                # Left to its thread when the client cancels the call, which `stop` then ends:
                # the model's stream is closed at its next piece, not run to its last.
                answer = await anyio.to_thread.run_sync(
                    partial(searches.ask, request, stop=stop), abandon_on_cancel=True
                )
        finally:
            stop.set()
        return _ask_result(answer)


def _ask_result(answer: Answer) -> AskResult:
    sources = [
        AnswerSource(
            s.number,
            s.hit.vault,
            s.hit.path,
            s.hit.header_path,
            s.hit.start_line,
            s.hit.end_line,
            s.date,
            s.hit.content,
        )
        for s in answer.sources
    ]
    return AskResult(
        answer.text,
        sources,
        answer.cited,
        answer.not_in_notes,
        answer.model,
        answer.mode_used,
        list(answer.warnings),
    )


def _add_get_note(server: MCPServer, vaults: Vaults) -> None:
    @server.tool(annotations=_READ_ONLY)
    def get_note(
        vault: Annotated[Name, Field(description="The vault's name, as `search` returns it.")],
        path: Annotated[PathText, Field(description="The note's path inside the vault.")],
        start_line: Annotated[
            int | None, Field(ge=1, description="First line to return (1-based)."), WHOLE_NUMBER
        ] = None,
        end_line: Annotated[
            int | None, Field(ge=1, description="Last line to return (inclusive)."), WHOLE_NUMBER
        ] = None,
    ) -> NoteText:
        """Read a note as it is on disk now, whole or a range of its lines."""
        with _as_tool_error():
            return vaults.read(vault, path, start_line, end_line)


def _add_note_links(server: MCPServer, finder: NoteFinder) -> None:
    @server.tool(annotations=_READ_ONLY)
    def note_links(
        note: Annotated[
            PathText,
            Field(
                description="The note: its path inside its vault ('folder/Note.md'), "
                "'vault:path', or its name as a [[link]] names it."
            ),
        ],
    ) -> dict[str, Any]:
        """A note's links: `links_to` (the notes it links to), `linked_from` (the notes that
        link to it, with the line of the link in each) and `unresolved` (its links that lead
        to no indexed note), each with the link's kind, target, heading or block, and text."""
        with _as_tool_error():
            return finder.links_of(note, files=False).as_json()


def _add_list_notes(
    server: MCPServer, searches: SearchService, *, candidates: CandidateReads
) -> None:
    @server.tool(annotations=_READ_ONLY)
    def list_notes(
        vault: Annotated[Name | None, Field(description="Only this vault.")] = None,
        folder: Annotated[
            PathText | None, Field(description="Only notes under this folder, e.g. 'Projects/'.")
        ] = None,
        tags: Annotated[
            list[Text] | None, Field(description="Only notes with all these tags.")
        ] = None,
        offset: Annotated[Offset, Field(description="Skip this many notes.")] = 0,
        limit: Annotated[
            int, Field(ge=1, le=500, description="At most this many."), WHOLE_NUMBER
        ] = 50,
    ) -> NoteList:
        """List the indexed notes in path order, a page at a time."""
        with _as_tool_error():
            # Only this config's vaults: another may share the index, or give one of its
            # names to another folder.
            mine = searches.searched() or tuple(searches.own_vaults)
            page = candidates.list_notes(
                vaults=[name for name in mine if vault in (None, name)],
                folder=folder,
                tags=tags or (),
                offset=offset,
                limit=limit,
            )
        end = offset + len(page.notes)
        return NoteList(
            [_entry(n) for n in page.notes], page.total, end if end < page.total else None
        )


def _add_related_notes(server: MCPServer, related: RelatedService) -> None:
    @server.tool(annotations=_READ_ONLY)
    def related_notes(
        vault: Annotated[Name, Field(description="The vault's name, as `search` returns it.")],
        path: Annotated[PathText, Field(description="The note's path inside the vault.")],
        line: Annotated[
            int | None,
            Field(ge=1, description="Only the passage holding this line (1-based)."),
        ] = None,
        top_k: Annotated[int, Field(ge=1, le=50, description="How many notes.")] = 10,
        unlinked: Annotated[
            bool, Field(description="Leave out the notes it already links to.")
        ] = False,
    ) -> dict[str, Any]:
        """The notes most related to a note (its links, the names it mentions, meaning,
        writers, dates, tags), best first, each with why; and the note's links both ways."""
        with _as_tool_error():
            found = related.related(vault, path, line=line, top_k=top_k, unlinked=unlinked)
        return found.as_json()


def _add_status(server: MCPServer, report: Callable[[], StatusReport]) -> None:
    @server.tool(annotations=_READ_ONLY)
    def status() -> dict[str, Any]:
        """What the index holds: notes, chunks, models, last sync, failed files, daemon, and
        the notes still waiting for their LLM context."""
        return report().summary()


def _add_notes_as_resources(server: MCPServer, vaults: Vaults) -> None:
    @server.resource("kb://{vault}/{+path}", mime_type="text/markdown")
    def note(vault: str, path: str) -> str:
        """A note of the user's vault, as it is on disk now."""
        try:
            return vaults.read(vault, path).text
        except KbError as exc:
            raise ResourceNotFoundError(str(exc)) from None


def _entry(info: NoteInfo) -> NoteEntry:
    modified = dt.datetime.fromtimestamp(info.mtime_ns / 1e9, dt.UTC)
    return NoteEntry(
        info.vault,
        info.path,
        note_date(info),
        modified.isoformat(timespec="seconds"),
        info.tags,
        info.chunks,
        info.personal,
    )


class HostChecked:
    """Lets through only HTTP requests whose Host header names this server and its port
    exactly, by the rule the web page's guard applies (kb.services.access.host_refusal): the
    SDK's own check takes `localhost:8765.evil.com` for localhost on port 8765."""

    def __init__(self, app: ASGIApp, rules: Access) -> None:
        self.app = app
        self.rules = rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            refused = host_refusal(host, self.rules)
            if refused is not None:
                status, why = refused
                await JSONResponse({"error": why}, status_code=status)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BearerAuth:
    """Lets through only HTTP requests that carry `Authorization: Bearer <token>`, the scheme
    in any case (RFC 7235)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, credentials = given.partition(b" ")
            matched = token_matches(credentials.strip(b" "), self.expected)
            if not (matched and scheme.lower() == b"bearer"):
                response = JSONResponse(
                    {"error": "invalid_token", "error_description": "a bearer token is required"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def serve(
    server: MCPServer, transport: Transport, *, host: str, port: int, token: str | None
) -> None:
    """Serve until the client goes away (stdio) or the process is stopped (HTTP)."""
    if transport == "stdio":
        server.run("stdio")
        return
    token = serving_token(token)
    check_exposure(host, token, "KB_MCP_TOKEN")
    import uvicorn

    # Stateless: no tool keeps anything between calls, and a session that is never closed would
    # otherwise hold its memory until it expires (with the SDK's defaults, 10,000 sessions of
    # about 40 kB each for 30 minutes).
    app: ASGIApp = server.streamable_http_app(host=host, stateless_http=True)
    if token:
        app = BearerAuth(app, token)
    app = HostChecked(app, access(host, token, port=port))
    uvicorn.run(app, host=host, port=port, log_level="warning")
