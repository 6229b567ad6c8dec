"""`kb query` and `kb ask`, and the query a running daemon answers for the launcher."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from kb.cli.render import print_results, print_warnings
from kb.cli.shared import AsJson, session, stderr, stdout
from kb.config import MAX_TOP_K, SEARCH_MODES
from kb.errors import DatabaseError, KbError
from kb.terminal import printable

if TYPE_CHECKING:
    from kb.container import Container
    from kb.daemon.query_socket import Reply, Runner
    from kb.search.answer import Answer
    from kb.services.search import SearchRequest
    from kb.store import SearchFilter

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
            help="Re-rank the best candidates with rerank.backend, the chat model unless set "
            "(default: query.rerank).",
        ),
    ] = None,
    as_json: AsJson = False,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Show each hit's vector and text rank and score, the fused score, what the "
            "learned ranker made of it, and a cross-encoder's score.",
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
    with session(ctx) as parts:
        found = parts.search_service().search(call.request)
    print_results(stdout(), stderr(), found, as_json=call.as_json, explain=call.explain)


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
        stdout().print(printable(text), end="", markup=False, highlight=False, soft_wrap=True)

    with session(ctx) as parts:
        answer = parts.search_service().ask(request, on_text=None if as_json else show)
    print_warnings(stderr(), answer.warnings)
    if as_json:
        stdout().file.write(json.dumps(answer_json(answer), ensure_ascii=False, indent=2) + "\n")
        return
    stdout().print()
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
    stdout().print()
    for s in answer.sources:
        style = "bold" if s.number in answer.cited else "dim"
        headers = " > ".join(s.hit.header_path)
        stdout().print(
            f"[{style}]\\[{s.number}] {escape(s.hit.vault)}/{escape(s.hit.path)}"
            f":{s.hit.start_line}-{s.hit.end_line}[/]"
            + (f"  [dim]{escape(headers)}[/]" if headers else "")
            + (f"  [dim]{escape(s.date)}[/]" if s.date else ""),
            highlight=False,
        )


def forwarded(parts: Container) -> Runner:
    """How the daemon answers a launcher's `kb query`: the query's arguments read with the
    command's own options, the search run by the search service; the launcher shows what it
    finds (kb.cli.render) as the command would."""
    import psycopg

    from kb.daemon.query_socket import Failed, Served

    # The command alone, as click reads it: the options `kb query` has, no other command's.
    reader = typer.Typer()
    reader.command()(query)
    query_command = typer.main.get_command(reader)
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
