"""The `kb` command line."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import signal
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from kb.cli.render import consoles, print_error, print_results, print_warnings
from kb.cli.render import shown as _shown
from kb.config import MAX_ENRICH_CONCURRENCY, MAX_TOP_K, SEARCH_MODES, Config, load_config
from kb.errors import EXIT_ERROR, DatabaseError, KbError
from kb.logfmt import LogfmtFormatter, event
from kb.redact import redact
from kb.services.status import duration
from kb.terminal import printable

# Each command imports what only it needs: `kb --help` and `kb query` load no Markdown
# parser, file watcher or answer prompts.
if TYPE_CHECKING:
    from rich.progress import Progress

    from kb.container import Container
    from kb.daemon.query_socket import Reply, Runner
    from kb.indexing.enrich import EnrichReport
    from kb.indexing.indexer import SyncReport
    from kb.search.answer import Answer
    from kb.services import init
    from kb.services.search import SearchRequest
    from kb.services.status import StatusReport
    from kb.store import QueueStatus, SearchFilter
    from kb.web.server import WebServer

# Dates on the command line: a day, or a day and a time (local unless an offset is given).
_DATE_FORMATS = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"]


def _similarity(value: float | None) -> float | None:
    # Written so that NaN fails too: it compares false with every bound.
    if value is not None and not -1 <= value <= 1:
        raise typer.BadParameter(f"{value} is not a cosine similarity (from -1 to 1)")
    return value


# The options `kb query` and `kb ask` share: the same search, filtered the same way.
Threshold = Annotated[
    float | None,
    typer.Option(
        "--threshold", "-t", help="Minimum cosine similarity, -1 to 1.", callback=_similarity
    ),
]
PathPrefix = Annotated[
    str | None,
    typer.Option(
        "--path", "-p", help="Only notes in this folder (with its subfolders), or this note."
    ),
]
Tags = Annotated[
    list[str] | None,
    typer.Option(
        "--tag",
        help="Only notes with this tag (or a tag nested under it); repeat for all of several.",
    ),
]
After = Annotated[
    dt.datetime | None,
    typer.Option(
        "--after",
        help="Only notes dated on or after this day (the note's date: its date property, "
        "its daily-note name, a date in its file name, else its file's day).",
        formats=_DATE_FORMATS,
    ),
]
Before = Annotated[
    dt.datetime | None,
    typer.Option("--before", help="Only notes dated before this day.", formats=_DATE_FORMATS),
]
ModifiedAfter = Annotated[
    dt.datetime | None,
    typer.Option(
        "--modified-after",
        help="Only notes whose file was modified at or after this date/time.",
        formats=_DATE_FORMATS,
    ),
]
ModifiedBefore = Annotated[
    dt.datetime | None,
    typer.Option(
        "--modified-before",
        help="Only notes whose file was modified before this date/time.",
        formats=_DATE_FORMATS,
    ),
]
NoOwner = Annotated[
    bool, typer.Option("--no-owner", help="Do not read first-person text as about the owner.")
]

app = typer.Typer(
    help="kb: a contextual search index of your Markdown vault.",
    no_args_is_help=True,
    add_completion=False,
)


_OUT, _ERR = consoles()


def _out() -> Console:
    return _OUT


def _err() -> Console:
    return _ERR


EXIT_FILES_FAILED = 3
EXIT_OUT_OF_SYNC = 4


@dataclass(frozen=True)
class _Options:
    """The global options, handed to each command through typer's context."""

    config: Path | None = None
    verbose: bool = False


@app.callback()
def main(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            envvar="KB_CONFIG",
            dir_okay=False,
            help="Config file (default: ~/.config/kb/config.toml).",
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log more.")] = False,
) -> None:
    ctx.obj = _Options(config, verbose)


class _SafeLog(logging.Filter):
    """Log messages shown like everything else: no secrets, no terminal control."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = printable(redact(record.getMessage())), None
        return True


def _setup_logging(verbose: bool) -> None:
    from rich.logging import RichHandler

    handler = RichHandler(
        console=_err(), show_time=False, show_path=False, markup=False, rich_tracebacks=False
    )
    handler.addFilter(_SafeLog())
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[handler],
        force=True,
    )
    for noisy in ("httpx", "pgserver", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # The pool warns at each failed reconnection; the command's own error says it once.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


def _fail(message: str) -> typer.Exit:
    print_error(_err(), message)
    return typer.Exit(EXIT_ERROR)


@contextmanager
def _session(ctx: typer.Context) -> Iterator[Container]:
    """kb's parts for the configured database; a KbError anywhere becomes one line and exit
    code 1."""
    import psycopg

    from kb.container import Container
    from kb.db import disk_full, first_line

    options: _Options = ctx.obj
    config: Config | None = None
    try:
        _setup_logging(options.verbose)
        config = load_config(options.config)
        with Container.open(config) as parts:
            yield parts
    except (DatabaseError, psycopg.Error) as exc:
        full = disk_full(exc, config.database_url, config.data_dir) if config else None
        if full or isinstance(exc, KbError):
            raise _fail(str(full or exc)) from None
        # The database went away mid-command (or refused a statement): one line, no traceback.
        raise _fail(f"database error: {first_line(exc)}") from None
    except KbError as exc:
        raise _fail(str(exc)) from None


def _progress() -> Progress:
    """A progress bar on stderr: what, a bar, done of total, the task's stats, time."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        console=_err(),
        transient=False,
    )


def _run_sync(parts: Container, *, force: bool) -> SyncReport:
    from kb.indexing.indexer import FileEvent, SyncReport

    with _progress() as progress:
        task = progress.add_task("indexing", total=None, stats="")
        report = SyncReport()

        def on_scan(files: int) -> None:
            total = progress.tasks[task].total or 0
            progress.update(task, total=total + files)

        def on_event(event: FileEvent) -> None:
            report.add(event)
            stats = (
                f"chunks {report.chunks} · LLM calls {report.llm_calls} · "
                f"skipped {report.unchanged + report.moved} · failed {report.failed}"
            )
            # Deleted rows and unreadable folders are no file of the scan's count.
            advance = 0 if event.action in ("deleted", "unlistable") else 1
            progress.update(task, advance=advance, stats=stats)

        with parts.indexer(on_event=on_event, on_scan=on_scan) as indexer:
            return indexer.sync(force=force)


def _summarize(report: SyncReport) -> None:
    _err().print(
        f"{report.files} files: {report.indexed} indexed, {report.unchanged} unchanged, "
        f"{report.moved} moved, {report.deleted} deleted, {report.failed} failed; "
        f"{report.chunks} chunks written, {report.llm_calls} LLM calls, "
        f"{report.embedded} texts embedded"
        + (
            f", {report.fallbacks} model answers rejected (structural context stored; "
            "`kb --verbose index` names them)"
            if report.fallbacks
            else ""
        )
    )
    for failure in report.failures:
        _err().print(
            f"  failed: {_shown(failure.vault)}/{_shown(failure.path)}: {_shown(failure.error)}"
        )
    for folder in report.unlisted:
        _err().print(
            f"  cannot read {_shown(folder.vault)}/{_shown(folder.path)}: {_shown(folder.error)};"
            " the notes indexed under it are kept as they were"
        )


def _exit_code(report: SyncReport, enriched: EnrichReport | None) -> None:
    # A folder that could not be read is notes that could not be synced: the same status.
    if report.failed or report.unlistable or (enriched is not None and enriched.failed):
        raise typer.Exit(EXIT_FILES_FAILED)


def _enrichment(parts: Container, *, wait: bool) -> EnrichReport | None:
    """Say what is queued for enrichment and when it should be done; with `wait`, see it
    done (here, or by the running workers) and report what failed."""

    from kb.services import indexing

    queue = parts.store.queue
    backlog = indexing.backlog(queue)
    if backlog is None:
        return None
    _err().print(_queue_line(backlog.queue, backlog.workers))
    if not wait:
        if not backlog.workers:
            _err().print(
                "  they are searchable now; `kb index --wait`, `kb worker` or `kb daemon` "
                "writes their LLM context"
            )
        return None
    with _progress() as progress:
        task = progress.add_task("enriching", total=backlog.queue.items, stats="")

        def show(report: EnrichReport, left: QueueStatus) -> None:
            # Notes queued meanwhile (a daemon indexing edits) join the total.
            total = max(progress.tasks[task].total or 0, report.done + left.items)
            eta = f" · ETA {duration(left.eta_seconds)}" if left.eta_seconds else ""
            stats = f"LLM calls {report.llm_calls} · failing {left.failing}{eta}"
            progress.update(task, total=total, completed=total - left.items, stats=stats)

        enriched = indexing.finish(queue, parts.drain, show)
    report, left = enriched.report, enriched.left
    if report.done:
        _err().print(
            f"enriched {report.done} notes here: {report.llm_calls} LLM calls, "
            f"{report.embedded} texts embedded"
            + (f", {report.fallbacks} model answers rejected" if report.fallbacks else "")
        )
    _err().print(
        f"{left.items} notes still queued, {left.failing} failing"
        if left.items
        else "every note has its LLM context"
    )
    for f in left.failures:
        _err().print(
            f"  failing: {_shown(f.vault)}/{_shown(f.path)}: {_shown(f.error)}"
            f" ({f.attempts} attempts)"
        )
    return report


def _queue_line(status: QueueStatus, workers: int) -> str:

    rate = (
        f", {status.rate * 60:.1f} notes/min, ETA {duration(status.eta_seconds)}"
        if status.rate and status.eta_seconds
        else ""
    )
    held = f" by {workers} worker{'s' if workers != 1 else ''}" if workers else ""
    return (
        f"enrichment: {status.items} notes queued for their LLM context, "
        f"{status.in_progress} in progress{held}, {status.failing} failing{rate}"
    )


Wait = Annotated[
    bool,
    typer.Option(
        "--wait",
        help="Then wait until every note has its LLM context (enriching here when no "
        "worker is running).",
    ),
]


@app.command()
def index(ctx: typer.Context, wait: Wait = False) -> None:
    """Sync every configured vault into the index (adds, updates, removes).

    Notes are searchable when it returns; their LLM context is written by workers (`kb
    worker`, `kb daemon`) or, with --wait, before it returns.
    """
    with _session(ctx) as parts:
        report = _run_sync(parts, force=False)
        _summarize(report)
        enriched = _enrichment(parts, wait=wait)
    _exit_code(report, enriched)


@app.command()
def reindex(
    ctx: typer.Context,
    embeddings_only: Annotated[
        bool,
        typer.Option(
            "--embeddings-only", help="Keep summaries; only re-embed the stored full_context."
        ),
    ] = False,
    wait: Wait = False,
) -> None:
    """Redo everything, ignoring every cache (or only the embeddings)."""
    with _session(ctx) as parts:
        if embeddings_only:
            with parts.indexer() as indexer:
                done = indexer.reembed_all()
            passages = f" and {done.passages} passages" if done.passages else ""
            _err().print(
                f"re-embedded {done.chunks} chunks{passages} with {parts.config.llm.embed_model}"
            )
            return
        report = _run_sync(parts, force=True)
        _summarize(report)
        enriched = _enrichment(parts, wait=wait)
    _exit_code(report, enriched)


@app.command()
def query(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="What to look for.")],
    top_k: Annotated[
        int | None,
        typer.Option("--top-k", "-k", min=1, max=MAX_TOP_K, help="How many chunks (default 5)."),
    ] = None,
    threshold: Threshold = None,
    path: PathPrefix = None,
    tag: Tags = None,
    after: After = None,
    before: Before = None,
    modified_after: ModifiedAfter = None,
    modified_before: ModifiedBefore = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            "-m",
            metavar="MODE",
            help="vector, text or hybrid (default: query.mode, hybrid).",
        ),
    ] = None,
    rerank: Annotated[
        bool | None,
        typer.Option(
            "--rerank/--no-rerank",
            help="Let the chat model re-rank the best candidates (default: query.rerank).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain", help="Show each hit's vector and text rank and score, and the fused score."
        ),
    ] = False,
    no_owner: NoOwner = False,
) -> None:
    """Search the index; prints the raw chunks, best first."""
    call = _query_call(
        text=text,
        top_k=top_k,
        threshold=threshold,
        path=path,
        tag=tag,
        after=after,
        before=before,
        modified_after=modified_after,
        modified_before=modified_before,
        mode=mode,
        rerank=rerank,
        as_json=as_json,
        explain=explain,
        no_owner=no_owner,
    )
    with _session(ctx) as parts:
        found = parts.search_service().search(call.request)
    print_results(_out(), _err(), found, as_json=call.as_json, explain=call.explain)


@dataclass(frozen=True)
class _QueryCall:
    """A `kb query` command line, read: the search it asks for, and how to show what it finds."""

    request: SearchRequest
    as_json: bool
    explain: bool


def _query_call(
    *,
    text: str,
    top_k: int | None,
    threshold: float | None,
    path: str | None,
    tag: Sequence[str] | None,
    after: dt.datetime | None,
    before: dt.datetime | None,
    modified_after: dt.datetime | None,
    modified_before: dt.datetime | None,
    mode: str | None,
    rerank: bool | None,
    as_json: bool,
    explain: bool,
    no_owner: bool,
) -> _QueryCall:
    """`kb query`'s options as a request (they are read here, wherever the search runs: in
    this process, or in a daemon answering a launcher)."""
    from kb.services.search import SearchRequest

    if mode is not None and mode not in SEARCH_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(SEARCH_MODES)}", param_hint="--mode")
    request = SearchRequest(
        text,
        top_k=top_k,
        mode=mode,
        threshold=threshold,
        filters=_filters(path, tag, (after, before), (modified_after, modified_before)),
        rerank=rerank,
        owner=not no_owner,
    )
    return _QueryCall(request, as_json=as_json, explain=explain)


def _filters(
    path: str | None,
    tag: Sequence[str] | None,
    dated: tuple[dt.datetime | None, dt.datetime | None],
    modified: tuple[dt.datetime | None, dt.datetime | None],
) -> SearchFilter:
    """The filters of `kb query` and `kb ask`: `dated` the note's date (its day is what
    counts), `modified` the file's time (to the second), each (after, before)."""
    from kb.store import SearchFilter

    after, before = (t.date() if t else None for t in dated)
    return SearchFilter(
        path_prefix=path,
        tags=tuple(tag or ()),
        after=after,
        before=before,
        modified_after=modified[0],
        modified_before=modified[1],
    )


@app.command(name="ask")
def ask_command(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="What to ask your notes.")],
    top_k: Annotated[
        int | None,
        typer.Option(
            "--top-k", "-k", min=1, max=MAX_TOP_K, help="How many passages to read (default 5)."
        ),
    ] = None,
    threshold: Threshold = None,
    path: PathPrefix = None,
    tag: Tags = None,
    after: After = None,
    before: Before = None,
    modified_after: ModifiedAfter = None,
    modified_before: ModifiedBefore = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object at the end.")] = (
        False
    ),
    no_owner: NoOwner = False,
) -> None:
    """Answer a question from your notes, citing the passages it used."""
    from kb.services.search import SearchRequest

    request = SearchRequest(
        question,
        top_k=top_k,
        threshold=threshold,
        filters=_filters(path, tag, (after, before), (modified_after, modified_before)),
        owner=not no_owner,
    )

    def show(text: str) -> None:
        _out().print(printable(text), end="", markup=False, highlight=False, soft_wrap=True)

    with _session(ctx) as parts:
        answer = parts.search_service().ask(request, on_text=None if as_json else show)
    print_warnings(_err(), answer.warnings)
    if as_json:
        _out().file.write(json.dumps(answer_json(answer), ensure_ascii=False, indent=2) + "\n")
        return
    _out().print()
    _print_sources(answer)


def answer_json(answer: Answer) -> dict[str, object]:
    """`kb ask --json`: the answer, its numbered sources (as `kb query --json`), what it cited."""
    return {
        "question": answer.question,
        "answer": answer.text,
        "sources": [
            {"number": s.number, **asdict(s.hit), "date": s.date, "cut": s.cut}
            for s in answer.sources
        ],
        "cited": answer.cited,
        "not_in_notes": answer.not_in_notes,
        "model": answer.model,
        "prompt_version": answer.prompt_version,
        "timings": asdict(answer.timings),
        "mode_used": answer.mode_used,
        "warnings": list(answer.warnings),
    }


def _print_sources(answer: Answer) -> None:
    if not answer.sources:
        return
    _out().print()
    for s in answer.sources:
        style = "bold" if s.number in answer.cited else "dim"
        headers = " > ".join(s.hit.header_path)
        _out().print(
            f"[{style}]\\[{s.number}] {escape(s.hit.vault)}/{escape(s.hit.path)}"
            f":{s.hit.start_line}-{s.hit.end_line}[/]"
            + (f"  [dim]{escape(headers)}[/]" if headers else "")
            + (f"  [dim]{escape(s.date)}[/]" if s.date else ""),
            highlight=False,
        )


@app.command(name="mcp")
def mcp_command(
    ctx: typer.Context,
    http: Annotated[
        bool,
        typer.Option("--http", help="Serve streamable HTTP instead of stdio."),
    ] = False,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on with --http.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port to listen on with --http.")
    ] = 8765,
) -> None:
    """Serve kb to AI assistants over the Model Context Protocol (read-only).

    stdio by default, as desktop assistants launch it; --http serves streamable HTTP at
    http://HOST:PORT/mcp, requiring `Authorization: Bearer $KB_MCP_TOKEN` when that is set.
    """
    from kb.mcp.server import build_server, serve

    # Nothing to finish on a stop: no tool writes, and a stopped client wants no answer. (A
    # stdio server could not end otherwise: its reader thread blocks on stdin until exit.)
    # Over HTTP, uvicorn shuts down first, then hands the signal on.
    _stop_on_signals(lambda _signum: _exit_now(0))
    with _session(ctx) as parts:
        serve(
            build_server(parts),
            "http" if http else "stdio",
            host=host,
            port=port,
            token=os.environ.get("KB_MCP_TOKEN") or None,
        )


ServeHost = Annotated[str, typer.Option("--host", help="Address the web page listens on.")]
ServePort = Annotated[
    int, typer.Option("--port", min=1, max=65535, help="Port the web page listens on.")
]
AllowHosts = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        help="Another name the page may be reached by (a DNS name of this machine); repeatable.",
    ),
]


@app.command(name="serve")
def serve_command(
    ctx: typer.Context,
    host: ServeHost = "127.0.0.1",
    port: ServePort = 8766,
    allow_host: AllowHosts = None,
) -> None:
    """Serve a web page to search, read and ask your notes (read-only).

    Beyond 127.0.0.1 it needs KB_SERVE_TOKEN; the address it prints carries the token.
    """
    stop = threading.Event()
    _stop_on_signals(lambda _signum: stop.set())
    with _session(ctx) as parts:
        server = _web_server(parts, host, port, tuple(allow_host or ()))
        stop.wait()
        server.stop()


def _web_server(parts: Container, host: str, port: int, allow_hosts: tuple[str, ...]) -> WebServer:
    """The web page, serving: its address printed (with the token, when one is needed)."""
    from kb.services.access import check_exposure, serving_token
    from kb.web.server import WebServer

    token = serving_token(os.environ.get("KB_SERVE_TOKEN"))
    check_exposure(host, token, "KB_SERVE_TOKEN")
    server = WebServer(
        parts.web_app(host=host, token=token, allow_hosts=allow_hosts), host=host, port=port
    )
    server.start()
    address = server.url + (f"?token={token}" if token else "")
    _err().print(f"kb serve: {address}", markup=False, highlight=False, soft_wrap=True)
    return server


@app.command()
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """What the index holds, which models made it, and what failed."""
    from kb.services.status import status_report

    with _session(ctx) as parts:
        status = status_report(parts.config, parts.store)
    if as_json:
        text = json.dumps(status.as_json(), ensure_ascii=False, indent=2, default=str)
        _out().file.write(text + "\n")
        return
    report = status.index
    _out().print(f"database     {_shown(status.database)}")
    _out().print(f"documents    {report.documents}")
    _out().print(f"chunks       {report.chunks} ({report.embedded} embedded)")
    _out().print(
        f"embeddings   {report.embed_model or '-'} ({report.dimensions or '-'} dimensions)"
    )
    share = report.cut / report.chunks if report.chunks else 0.0
    _out().print(
        f"embedder     reads {status.configured.embed_profile.window} tokens; {report.cut} "
        f"chunks ({share:.0%}) have a full context longer than that, embedded cut"
    )
    models = ", ".join(f"{m} ({n} chunks)" for m, n in report.chat_models.items()) or "-"
    _out().print(f"chat models  {_shown(models)}")
    fallbacks = ", ".join(f"{n} {task.replace('_', ' ')}" for task, n in report.fallbacks.items())
    _out().print(f"fallbacks    {fallbacks or 'none'}")
    last = report.last_sync
    _out().print(f"last sync    {last.at if last else 'never'}")
    _out().print(f"failed files {len(report.failures)}")
    for f in report.failures:
        _out().print(f"  {_shown(f.vault)}/{_shown(f.path)}: {_shown(f.error)}")
    for vault, lines in status.obsidian.items():
        _out().print(
            f"obsidian     {_shown(vault)}: {'; '.join(map(_shown, lines)) or 'no settings'}"
        )
    if status.undated:
        _out().print(f"undated      {len(status.undated)} notes (a date property names no day)")
    _print_daemons(status)
    _print_enrichment(status)


def _print_enrichment(status: StatusReport) -> None:

    queue = status.queue
    rate = f"{queue.rate * 60:.1f} notes/min" if queue.rate else "no recent rate"
    _out().print(
        f"enrichment   {queue.items} notes queued, {queue.in_progress} in progress, "
        f"{queue.failing} failing; {queue.done_last_hour} done in the last hour, {rate}, "
        f"ETA {duration(queue.eta_seconds) if queue.items else '-'}"
    )
    for f in queue.failures:
        _out().print(
            f"  failing: {_shown(f.vault)}/{_shown(f.path)}: {_shown(f.error)}"
            f" ({f.attempts} attempts)"
        )
    alive = status.running_workers
    _out().print(f"workers      {len(alive) or 'none'} running")
    for w in alive:
        _out().print(
            f"  {_shown(w.host)} (pid {w.pid}): {w.in_hand} of {w.concurrency} "
            f"notes in hand, heartbeat {w.heartbeat_age:.0f}s ago"
        )
        if w.last_error:
            _out().print(f"  last error: {_shown(w.last_error)}")


# -- the daemon ----------------------------------------------------------------------------------


def _print_daemons(status: StatusReport) -> None:
    writer = status.writer
    if writer:
        _out().print(
            f"daemon       running on {_shown(writer.host)} (pid {writer.pid}), "
            f"{_shown(writer.activity)}, {writer.queue_length} paths queued, "
            f"heartbeat {writer.heartbeat_age:.0f}s ago"
        )
    else:
        _out().print("daemon       not running")
    for d in status.daemons:
        if d is writer:
            continue
        state = "standby" if d.alive and d.role == "standby" else "dead"
        if d.alive and d.role != "standby":
            state = _shown(d.activity)
        _out().print(
            f"  {state}: {_shown(d.host)} (pid {d.pid}), heartbeat {d.heartbeat_age:.0f}s ago"
        )
    for d in status.daemons:
        if d.alive and d.last_error:
            _out().print(f"  last error: {_shown(d.last_error)}")
    last = status.last_reconcile
    if last:
        _out().print(
            f"reconciled   {last.at} ({_shown(last.reason)}): {last.files} files, "
            f"{last.indexed} indexed, {last.deleted} deleted, {last.failed} failed"
        )
    else:
        _out().print("reconciled   never")


@app.command()
def daemon(
    ctx: typer.Context,
    serve: Annotated[
        bool, typer.Option("--serve", help="Also serve the web page, as `kb serve` does.")
    ] = False,
    host: ServeHost = "127.0.0.1",
    port: ServePort = 8766,
    allow_host: AllowHosts = None,
) -> None:
    """Watch the vaults and keep the index equal to them (foreground; logs to stderr).

    SIGTERM or SIGINT finishes the file in hand (or abandons it after daemon.shutdown_grace
    seconds; its transaction is rolled back) and exits. A second signal exits at once.
    """
    from kb.daemon.query_socket import serving
    from kb.locations import config_identity

    log, stop = _service(ctx, "kb.daemon")
    options: _Options = ctx.obj
    identity = config_identity(options.config, os.environ)
    parts = _connect_until_stopped(_service_config(ctx), stop, log)
    if parts is None:
        return
    runner = parts.daemon(stop=stop)
    web = None
    if serve:
        try:
            web = _web_server(parts, host, port, tuple(allow_host or ()))
        except KbError as exc:
            parts.close()
            raise _fail(str(exc)) from None
        event(log, "serving the web page", url=web.url)
    with serving(identity, os.environ, _forwarded(parts)) as path:
        if path is not None:
            event(log, "answering queries", socket=str(path))
        runner.run()
    if web is not None:
        web.stop()
    if runner.abandoned:
        # A worker thread is still waiting on the LLM; Postgres rolls its transaction back.
        _exit_now(0)
    parts.close()


@app.command(name="worker")
def worker_command(
    ctx: typer.Context,
    until_empty: Annotated[
        bool,
        typer.Option("--until-empty", help="Exit once no queued note is left to claim."),
    ] = False,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-n",
            min=1,
            max=MAX_ENRICH_CONCURRENCY,
            help="Notes enriched at once (default enrich.concurrency).",
        ),
    ] = None,
) -> None:
    """Write the LLM context of queued notes (foreground; logs to stderr).

    Any number of workers, on any machines, may drain one database's queue; each needs the
    database and its model servers, not the vault. SIGTERM or SIGINT finishes the notes in
    hand and exits; a second signal exits at once (another worker takes them over).
    """
    log, stop = _service(ctx, "kb.worker")
    parts = _connect_until_stopped(_service_config(ctx), stop, log)
    if parts is None:
        return
    event(log, "worker started", concurrency=concurrency or parts.config.enrich.concurrency)
    runner = parts.worker(stop=stop, until_empty=until_empty, concurrency=concurrency)
    runner.run()
    event(log, "worker stopped")
    parts.close()


def _forwarded(parts: Container) -> Runner:
    """How the daemon answers a launcher's `kb query`: the query's arguments read with the
    command's own options, the search run by the search service; the launcher shows what it
    finds (kb.cli.render) as the command would."""
    import psycopg

    from kb.daemon.query_socket import Failed, Served

    query_command = typer.main.get_group(app).commands["query"]
    searches = parts.search_service()

    def run(args: tuple[str, ...]) -> Reply | None:
        try:
            with query_command.make_context("kb query", list(args)) as read:
                call = _query_call(**read.params)
        except (typer.TyperException, typer.Exit, typer.Abort):
            return None  # the launcher shows usage errors as the command line does
        try:
            found = searches.search(call.request)
        except (DatabaseError, psycopg.Error):
            # The launcher runs it, and says what failed as the command says it alone.
            return None
        except KbError as exc:
            return Failed(str(exc))
        return Served(found, as_json=call.as_json, explain=call.explain)

    return run


def _service(ctx: typer.Context, name: str) -> tuple[logging.Logger, threading.Event]:
    """A long-running command's logging (logfmt on stderr) and its stop event, set by the
    first SIGTERM or SIGINT; a second one exits at once."""
    options: _Options = ctx.obj
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    logging.basicConfig(
        level=logging.DEBUG if options.verbose else logging.INFO,
        handlers=[handler],
        force=True,
    )
    for noisy in ("httpx", "pgserver", "psycopg.pool", "openai", "watchdog"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    log = logging.getLogger(name)
    stop = threading.Event()

    def stopping(signum: signal.Signals) -> None:
        event(log, "stopping", signal=signum.name)
        stop.set()

    _stop_on_signals(stopping)
    return log, stop


def _stop_on_signals(stopping: Callable[[signal.Signals], None]) -> None:
    """How every command that runs until stopped (mcp, daemon, worker) takes SIGTERM and
    SIGINT: the first calls `stopping`, which ends the command as a normal exit would; a
    second exits at once. Either way an embedded PostgreSQL this process was the last to
    hold is stopped: an assistant or a service manager stops kb with SIGTERM."""
    signalled = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if signalled.is_set():
            _exit_now(EXIT_ERROR)  # a second signal: the user does not want to wait
        signalled.set()
        stopping(signal.Signals(signum))

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def _exit_now(code: int) -> NoReturn:
    """Exit without waiting for threads still at work (their transactions roll back). Exit
    handlers are skipped, so the embedded PostgreSQL is let go of here."""
    from kb.db import release_embedded

    logging.shutdown()
    release_embedded()
    os._exit(code)


def _service_config(ctx: typer.Context) -> Config:
    options: _Options = ctx.obj
    try:
        return load_config(options.config)
    except KbError as exc:
        raise _fail(str(exc)) from None


def _connect_until_stopped(
    config: Config, stop: threading.Event, log: logging.Logger
) -> Container | None:
    """Open kb's parts, waiting for the database as long as it takes (or until stopped)."""
    from kb.container import Container

    delay = 1.0
    while not stop.is_set():
        try:
            return Container.open(config)
        except DatabaseError as exc:
            event(
                log, "database unreachable: retrying", logging.ERROR, error=str(exc), retry_in=delay
            )
            stop.wait(delay)
            delay = min(delay * 2, 30.0)
    return None


@app.command(name="init")
def init_command(
    ctx: typer.Context,
    vault: Annotated[
        Path, typer.Argument(help="The vault's folder (default: this one).", show_default=False)
    ] = Path("."),
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Accept every proposal.")] = False,
    owner: Annotated[
        str | None, typer.Option("--owner", help="The vault owner's full name.")
    ] = None,
    personal: Annotated[
        list[str] | None,
        typer.Option("--personal", help="A personal-folder glob (repeatable), with the proposals."),
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option("--ignore", help="A glob never indexed (repeatable).")
    ] = None,
    provider: Annotated[str, typer.Option("--provider", help="ollama, openai or fake.")] = "ollama",
    name: Annotated[
        str | None, typer.Option("--name", help="The vault's name (default: its folder's).")
    ] = None,
    add: Annotated[
        bool, typer.Option("--add", help="Add this vault to the existing config.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing config.")] = False,
) -> None:
    """Write a config for a vault: the owner, personal folders, what to skip, the models."""
    from kb.config import PROVIDERS, VaultConfig, parse_config
    from kb.locations import find_config_file
    from kb.services import init

    options: _Options = ctx.obj
    target = find_config_file(options.config)
    path = vault.expanduser().resolve()
    try:
        server = next((p for p in PROVIDERS if p == provider), None)
        if server is None:
            raise KbError(f"--provider must be one of {', '.join(PROVIDERS)}")
        existing = target.read_text(encoding="utf-8") if target.exists() else None
        configured = load_config(target).vaults if add and existing is not None else ()
        if add and existing is None:
            raise KbError(f"--add: there is no config at {target} to add to")
        init.refuse_vault(path, configured)
        vault_name = name or path.name or "vault"
        if any(v.name == vault_name for v in configured):
            raise KbError(f"a vault is already named '{vault_name}': pass --name")
        out = _out()
        out.print(f"vault        {_shown(str(path))} (named '{_shown(vault_name)}')")
        found = [] if add else init.owner_names(*init.names_on_this_machine())
        owner_name = "" if add else _owner(owner, yes, found)
        if owner_name:
            out.print(f"owner        {_shown(owner_name)}")
        survey = init.survey(VaultConfig(vault_name, path, ignore=tuple(ignore or ())))
    except KbError as exc:
        raise _fail(str(exc)) from None

    chosen = list(_chosen(init.personal_proposals(survey), yes))
    chosen += [init.Proposal(g, "given with --personal") for g in personal or ()]
    out.print("skipped      " + init.ALWAYS_SKIPPED)
    for proposal in init.ignore_proposals(survey.settings):
        out.print(f"  {_shown(proposal.glob)}  ({_shown(proposal.reason)}, followed at each sync)")
    for glob in ignore or ():
        out.print(f"  {_shown(glob)}  (given with --ignore)")
    choices = init.Choices(
        owner=owner_name,
        name=vault_name,
        path=path,
        personal=tuple(chosen),
        ignore=tuple(ignore or ()),
        followed=tuple(survey.settings.lines()),
        provider=server,
    )
    text = (
        existing.rstrip("\n") + "\n" + init.vault_text(choices)
        if add and existing is not None
        else init.config_text(choices, dt.date.today())
    )
    try:
        # Read as kb will read it, the environment's overrides (OLLAMA_HOST) included.
        config = parse_config(tomllib.loads(text), base_dir=target.parent, env=dict(os.environ))
    except (KbError, tomllib.TOMLDecodeError) as exc:
        raise _fail(f"the config would not be valid: {exc}") from None
    _check_models(config)
    if existing is not None and not add and not force:
        _err().print(f"{_shown(str(target))} exists; --force overwrites it. It would change:")
        for line in init.changes(existing, text, target):
            _err().print(printable(line), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_ERROR)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    out.print(f"wrote        {_shown(str(target))}")
    at = "" if options.config is None else f" --config {_shown(str(target))}"
    out.print(f"next         kb{at} index", soft_wrap=True)
    out.print(f'then         kb{at} query "…"', soft_wrap=True)
    out.print(f"or browse    kb{at} serve, then http://127.0.0.1:8766/", soft_wrap=True)
    out.print(
        f"in sync      kb{at} daemon keeps the index in sync; deploy/ has service files "
        "to run it (kb.service, kb.daemon.plist)",
        soft_wrap=True,
    )


def _owner(given: str | None, yes: bool, found: list[str]) -> str:
    """The owner's name: given, proposed (and asked, unless --yes), or asked for."""
    if given is not None:
        name = given.strip()
    elif yes:
        if not found:
            raise KbError("no owner name found (git user.name, the account's name): pass --owner")
        name = found[0]
    else:
        name = typer.prompt("Your full name", default=found[0] if found else None).strip()
    if not name:
        raise KbError("the owner's name is empty: pass --owner NAME")
    return name


def _chosen(proposals: Sequence[init.Proposal], yes: bool) -> Iterator[init.Proposal]:
    """The personal folders proposed, each shown with its reason, and those accepted."""
    if not proposals:
        _out().print("personal     none proposed (--personal GLOB names one)")
    for proposal in proposals:
        shown = f"personal     {_shown(proposal.glob)}  ({_shown(proposal.reason)})"
        if yes:
            _out().print(shown)
            yield proposal
        elif typer.confirm(shown + "?", default=True):
            yield proposal


def _check_models(config: Config) -> None:
    """Whether the model server has the chat and embedding models; how to fix what it lacks,
    without failing the init."""
    from kb.errors import LLMError
    from kb.llm import served_models
    from kb.services import init

    llm = config.llm
    if llm.provider == "fake":
        _out().print("models       the fake provider: no model server (for tests only)")
        return
    # One check a server: the chat and embedding models may be served apart.
    wanted: dict[str, list[str]] = {}
    for host, model in ((llm.chat_host, llm.chat_model), (llm.embed_host, llm.embed_model)):
        wanted.setdefault(host, []).append(model)
    for host, models in wanted.items():
        served: list[str] | LLMError
        try:
            served = served_models(llm, host)
        except LLMError as exc:
            served = exc
        check = init.model_check(llm.provider, host, models, served)
        if check.ready:
            _out().print(f"models       {', '.join(models)} ready at {_shown(host)}")
            continue
        state = "missing " + ", ".join(check.missing) if check.reachable else "not reachable"
        _out().print(f"models       {_shown(host)}: {state}; to fix:")
        for fix in check.fixes:
            _out().print(f"  {printable(fix)}", markup=False, highlight=False, soft_wrap=True)


@app.command(name="verify")
def verify_command(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Check that the index equals the vaults: exit 0 if so, else list the differences (exit 4)."""
    from kb.indexing.verify import KINDS, verify

    with _session(ctx) as parts:
        report = verify(parts.config, parts.store)
    if as_json:
        data = {
            "in_sync": report.in_sync,
            "notes": report.notes,
            "rows": report.rows,
            "differences": [asdict(d) for d in report.differences],
        }
        _out().file.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        for d in report.differences:
            where = f"{d.vault}/{d.path}" if d.path else d.vault
            detail = f"  ({d.detail})" if d.detail else ""
            _out().print(f"{d.kind:<10} {_shown(where)}{_shown(detail)}")
        verdict = "in sync" if report.in_sync else f"{len(report.differences)} differences"
        _err().print(f"{report.notes} notes on disk, {report.rows} rows in the index: {verdict}")
        if not report.in_sync:
            kinds = sorted({d.kind for d in report.differences})
            _err().print("; ".join(f"{k}: {KINDS[k]}" for k in kinds))
    if not report.in_sync:
        raise typer.Exit(EXIT_OUT_OF_SYNC)
