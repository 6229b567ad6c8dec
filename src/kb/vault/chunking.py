"""Cut a note's body into chunks that keep their header path and line span.

The body is parsed with markdown-it-py, so a `#` line inside a code fence is
never a heading. Top-level blocks (paragraphs, fences, tables, lists, quotes)
are kept whole; a block is only cut when it alone exceeds the size limit, and
then at its natural joints: list items, table rows (repeating the header),
code lines (re-opening the fence), sentences.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kb.hashes import content_hash

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token


@functools.cache
def _markdown() -> MarkdownIt:
    """The parser, built at the first note: a search, which only reads Chunk records, never
    loads markdown-it."""
    from markdown_it import MarkdownIt

    # Chunks are cut from block tokens and a heading's text, which the block rules set: the
    # inline rules (a third of the parse) would build children nothing reads.
    md = MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"])
    # markdown-it compiles its rule chains on first use, and two threads doing that at once
    # can see them half-built ("none of the block rules matched"): compile them here, before
    # it is returned (two threads that both build one each warm their own).
    md.parse("# a\n\n- *b* `c` [d](e)\n\n| f |\n|---|\n| g |\n")
    return md


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Chunk:
    position: int
    header_path: tuple[str, ...]  # e.g. ("# Trip", "## Day 2", "### Food")
    content: str  # raw Markdown, exactly as in the file
    start_line: int  # 1-based, inclusive, in the file
    end_line: int

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)


@dataclass(frozen=True)
class _Block:
    kind: str
    text: str
    start: int  # 0-based line in the body
    end: int  # 0-based line in the body, inclusive
    joints: tuple[int, ...] = ()  # body lines where a cut is natural (list items)


@dataclass(frozen=True)
class _Piece:
    text: str
    start: int
    end: int
    heading: bool = False


# Bump when the same note and settings are cut differently: stored notes are then cut again
# (see ContextBuild.id). 2: a fence left open keeps its last line as code.
CHUNKER_VERSION = "2"


def chunk_body(body: str, *, max_chars: int, first_line: int = 1) -> list[Chunk]:
    """Chunks of `body`; `first_line` is the file line where the body starts."""
    lines = body.split("\n")
    sections = _sections(_markdown().parse(body), lines)
    chunks: list[Chunk] = []
    carried: list[_Block] = []
    for index, (path, blocks) in enumerate(sections):
        blocks = carried + blocks
        carried = []
        last = index == len(sections) - 1
        # A heading with nothing under it joins the next section's first chunk.
        if not last and all(b.kind == "heading" for b in blocks):
            carried = blocks
            continue
        for group in _pack(blocks, max_chars):
            chunks.append(
                Chunk(
                    position=len(chunks),
                    header_path=path,
                    content=_join(group),
                    start_line=group[0].start + first_line,
                    end_line=group[-1].end + first_line,
                )
            )
    return chunks


def _join(group: list[_Piece]) -> str:
    """Pieces joined as they stood: a blank line between blocks, none inside one."""
    out = group[0].text
    for prev, piece in itertools.pairwise(group):
        out += ("\n\n" if piece.start > prev.end + 1 else "\n") + piece.text
    return out


def _sections(tokens: list[Token], lines: list[str]) -> list[tuple[tuple[str, ...], list[_Block]]]:
    """Top-level blocks grouped under the heading path they fall under."""
    sections: list[tuple[tuple[str, ...], list[_Block]]] = [((), [])]
    stack: list[tuple[int, str]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level != 0 or tok.nesting == -1 or tok.map is None:
            i += 1
            continue
        start, end = tok.map
        text = "\n".join(lines[start:end]).rstrip()
        if not text.strip():
            i += 1
            continue
        end = start + text.count("\n")
        if tok.type == "heading_open":
            level = int(tok.tag[1])
            title = " ".join(tokens[i + 1].content.split())
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, f"{'#' * level} {title}"))
            sections.append((tuple(h for _, h in stack), []))
            kind = "heading"
        else:
            kind = tok.type.removesuffix("_open")
        joints = _list_joints(tokens, i) if kind in ("bullet_list", "ordered_list") else ()
        sections[-1][1].append(_Block(kind, text, start, end, joints))
        i += 1
    return [(path, blocks) for path, blocks in sections if blocks]


def _list_joints(tokens: list[Token], open_index: int) -> tuple[int, ...]:
    """Start lines of the top-level items of the list opened at `open_index`."""
    joints = []
    depth = 0
    for tok in tokens[open_index + 1 :]:
        if tok.level == 0:
            break
        if tok.type == "list_item_open" and depth == 0 and tok.map:
            joints.append(tok.map[0])
        if tok.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
    return tuple(joints)


def _pack(blocks: list[_Block], max_chars: int) -> Iterator[list[_Piece]]:
    """Greedy packing of whole blocks (or pieces of oversized ones) up to `max_chars`."""
    group: list[_Piece] = []
    size = 0
    for block in blocks:
        pieces = _split(block, max_chars)
        room = max_chars - size - 2
        # Headings waiting for text take room too: cut the block so its first piece fits
        # under them, and give every later piece a chunk of its own (unless the room is
        # too small to be worth it, when the chunk may exceed the limit instead).
        narrowed = bool(group) and _only_headings(group) and len(pieces[0].text) > room
        if narrowed and room >= max_chars // 4:
            pieces = _split(block, room)
        else:
            narrowed = False
        for n, piece in enumerate(pieces):
            added = len(piece.text) + (2 if group else 0)
            full = size + added > max_chars or (narrowed and n > 0)
            if group and full and not _only_headings(group):
                yield group
                group, size, added = [], 0, len(piece.text)
            group.append(piece)
            size += added
    if group:
        yield group


def _only_headings(group: list[_Piece]) -> bool:
    # Never leave a heading alone at the end of a chunk, cut from its text.
    return all(p.heading for p in group)


def _split(block: _Block, max_chars: int) -> list[_Piece]:
    if len(block.text) <= max_chars:
        return [_Piece(block.text, block.start, block.end, block.kind == "heading")]
    lines = block.text.split("\n")
    if block.kind == "fence" and len(lines) > 2:
        # A fence left open runs to the end of the note: its last line is code, not a fence.
        tail = lines[-1:] if _closes(lines[0], lines[-1]) else []
        body = lines[1 : len(lines) - len(tail)]
        return _split_lines(body, block.start + 1, max_chars, lines[:1], tail)
    if block.kind == "table" and len(lines) > 2:
        return _split_lines(lines[2:], block.start + 2, max_chars, lines[:2], [])
    if block.joints:
        return _split_at_joints(block, max_chars)
    if block.kind == "paragraph":
        return _split_sentences(block, max_chars)
    return _split_lines(lines, block.start, max_chars, [], [])


def _closes(opening: str, line: str) -> bool:
    """Whether `line` closes the fence `opening` opens: the same character, at least as many
    times, and nothing else (CommonMark)."""
    fence = opening.lstrip()
    mark = fence[:1]
    closing = line.strip()
    run = len(fence) - len(fence.lstrip(mark))
    return bool(mark) and len(closing) >= run and closing == mark * len(closing)


def _split_lines(
    lines: list[str], first: int, max_chars: int, head: list[str], tail: list[str]
) -> list[_Piece]:
    """Pack lines into pieces, each wrapped in `head` and `tail` (a fence, a table header).

    Blank lines where a piece would begin are left between pieces, as blank lines between
    blocks are: a piece of nothing but its wrapping would be a chunk that says nothing."""
    budget = max(1, max_chars - sum(len(x) + 1 for x in head + tail))
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    if last < 0:
        return [
            _Piece(
                "\n".join(head + lines + tail),
                first - len(head),
                first + len(lines) - 1 + len(tail),
            )
        ]
    pieces: list[_Piece] = []
    start = 0
    while start <= last:
        while not lines[start].strip():
            start += 1
        end, size = start, len(lines[start])
        while end + 1 <= last and size + 1 + len(lines[end + 1]) <= budget:
            end += 1
            size += 1 + len(lines[end])
        body = lines[start : end + 1]
        text = "\n".join(head + body + tail)
        # The first piece starts at the real header, the last ends at the real tail.
        lo = first + start if pieces else first - len(head)
        hi = first + end if end < last else first + len(lines) - 1 + len(tail)
        pieces.append(_Piece(text, lo, hi))
        start = end + 1
    return pieces


def _split_at_joints(block: _Block, max_chars: int) -> list[_Piece]:
    lines = block.text.split("\n")
    cuts = [j - block.start for j in block.joints if block.start < j <= block.end]
    bounds = [0, *cuts, len(lines)]
    pieces: list[_Piece] = []
    for a, b in itertools.pairwise(bounds):
        item = _Block("item", "\n".join(lines[a:b]).rstrip(), block.start + a, block.start + b - 1)
        pieces.extend(_split(item, max_chars))
    return _merge_small(pieces, max_chars)


def _split_sentences(block: _Block, max_chars: int) -> list[_Piece]:
    text = block.text
    cuts = [m.end() for m in _SENTENCE_END.finditer(text)]
    bounds = [0, *cuts, len(text)]
    spans = [
        (lo, hi)
        for a, b in itertools.pairwise(bounds)
        for lo, hi in _hard_wrap(text, a, b, max_chars)
        if text[lo:hi].strip()
    ]
    # Consecutive sentences are joined back while they fit, with what the note has between
    # them (a tab or a form feed is not a space: a chunk's text is the note's own).
    merged: list[tuple[int, int]] = []
    for lo, hi in spans:
        if merged and len(text[merged[-1][0] : hi].rstrip()) <= max_chars:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    pieces: list[_Piece] = []
    for lo, hi in merged:
        sentence = text[lo:hi].rstrip()
        line = block.start + text.count("\n", 0, lo)
        pieces.append(_Piece(sentence, line, line + sentence.count("\n")))
    return pieces


def _hard_wrap(text: str, lo: int, hi: int, max_chars: int) -> Iterator[tuple[int, int]]:
    """Cut text[lo:hi] at whitespace into spans of at most `max_chars`."""
    while hi - lo > max_chars:
        cut = text.rfind(" ", lo, lo + max_chars)
        cut = cut if cut > lo else lo + max_chars
        yield lo, cut
        lo = cut
        while lo < hi and text[lo] == " ":
            lo += 1
    yield lo, hi


def _merge_small(pieces: list[_Piece], max_chars: int) -> list[_Piece]:
    """Join consecutive pieces (each of its own lines) back together while they fit."""
    merged: list[_Piece] = []
    for piece in pieces:
        if merged and len(merged[-1].text) + 1 + len(piece.text) <= max_chars:
            last = merged[-1]
            merged[-1] = _Piece(last.text + "\n" + piece.text, last.start, piece.end)
        else:
            merged.append(piece)
    return merged
