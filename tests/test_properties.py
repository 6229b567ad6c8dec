"""Property-based tests: generated Markdown for the chunker, generated frontmatter for the
parser. Whatever a note holds, kb never crashes on it, never loses its text, and reports
line spans that are right."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kb.errors import NoteError
from kb.vault.chunking import chunk_body
from kb.vault.parsing import one_newline, parse_note

PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

words = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\n\r"),
    min_size=0,
    max_size=60,
)
line = st.one_of(
    words,
    st.builds(lambda n, w: "#" * n + " " + w, st.integers(1, 7), words),
    st.builds(lambda w: f"- {w}", words),
    st.builds(lambda w: f"1. {w}", words),
    st.builds(lambda w: f"> {w}", words),
    st.builds(lambda w: f"    {w}", words),
    st.sampled_from(["", "", "---", "***", "```", "```python", "~~~", "| a | b |", "|---|---|"]),
    st.builds(lambda w: f"| {w} | {w[::-1]} |", words),
    st.builds(lambda w: f"<div>{w}</div>", words),
    st.builds(lambda w: w + ". " + w + "! " + w + "?", words),
    # Nesting far past markdown-it's limit: quotes in quotes, lists in lists.
    st.builds(lambda n, w: ">" * n + " " + w, st.integers(1, 300), words),
    st.builds(lambda n, w: "  " * n + "- " + w, st.integers(1, 300), words),
    st.builds(lambda n: "[" * n + "x" + "]" * n + "(y)", st.integers(1, 300)),
)
markdown = st.lists(line, max_size=60).map("\n".join)


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _is_subsequence(needle: str, haystack: str) -> bool:
    it = iter(haystack)
    return all(c in it for c in needle)


@PROFILE
@given(
    # Any text, its line breaks as kb reads a note's (parsing.decode).
    body=st.one_of(markdown, st.text(max_size=400).map(one_newline)),
    max_chars=st.integers(200, 2000),
)
# Sentences of a long line were joined back with a space: a form feed between them became one.
@example(body="000000000000000.\x0c?\n" + "[" * 89 + "x" + "]" * 89 + "(y)", max_chars=200)
def test_chunker_keeps_every_character_in_order_with_right_spans(body: str, max_chars: int) -> None:
    first_line = 5
    chunks = chunk_body(body, max_chars=max_chars, first_line=first_line)
    lines = body.split("\n")
    last_line = first_line + len(lines) - 1
    # Never loses text: every visible character is in the chunks, in the note's order.
    assert _is_subsequence(_squeezed(body), "".join(_squeezed(c.content) for c in chunks))
    previous = first_line
    for position, chunk in enumerate(chunks):
        assert chunk.position == position
        assert first_line <= chunk.start_line <= chunk.end_line <= last_line
        assert chunk.start_line >= previous
        previous = chunk.start_line
        assert chunk.content.strip(), "no empty chunk"
        # Each chunk's text comes from the lines its span names.
        span = "\n".join(lines[chunk.start_line - first_line : chunk.end_line - first_line + 1])
        assert any(part.strip() and part.strip() in span for part in chunk.content.split("\n")), (
            chunk,
            span,
        )


scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    st.dates(),
)
yaml_value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
yaml_text = st.one_of(
    st.dictionaries(st.sampled_from(["tags", "tag", "aliases", "title", "x"]), yaml_value).map(
        lambda d: json.dumps(d, default=str)
    ),
    st.text(max_size=200),
    st.lists(
        st.sampled_from(
            [
                "a: &x [1, 2]",
                "b: *x",
                "c: *y",
                "tags: [a, b]",
                "tags: a b, c",
                "- item",
                "k: {",
                "k: [",
                "? complex",
                "!!python/object:os.system x",
                "&a [*a]",
                "title: 'unterminated",
                "date: 2024-13-45",
                "  indented: 1",
                "\t tab: 1",
            ]
        ),
        max_size=12,
    ).map("\n".join),
)


@PROFILE
@given(frontmatter=yaml_text, body=st.text(max_size=200))
def test_frontmatter_never_loses_the_body(frontmatter: str, body: str) -> None:
    text = f"---\n{frontmatter}\n---\n{body}"
    try:
        note = parse_note(text)
    except NoteError:
        return  # refused with its reason (an alias bomb, a recursive alias, huge metadata)
    lines = text.split("\n")
    assert "\n".join(lines[note.body_start_line - 1 :]) == note.body
    assert note.body.endswith(body) or body.startswith("---")
    json.dumps(note.metadata)
    assert all(isinstance(t, str) and t for t in note.metadata["tags"])
    assert all(isinstance(a, str) for a in note.metadata["aliases"])
