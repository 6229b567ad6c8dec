"""What the pages show, as plain records made from what the services return: a search hit
as a card, a note as numbered lines. Pure: no request, database or template here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import quote, urlencode

from kb.results import SearchHit, explanation
from kb.results import scores as score_words
from kb.search.answer import CITATION, Answer, note_date
from kb.store import NoteInfo
from kb.store.candidates import MARK_END, MARK_START

# A piece of a passage, and whether it is one of the words the query matched.
Segment = tuple[str, bool]


@dataclass(frozen=True)
class Card:
    rank: int
    vault: str
    path: str
    title: str
    header_path: str  # "Trip > Day 2 > Food"
    date: str | None
    personal: bool  # the owner's note ("your note")
    lines: str  # "12-18"
    passage: list[Segment]
    why: str  # kb query --explain's line
    scores: str  # what the mode ranked by, short
    note_url: str  # the note in this page, scrolled to the passage
    obsidian_url: str | None  # the note in Obsidian, when its vault is an Obsidian vault


@dataclass(frozen=True)
class NoteLine:
    number: int
    text: str
    in_passage: bool
    heading: bool


def segments(marked: str, original: str) -> list[Segment]:
    """A passage cut where the database marked the query's words (`CandidateReads.marked` in
    kb.store.candidates); the passage whole and unmarked when the marks do not add up to it
    (a note holding a mark character)."""
    pieces: list[Segment] = []
    rest = marked
    while rest:
        start = rest.find(MARK_START)
        if start == -1:
            pieces.append((rest, False))
            break
        end = rest.find(MARK_END, start)
        if end == -1:
            return [(original, False)]
        if start:
            pieces.append((rest[:start], False))
        pieces.append((rest[start + 1 : end], True))
        rest = rest[end + 1 :]
    if "".join(text for text, _ in pieces) != original:
        return [(original, False)]
    return [p for p in pieces if p[0]]


def title(path: str, info: NoteInfo | None) -> str:
    """The note's frontmatter title, else its file name, as Obsidian titles a note."""
    if info is not None and info.title and info.title.strip():
        return info.title.strip()
    return PurePosixPath(path).stem


def note_url(vault: str, path: str, start: int | None = None, end: int | None = None) -> str:
    query = {"vault": vault, "path": path}
    if start is not None and end is not None:
        query |= {"start": str(start), "end": str(end)}
    anchor = f"#L{start}" if start is not None else ""
    return f"/note?{urlencode(query)}{anchor}"


def obsidian_url(vault_folder: str, path: str) -> str:
    """Obsidian's address for a note: its vault by folder name, the file without `.md`."""
    file = path[:-3] if path.lower().endswith(".md") else path
    return f"obsidian://open?vault={quote(vault_folder, safe='')}&file={quote(file, safe='')}"


def card(
    rank: int,
    hit: SearchHit,
    marked: str,
    info: NoteInfo | None,
    obsidian_vaults: Mapping[str, str],
) -> Card:
    """A hit as its card; `obsidian_vaults` maps the vaults that are Obsidian vaults to the
    folder name Obsidian knows them by."""
    folder = obsidian_vaults.get(hit.vault)
    scores = (
        f"similarity {hit.similarity:.3f}"
        if hit.similarity is not None
        else f"BM25 {hit.score:.3f}"
    )
    if hit.relevance is not None:
        scores += f" · relevance {hit.relevance}/10"
    return Card(
        rank=rank,
        vault=hit.vault,
        path=hit.path,
        title=title(hit.path, info),
        header_path=" > ".join(h.lstrip("# ") for h in hit.header_path),
        date=hit.date or note_date(info),
        personal=bool(info and info.personal),
        lines=f"{hit.start_line}-{hit.end_line}",
        passage=segments(marked, hit.content),
        why=explanation(hit),
        scores=" · ".join(score_words(hit)),
        note_url=note_url(hit.vault, hit.path, hit.start_line, hit.end_line),
        obsidian_url=obsidian_url(folder, hit.path) if folder else None,
    )


def cards(
    hits: Sequence[SearchHit],
    marked: Sequence[str],
    facts: Mapping[tuple[str, str], NoteInfo],
    obsidian_vaults: Mapping[str, str],
) -> list[Card]:
    return [
        card(rank, hit, text, facts.get((hit.vault, hit.path)), obsidian_vaults)
        for rank, (hit, text) in enumerate(zip(hits, marked, strict=True), 1)
    ]


def note_lines(text: str, start: int | None, end: int | None) -> list[NoteLine]:
    """A note's lines, numbered from 1, those of the passage (start to end) marked."""
    lines = text.split("\n")
    first, last = start or 0, end or start or 0
    return [
        NoteLine(n, line, first <= n <= last, line.startswith("#"))
        for n, line in enumerate(lines, 1)
    ]


@dataclass(frozen=True)
class AnswerPiece:
    """A piece of an answer's text, or a citation of source `number`."""

    text: str
    number: int | None = None


def answer_pieces(answer: Answer) -> list[AnswerPiece]:
    """The answer's text with each citation ("[2]", "[1, 3]") cut out as links to sources."""
    pieces: list[AnswerPiece] = []
    position = 0
    for match in CITATION.finditer(answer.text):
        pieces.append(AnswerPiece(answer.text[position : match.start()]))
        numbers = [int(n) for n in re.findall(r"\d+", match.group(0))]
        pieces.extend(AnswerPiece(f"[{n}]", n) for n in numbers)
        position = match.end()
    pieces.append(AnswerPiece(answer.text[position:]))
    return [p for p in pieces if p.text]
