"""`kb query` and `kb ask`, and the query a running daemon answers for the launcher."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from kb.cli.render import print_results, print_warnings
from kb.cli.shared import AsJson, session, stderr, stdout
from kb.config import MAX_TOP_K, SEARCH_MODES
from kb.errors import DatabaseError, KbError
from kb.services.filters import (
    FilterField,
    FilterKind,
    FilterValue,
    read,
    search_filter,
    with_filters,
)
from kb.terminal import printable

if TYPE_CHECKING:
    from kb.container import Container
    from kb.daemon.query_socket import Reply, Runner
    from kb.search.answer import Answer
    from kb.services.searching import SearchRequest


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
NoOwner = Annotated[
    bool, typer.Option("--no-owner", help="Do not read first-person text as about the owner.")
]
_METAVARS: dict[FilterKind, str] = {
    "path": "PATH",
    "tags": "TAG",
    "day": "YYYY-MM-DD",
    "time": "YYYY-MM-DD[THH:MM:SS]",
}


def _option(field: FilterField) -> object:
    """A search filter as `kb query` and `kb ask` take it (kb.services.filters): tags as
    often as wanted, the rest once; a value it cannot read is a usage error naming the
    option."""

    def parsed(value: str | list[str] | None) -> FilterValue:
        try:
            return read(field, value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    option = typer.Option(
        *field.options, help=field.help, metavar=_METAVARS[field.kind], callback=parsed
    )
    if field.kind == "tags":
        return Annotated[list[str] | None, option]
    return Annotated[str | None, option]


@with_filters(_option)
def query(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="What to look for.")],
    top_k: Annotated[
        int | None,
        typer.Option("--top-k", "-k", min=1, max=MAX_TOP_K, help="How many chunks (default 5)."),
    ] = None,
    threshold: Threshold = None,
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
    **filters: FilterValue,
) -> None:
    """Search the index; prints the raw chunks, best first."""
    call = _query_call(
        text=text,
        top_k=top_k,
        threshold=threshold,
        mode=mode,
        rerank=rerank,
        as_json=as_json,
        explain=explain,
        no_owner=no_owner,
        **filters,
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
    mode: str | None,
    rerank: bool | None,
    as_json: bool,
    explain: bool,
    no_owner: bool,
    **filters: FilterValue,
) -> _QueryCall:
    """`kb query`'s options as a request (they are read here, wherever the search runs: in
    this process, or in a daemon answering a launcher)."""
    from kb.services.searching import SearchRequest

    if mode is not None and mode not in SEARCH_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(SEARCH_MODES)}", param_hint="--mode")
    request = SearchRequest(
        text,
        top_k=top_k,
        mode=mode,
        threshold=threshold,
        filters=search_filter(filters),
        rerank=rerank,
        owner=not no_owner,
        explain=explain,
    )
    return _QueryCall(request, as_json=as_json, explain=explain)


@with_filters(_option)
def ask_command(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="What to ask your notes.")],
    top_k: Annotated[
        int | None,
        typer.Option(
            "--top-k",
            "-k",
            min=1,
            max=MAX_TOP_K,
            help="How many passages to read (default: ask.passages, 3).",
        ),
    ] = None,
    threshold: Threshold = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object at the end.")] = (
        False
    ),
    no_owner: NoOwner = False,
    **filters: FilterValue,
) -> None:
    """Answer a question from your notes, citing the passages it used."""
    from kb.services.searching import SearchRequest

    request = SearchRequest(
        question,
        top_k=top_k,
        threshold=threshold,
        filters=search_filter(filters),
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
        "withdrawn": answer.withdrawn,
        "withdrawn_because": answer.withdrawn_because,
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
