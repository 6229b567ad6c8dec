"""Search results on a terminal, as `kb query` prints them: in the `kb` process that ran the
search, or in the launcher a daemon answered (see kb.daemon.query_socket).

Human output shows each hit as a title line (where it is, then what it scored), its header
path and its raw text. Where a hit is (path and line span) is never cut: it wraps when the
terminal is narrower than it, and the scores move to the next line, whole words at a time.
"""

from __future__ import annotations

import re

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kb.redact import redact
from kb.results import SearchHit, SearchResult, explanation, hits_json, scores
from kb.terminal import printable

# A title line is filled to the terminal's width with this, as a rule between hits.
_RULE = "─"
# The scores under a location too long to share its line start under the path.
_INDENT = "   "


def consoles() -> tuple[Console, Console]:
    """Standard output and standard error, as kb prints to them: note text is shown as written
    (no `:emoji:` codes, no highlighting of numbers or URLs); each stream finds its own width
    and colours."""
    return (
        Console(emoji=False, highlight=False),
        Console(stderr=True, soft_wrap=True, emoji=False, highlight=False),
    )


def shown(text: str) -> str:
    """Text from a note, a path or an error, safe to print in Rich markup on a terminal."""
    # Rich's escape leaves a backslash before a "[" that opens no tag alone (an escaped
    # glob: /Archive \[2023\]/), and Rich then prints the two as "[": it is doubled.
    return escape(_LONE_BACKSLASH.sub(_doubled, printable(redact(text))))


# A run of backslashes before a "[" that does not open what Rich takes for a tag.
_LONE_BACKSLASH = re.compile(r"(\\+)(?=\[(?![a-z#/@][^[]*?\]))")


def _doubled(match: re.Match[str]) -> str:
    return match.group(1) + "\\"


def print_error(err: Console, message: str) -> None:
    err.print(f"[bold red]error:[/] {shown(message)}")


def print_warnings(err: Console, warnings: tuple[str, ...]) -> None:
    for warning in warnings:
        err.print(f"[bold yellow]warning:[/] {shown(warning)}")


def print_results(
    out: Console, err: Console, found: SearchResult, *, as_json: bool, explain: bool
) -> None:
    """`kb query`'s output: warnings on stderr, then the hits as JSON or for a person."""
    print_warnings(err, found.warnings)
    if as_json:
        out.file.write(hits_json(found))
        return
    if not found.hits:
        err.print("no matching chunks")
        return
    for rank, hit in enumerate(found.hits, 1):
        for line in _title(rank, hit, out.width):
            out.print(line)
        headers = " > ".join(hit.header_path)
        if headers:
            out.print(f"[dim]{shown(headers)}[/]")
        if explain:
            out.print(f"[dim]{explanation(hit)}[/]")
        # The raw chunk, exactly, but for control characters (shown as escapes).
        out.print(escape(printable(hit.content)))
        out.print()


def _title(rank: int, hit: SearchHit, width: int) -> list[Text]:
    """A hit's title: its rank, vault, path and line span, then its scores on the same line
    while they fit, each whole; the last line is ruled out to `width`."""
    where = Text(f"{rank}. {printable(redact(hit.vault))}/{printable(redact(hit.path))}", "bold")
    where.append(f":{hit.start_line}-{hit.end_line}")
    lines = [where]
    # Its note's date first, then what it scored.
    for score in [hit.date, *scores(hit)] if hit.date else scores(hit):
        last = lines[-1]
        if last.cell_len + 2 + len(score) <= width:
            last.append(f"  {score}")
        else:
            # Indented under the path, unless that alone would wrap it.
            indent = _INDENT if len(_INDENT) + len(score) <= width else ""
            lines.append(Text(indent + score))
    last = lines[-1]
    if last.cell_len + 2 <= width:
        last.append(" " + _RULE * (width - last.cell_len - 1), "rule.line")
    return lines
