"""`kb related NOTE`: the notes most related to a note, or to the chunk holding one of its
lines (`NOTE:LINE`), each with why."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Annotated

import typer

from kb.cli.shared import AsJson, session, stdout
from kb.config import MAX_TOP_K
from kb.terminal import printable

if TYPE_CHECKING:
    from kb.services.relating import RelatedNotes

# A NOTE ending in ":LINE" asks for the chunk holding that line.
_AT_LINE = re.compile(r"^(?P<note>.+):(?P<line>[0-9]+)$")


def split_line(note: str) -> tuple[str, int | None]:
    """A NOTE argument and the line it names, if any ("Notes/a.md:12")."""
    if (at := _AT_LINE.match(note)) is not None:
        return at["note"], int(at["line"])
    return note, None


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
    from kb.services.note_links import NoteFinder

    name, line = split_line(note)
    with session(ctx) as parts:
        found_note = NoteFinder(parts.config.vaults, parts.store.links).find(name)
        found = parts.related_service().related(
            found_note.vault,
            found_note.path,
            line=line,
            top_k=top_k,
            unlinked=unlinked,
            explain=explain,
        )
    if as_json:
        text = json.dumps(found.as_json(), ensure_ascii=False, indent=2)
        stdout().file.write(text + "\n")
        return
    _print(found, explain=explain)


def _print(found: RelatedNotes, *, explain: bool) -> None:
    out = stdout()
    where = f":{found.lines[0]}-{found.lines[1]}" if found.lines else ""
    out.print(f"related to {printable(found.vault)}/{printable(found.path)}{where}", markup=False)
    if not found.related:
        out.print("  no related notes", markup=False)
    for n, hit in enumerate(found.related, 1):
        out.print(f"{n:>3}. {printable(hit.path)}  {hit.score:.2f}", markup=False)
        if hit.why:
            out.print(f"     {printable('; '.join(hit.why))}", markup=False)
        if explain:
            lifts = ", ".join(f"{k} {v:+.2f}" for k, v in hit.lifts.items() if abs(v) >= 0.005)
            out.print(f"     {lifts}", markup=False)
    links = found.links
    for label, rows in (("links to", links.links_to), ("linked from", links.linked_from)):
        names = sorted({r.path or r.target for r in rows})
        out.print(f"{label}: {printable(', '.join(names)) or '-'}", markup=False)
    if links.unresolved:
        missing = ", ".join(sorted({r.target for r in links.unresolved}))
        out.print(f"unresolved: {printable(missing)}", markup=False)
