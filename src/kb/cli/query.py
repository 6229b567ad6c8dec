"""`kb query` and `kb ask`, and the query a running daemon answers for the launcher."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from kb.cli.render import print_results, print_warnings
from kb.cli.shared import AsJson, session, stderr, stdout
from kb.errors import DatabaseError, KbError
from kb.results import SEARCH_MODES
from kb.services.request_fields import (
    FieldKind,
    FilterValue,
    RequestField,
    Use,
    given_values,
    read,
    search_request,
    with_fields,
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


_METAVARS: dict[FieldKind, str] = {
    "path": "PATH",
    "tags": "TAG",
    "day": "YYYY-MM-DD",
    "time": "YYYY-MM-DD[THH:MM:SS]",
}


def _options(use: Use) -> Callable[[RequestField], object]:
    """How `kb query` or `kb ask` takes each field of its request (kb.services.request_fields):
    the text as the argument, the others as options; a value an option cannot read is a usage
    error naming it."""

    def option(field: RequestField) -> object:
        helped = field.help_in(use)
        if field.kind == "text":
            return Annotated[str, typer.Argument(help=helped)]
        if field.kind == "count":
            bound = typer.Option(*field.options, min=1, max=field.most(use), help=helped)
            return Annotated[int | None, bound]
        if field.kind == "similarity":
            checked = typer.Option(*field.options, help=helped, callback=_similarity)
            return Annotated[float | None, checked]
        if field.kind == "switch":
            return Annotated[bool | None, typer.Option(*field.options, help=helped)]
        if field.kind == "flag":
            return Annotated[bool, typer.Option(*field.options, help=helped)]
        if field.kind == "mode":
            # Checked with the request (`_query_call`), as a launcher's command line is too.
            named = typer.Option(*field.options, metavar="MODE", help=helped)
            return Annotated[str | None, named]
        return _filter(field, helped)

    return option


def _filter(field: RequestField, helped: str) -> object:
    """A search filter as `kb query` and `kb ask` take it: tags as often as wanted, the rest
    once."""

    def parsed(value: str | list[str] | None) -> FilterValue:
        try:
            return read(field, value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    option = typer.Option(
        *field.options, help=helped, metavar=_METAVARS[field.kind], callback=parsed
    )
    if field.kind == "tags":
        return Annotated[list[str] | None, option]
    return Annotated[str | None, option]


@with_fields("kb query", _options("kb query"))
def query(ctx: typer.Context, as_json: AsJson = False, **fields: object) -> None:
    """Search the index; prints the raw chunks, best first."""
    call = _query_call(as_json=as_json, **fields)
    with session(ctx) as parts:
        found = parts.search_service().search(call.request)
    print_results(stdout(), stderr(), found, as_json=call.as_json, explain=call.explain)


@dataclass(frozen=True)
class _QueryCall:
    """A `kb query` command line, read: the search it asks for, and how to show what it finds."""

    request: SearchRequest
    as_json: bool
    explain: bool


def _query_call(*, as_json: bool, **fields: object) -> _QueryCall:
    """`kb query`'s options as a request (they are read here, wherever the search runs: in
    this process, or in a daemon answering a launcher)."""
    mode = fields.get("mode")
    if mode is not None and mode not in SEARCH_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(SEARCH_MODES)}", param_hint="--mode")
    request = search_request(given_values("kb query", fields))
    return _QueryCall(request, as_json=as_json, explain=request.explain)


@with_fields("kb ask", _options("kb ask"))
def ask_command(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object at the end.")] = (
        False
    ),
    **fields: object,
) -> None:
    """Answer a question from your notes, citing the passages it used."""
    request = search_request(given_values("kb ask", fields))

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
