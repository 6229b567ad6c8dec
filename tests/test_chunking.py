"""Cutting note bodies into chunks: header paths, whole blocks, splits and line spans."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kb.vault.chunking import Chunk, chunk_body
from kb.vault.parsing import decode, parse_note

EXAMPLE_VAULT = Path(__file__).resolve().parents[1] / "examples" / "vault"
VAULT_NOTES = sorted(
    p
    for p in EXAMPLE_VAULT.rglob("*.md")
    if not any(part.startswith(".") for part in p.relative_to(EXAMPLE_VAULT).parts)
)

_ATX = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_FENCE_LINE = re.compile(r"^\s*(`{3,}|~{3,})")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def chunks_of(body: str, max_chars: int = 1600, first_line: int = 1) -> list[Chunk]:
    return chunk_body(body, max_chars=max_chars, first_line=first_line)


def span(lines: list[str], chunk: Chunk) -> str:
    return "\n".join(lines[chunk.start_line - 1 : chunk.end_line])


def _drop_wrappers(lines: list[str]) -> list[str]:
    """Lines without fence markers and table header/separator rows (repeated when split)."""
    out: list[str] = []
    for i, line in enumerate(lines):
        if _FENCE_LINE.match(line) or _TABLE_SEP.match(line):
            continue
        if i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]) and "|" in line:
            continue
        out.append(line)
    return out


def _wrapper_lines(lines: list[str]) -> list[str]:
    kept = set(_drop_wrappers(lines))
    return [line.strip() for line in lines if line.strip() and line not in kept]


# --- header paths ------------------------------------------------------------------------------


def test_header_path_nests_and_pops() -> None:
    body = (
        "# Trip\nintro\n\n## Day 1\nwalk\n\n## Day 2\nbus\n\n### Food\nramen\n\n"
        "## Day 3\nhome\n\n# Costs\nmoney"
    )
    paths = [c.header_path for c in chunks_of(body)]
    assert paths == [
        ("# Trip",),
        ("# Trip", "## Day 1"),
        ("# Trip", "## Day 2"),
        ("# Trip", "## Day 2", "### Food"),
        ("# Trip", "## Day 3"),
        ("# Costs",),
    ]


def test_text_before_first_heading_has_empty_path() -> None:
    chunks = chunks_of("preface text\n\n## Later\nmore")
    assert chunks[0].header_path == ()
    assert chunks[0].content == "preface text"
    assert chunks[1].header_path == ("## Later",)


def test_skipped_heading_levels_pop_correctly() -> None:
    body = "# A\na\n\n### C\nc\n\n## B\nb"
    assert [c.header_path for c in chunks_of(body)] == [
        ("# A",),
        ("# A", "### C"),
        ("# A", "## B"),
    ]


def test_heading_title_whitespace_and_closing_hashes_normalized() -> None:
    chunks = chunks_of("##   Day   2  ##\ntext")
    assert chunks[0].header_path == ("## Day 2",)
    assert chunks[0].content == "##   Day   2  ##\ntext"


def test_setext_headings() -> None:
    body = "Trip\n====\n\nintro\n\nDay 1\n-----\n\nwalk"
    chunks = chunks_of(body)
    assert [c.header_path for c in chunks] == [("# Trip",), ("# Trip", "## Day 1")]
    assert chunks[0].content == "Trip\n====\n\nintro"
    assert chunks[1].content == "Day 1\n-----\n\nwalk"


def test_hash_line_in_fence_is_not_a_heading_and_fence_stays_whole() -> None:
    fence = "```bash\n# install it\npip install kb\n## not a heading either\n```"
    body = f"# Setup\n\n{fence}\n\nafter"
    chunks = chunks_of(body)
    assert len(chunks) == 1
    assert chunks[0].header_path == ("# Setup",)
    assert fence in chunks[0].content


# --- whole blocks ------------------------------------------------------------------------------


def test_table_and_list_not_cut_when_they_fit() -> None:
    table = "| a | b |\n| - | - |\n" + "\n".join(f"| {i} | {i * i} |" for i in range(8))
    items = "\n".join(f"- item {i}" for i in range(8))
    body = f"intro\n\n{table}\n\n{items}"
    limit = len(table) + len(items) + 4  # both fit, but not together with the intro
    chunks = chunks_of(body, max_chars=limit)
    assert len(chunks) == 2
    assert chunks[0].content == f"intro\n\n{table}"
    assert chunks[1].content == items


def test_small_blocks_in_one_section_are_packed_together() -> None:
    body = "# A\n\none\n\ntwo\n\nthree"
    chunks = chunks_of(body)
    assert len(chunks) == 1
    assert chunks[0].content == body


def test_heading_without_body_is_carried_into_next_chunk() -> None:
    body = "# Trip\n\n## Day 1\n\n### Morning\nwalk\n\n## Day 2\nbus"
    chunks = chunks_of(body)
    assert [c.content for c in chunks] == [
        "# Trip\n\n## Day 1\n\n### Morning\nwalk",
        "## Day 2\nbus",
    ]
    assert chunks[0].header_path == ("# Trip", "## Day 1", "### Morning")
    assert chunks[0].start_line == 1


def _has_text(chunk: Chunk) -> bool:
    lines = [ln for ln in chunk.content.split("\n") if ln.strip()]
    return any(not _ATX.match(ln) and not re.fullmatch(r"[=-]+", ln.strip()) for ln in lines)


@pytest.mark.parametrize(
    "heading", ["# Title", "## A much longer heading for this section", "Title\n====="]
)
def test_no_heading_only_chunk_before_oversized_text(heading: str) -> None:
    text = " ".join(f"Sentence number {i} is right here." for i in range(20))
    body = f"{heading}\n\n{text}"
    chunks = chunks_of(body, max_chars=200)
    assert len(chunks) > 1
    assert all(_has_text(c) for c in chunks)
    assert chunks[0].content.startswith(heading + "\n\nSentence number 0")
    assert all(len(c.content) <= 200 for c in chunks)


def test_heading_at_end_of_note_is_kept() -> None:
    chunks = chunks_of("# A\ntext\n\n## Empty at the end")
    assert chunks[-1].content == "## Empty at the end"
    assert chunks[-1].header_path == ("# A", "## Empty at the end")


def test_empty_body_gives_no_chunks() -> None:
    assert chunks_of("") == []
    assert chunks_of("\n\n   \n") == []


def test_no_heading_note_cut_by_size() -> None:
    paragraphs = [f"Paragraph {i}: " + "word " * 20 for i in range(20)]
    body = "\n\n".join(p.strip() for p in paragraphs)
    chunks = chunks_of(body, max_chars=300)
    assert len(chunks) > 3
    assert all(len(c.content) <= 300 for c in chunks)
    assert all(c.header_path == () for c in chunks)
    # Paragraphs are not cut: each one lands whole in exactly one chunk.
    for p in paragraphs:
        assert sum(p.strip() in c.content for c in chunks) == 1


def test_positions_are_consecutive() -> None:
    body = "\n\n".join(f"## S{i}\n" + "text " * 50 for i in range(6))
    chunks = chunks_of(body, max_chars=200)
    assert [c.position for c in chunks] == list(range(len(chunks)))


def test_content_hash_depends_on_content() -> None:
    a, b = chunks_of("# A\none\n\n# B\ntwo")
    assert a.content_hash != b.content_hash
    assert a.content_hash == chunks_of("# A\none")[0].content_hash
    assert len(a.content_hash) == 64


# --- oversized blocks --------------------------------------------------------------------------


def test_oversized_fence_split_into_valid_fences() -> None:
    code = [f"value_{i} = compute({i}, scale=1000)  # step {i}" for i in range(40)]
    body = "# Code\n\n```python\n" + "\n".join(code) + "\n```"
    chunks = chunks_of(body, max_chars=400)
    pieces = [c.content.removeprefix("# Code\n\n") for c in chunks]
    assert len(pieces) > 2
    for piece in pieces:
        lines = piece.split("\n")
        assert lines[0] == "```python"
        assert lines[-1] == "```"
        assert not any(_FENCE_LINE.match(ln) for ln in lines[1:-1])
        assert len(piece) <= 400
    # Every code line exactly once, in order.
    assert [ln for p in pieces for ln in p.split("\n")[1:-1]] == code
    # The spans run from the heading to the real closing fence.
    assert chunks[0].start_line == 1
    assert chunks[-1].end_line == len(body.split("\n"))
    assert all(a.end_line < b.start_line for a, b in itertools.pairwise(chunks))


def test_oversized_fence_left_open_keeps_its_last_line_as_code() -> None:
    """A fence never closed runs to the end of the note: its last line is code, and no piece
    is only blank lines in a fence."""
    code = ["", "", *(f"step_{i}()  # " + "x" * 60 for i in range(8)), "", "last_line()"]
    body = "```python\n" + "\n".join(code)
    chunks = chunks_of(body, max_chars=200)
    pieces = [c.content.split("\n") for c in chunks]
    assert all(p[0] == "```python" and p[-1] != "```" for p in pieces)
    assert all(any(line.strip() for line in p[1:]) for p in pieces)
    assert [ln for p in pieces for ln in p[1:] if ln.strip()] == [c for c in code if c.strip()]
    assert chunks[0].start_line == 1
    assert chunks[-1].end_line == len(body.split("\n"))
    lines = body.split("\n")
    for chunk, piece in zip(chunks, pieces, strict=True):
        assert set(piece[1:]) <= set(lines[chunk.start_line - 1 : chunk.end_line])


def test_oversized_table_repeats_header_rows() -> None:
    header = "| Name | Value | Notes |\n| ---- | ----- | ----- |"
    rows = [f"| row {i} | {i * 7} | some note about row {i} |" for i in range(30)]
    body = header + "\n" + "\n".join(rows)
    chunks = chunks_of(body, max_chars=300)
    assert len(chunks) > 2
    got_rows = []
    for c in chunks:
        assert c.content.startswith(header + "\n")
        assert len(c.content) <= 300
        got_rows += c.content.split("\n")[2:]
    assert got_rows == rows
    # The first piece holds the real header: its span is exactly its content.
    assert chunks[0].start_line == 1
    assert span(body.split("\n"), chunks[0]) == chunks[0].content
    assert chunks[-1].end_line == len(body.split("\n"))


def test_oversized_list_cut_at_item_boundaries() -> None:
    items = [
        f"- item {i} has a first line\n  and a continuation line {i}\n  - nested {i}"
        for i in range(15)
    ]
    body = "\n".join(items)
    chunks = chunks_of(body, max_chars=250)
    assert len(chunks) > 2
    for c in chunks:
        assert len(c.content) <= 250
        assert c.content.startswith("- item ")
        # Each chunk is a run of whole items.
        assert c.content in body
        assert body.startswith(c.content) or ("\n" + c.content) in body
        assert body.endswith(c.content) or (c.content + "\n- item ") in body
    assert "\n".join(c.content for c in chunks) == body


def test_oversized_paragraph_cut_at_sentence_ends() -> None:
    sentences = [f"This is sentence number {i}, which says something." for i in range(25)]
    body = " ".join(sentences)
    chunks = chunks_of(body, max_chars=250)
    assert len(chunks) > 2
    for c in chunks:
        assert len(c.content) <= 250
        assert c.content.endswith(".")
        assert c.content.startswith("This is sentence number")
        assert c.start_line == c.end_line == 1
    assert " ".join(c.content for c in chunks) == body


def test_sentence_longer_than_limit_is_wrapped_at_spaces() -> None:
    body = " ".join(["word"] * 200)
    chunks = chunks_of(body, max_chars=200)
    assert all(len(c.content) <= 200 for c in chunks)
    assert " ".join(c.content for c in chunks) == body


def test_single_indivisible_line_may_exceed_limit() -> None:
    line = "x" * 500
    chunks = chunks_of(f"# T\n\n{line}\n\nshort", max_chars=200)
    assert "".join(c.content for c in chunks).count("x") == 500
    assert all(len(c.content) <= 200 or "x" * 200 in c.content for c in chunks)


# --- line spans --------------------------------------------------------------------------------


def test_line_spans_with_frontmatter_offset() -> None:
    text = (
        "---\ntags: [a]\ndate: 2024-01-01\n---\n# Title\n\nintro line\nsecond line\n\n"
        "## Part\n\n- a\n- b\n\n```\ncode\n```\n"
    )
    note = parse_note(text)
    assert note.body_start_line == 5
    lines = text.split("\n")
    chunks = chunks_of(note.body, first_line=note.body_start_line)
    assert [(c.start_line, c.end_line) for c in chunks] == [(5, 8), (10, 17)]
    for c in chunks:
        assert span(lines, c) == c.content


def test_split_pieces_point_at_their_own_lines() -> None:
    header = "| k | v |\n| - | - |"
    rows = [f"| key {i} | value {i} |" for i in range(20)]
    body = "intro\n\n" + header + "\n" + "\n".join(rows)
    lines = body.split("\n")
    chunks = chunks_of(body, max_chars=200, first_line=1)
    for c in chunks:
        for row in c.content.split("\n")[2:]:
            if row.startswith("| key"):
                assert row in lines[c.start_line - 1 : c.end_line]
    assert chunks[-1].end_line == len(lines)


# --- Obsidian syntax ---------------------------------------------------------------------------


def test_obsidian_syntax_kept_verbatim() -> None:
    body = (
        "# Note\n\nWith [[Kenji Sato|Kenji]] and ![[photo.png]] and #project/kb.\n\n"
        "> [!note] Callout title\n> Callout body with [[Link]].\n\n"
        "- [ ] task with ^block-id\n- [x] done %%comment%%"
    )
    chunks = chunks_of(body)
    assert len(chunks) == 1
    assert chunks[0].content == body
    assert chunks[0].header_path == ("# Note",)


def test_callout_is_not_cut_when_it_fits() -> None:
    callout = "> [!warning] Known gap\n> " + "\n> ".join(
        f"line {i} of the callout" for i in range(6)
    )
    body = "## Part\n\n" + "filler text. " * 12 + "\n\n" + callout
    chunks = chunks_of(body, max_chars=len(callout) + 20)
    assert sum(callout in c.content for c in chunks) == 1


# --- properties over the example vault ---------------------------------------------------------


def test_example_vault_is_present() -> None:
    assert len(VAULT_NOTES) >= 10


@pytest.mark.parametrize("path", VAULT_NOTES, ids=lambda p: p.name)
def test_vault_unsplit_chunks_match_their_file_lines_exactly(path: Path) -> None:
    text = decode(path.read_bytes())
    note = parse_note(text)
    lines = text.split("\n")
    chunks = chunks_of(note.body, max_chars=1_000_000, first_line=note.body_start_line)
    assert bool(chunks) == bool(note.body.strip())
    for c in chunks:
        assert span(lines, c) == c.content


@pytest.mark.parametrize("max_chars", [200, 500, 1600])
@pytest.mark.parametrize("path", VAULT_NOTES, ids=lambda p: p.name)
def test_vault_chunk_properties(path: Path, max_chars: int) -> None:
    text = decode(path.read_bytes())
    note = parse_note(text)
    lines = text.split("\n")
    chunks = chunks_of(note.body, max_chars=max_chars, first_line=note.body_start_line)
    assert [c.position for c in chunks] == list(range(len(chunks)))

    for i, c in enumerate(chunks):
        # Spans lie in the file, in order.
        assert note.body_start_line <= c.start_line <= c.end_line <= len(lines)
        if i:
            assert chunks[i - 1].end_line <= c.start_line
        # Each content line (bar repeated fence/table headers) is in the span.
        span_text = span(lines, c)
        for line in _drop_wrappers(c.content.split("\n")):
            assert line in span_text, (c.start_line, c.end_line, line)
        # A chunk with as many lines as its span, alone on its lines, is the span itself.
        shares = (i and chunks[i - 1].end_line == c.start_line) or (
            i + 1 < len(chunks) and chunks[i + 1].start_line == c.end_line
        )
        if not shares and c.content.count("\n") == c.end_line - c.start_line:
            assert c.content == span_text

        # Size: only a single indivisible line (with its headings or fence/table header)
        # may take a chunk over the limit.
        if len(c.content) > max_chars:
            rest = [
                ln
                for ln in _drop_wrappers(c.content.split("\n"))
                if ln.strip() and not _ATX.match(ln)
            ]
            assert len(rest) == 1, (len(c.content), c.content[:120])

    # Coverage: every word of the body exactly once, in order, apart from repeated
    # fence and table header lines; and those are never lost.
    body_lines = note.body.split("\n")
    chunk_lines = [ln for c in chunks for ln in c.content.split("\n")]
    assert " ".join(_drop_wrappers(chunk_lines)).split() == (
        " ".join(_drop_wrappers(body_lines)).split()
    )
    assert Counter(_wrapper_lines(chunk_lines)) >= Counter(_wrapper_lines(body_lines))


def test_rule_chains_are_compiled_before_any_thread_parses() -> None:
    # In a fresh interpreter: the chains must be ready as soon as a thread has the parser.
    # The inline rules are off (chunks are cut from block tokens), so theirs are never run.
    check = (
        "from kb.vault import chunking as c; m = c._markdown(); "
        "assert all(r.__cache__ for r in (m.core.ruler, m.block.ruler)); "
        "assert m.core.ruler.get_active_rules() == ['normalize', 'block']"
    )
    subprocess.run([sys.executable, "-c", check], check=True, timeout=60)
