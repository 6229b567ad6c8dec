"""`kb related NOTE`: the notes most related to a note, or to the chunk holding one of its
lines (`NOTE:LINE`), each with why; and the same a running daemon answers for the
launcher."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kb.cli.related_view import print_related, related_json
from kb.cli.shared import AsJson, session, stdout
from kb.config import MAX_TOP_K

if TYPE_CHECKING:
    from kb.container import Container
    from kb.daemon.query_socket import Reply, Runner

# A NOTE ending in ":LINE" asks for the chunk holding that line.
_AT_LINE = re.compile(r"^(?P<note>.+):(?P<line>[0-9]+)$")


def split_line(note: str) -> tuple[str, int | None]:
    """A NOTE argument and the line it names, if any ("Notes/a.md:12")."""
    if (at := _AT_LINE.match(note)) is not None:
        return at["note"], int(at["line"])
    return note, None


@dataclass(frozen=True)
class RelatedCall:
    """A `kb related` command line, read."""

    note: str
    line: int | None
    top_k: int
    unlinked: bool
    explain: bool
    as_json: bool


def found_json(parts: Container, call: RelatedCall) -> dict[str, Any]:
    """The related notes a call asks for, as `--json` prints them (and the text is printed
    from)."""
    note = parts.note_finder().find(call.note)
    found = parts.related_service().related(
        note.vault,
        note.path,
        line=call.line,
        top_k=call.top_k,
        unlinked=call.unlinked,
        explain=call.explain,
    )
    return found.as_json()


def related(
    ctx: typer.Context,
    note: Annotated[
        str,
        typer.Argument(
            help="A note: a path in its vault, vault/path, or a file path; NOTE:LINE for the"
            " chunk holding that line."
        ),
    ],
    top_k: Annotated[
        int, typer.Option("--top-k", "-k", min=1, max=MAX_TOP_K, help="How many notes.")
    ] = 10,
    unlinked: Annotated[
        bool, typer.Option("--unlinked", help="Leave out the notes NOTE already links to.")
    ] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show what each signal added to each score.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """The notes most related to NOTE, each with why."""
    call = _call(note, top_k, unlinked, explain, as_json)
    with session(ctx) as parts:
        found = found_json(parts, call)
    if as_json:
        stdout().file.write(related_json(found))
        return
    print_related(stdout(), found, explain=explain)


def _call(note: str, top_k: int, unlinked: bool, explain: bool, as_json: bool) -> RelatedCall:
    name, line = split_line(note)
    return RelatedCall(name, line, top_k, unlinked, explain, as_json)


def forwarded(parts: Container) -> Runner:
    """How the daemon answers a launcher's `kb related`: the arguments read with the
    command's own options, the related notes found by the service; the launcher prints them
    (kb.cli.related_view) as the command would."""
    import psycopg

    from kb.daemon.query_socket import Failed, Listed
    from kb.errors import DatabaseError, KbError

    # The command alone, as click reads it.
    reader = typer.Typer()
    reader.command()(related)
    command = typer.main.get_command(reader)

    def run(args: tuple[str, ...]) -> Reply | None:
        try:
            with command.make_context("kb related", list(args)) as read:
                params = read.params
                call = _call(
                    params["note"],
                    params["top_k"],
                    params["unlinked"],
                    params["explain"],
                    params["as_json"],
                )
        except (typer.TyperException, typer.Exit, typer.Abort):
            return None  # the launcher shows usage errors as the command line does
        try:
            found = found_json(parts, call)
        except (DatabaseError, psycopg.Error):
            # The launcher runs it, and says what failed as the command says it alone.
            return None
        except KbError as exc:
            return Failed(str(exc))
        return Listed(found, as_json=call.as_json, explain=call.explain)

    return run
