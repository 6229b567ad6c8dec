"""Whose voice a note speaks in, as the chat model says once per note.

In the owner's personal folders the voice is the owner, by rule. Anywhere else "I" is
whoever wrote the note: a letter's sender, a clipping's author, the speaker of a talk. A
folder layout rule would fit one vault only, so the model reads what a person would (the
path, the properties, the first lines) and names the writer; kb's paragraph passages then
speak in that voice (kb.context.passage_texts). A small model may name someone the note never
mentions: every word of its answer must be found in what it read, or the answer is rejected.

Pure functions: what the model is shown, and what of its answer is kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The words by which a writer, or a question, speaks of themself: a writer's name in the
# passages of their notes (kb.context.passage_texts), the owner's in a first-person query
# (kb.search.hybrid).
FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b", re.IGNORECASE)
# What the model reads of a note: enough for a greeting, a byline or an author line.
EXCERPT_CHARS = 1200
_PROPERTIES_CHARS = 400
_MAX_NAME_WORDS = 4
# Answers that name no one: the note does not say who wrote it.
_NO_ONE = frozenset(
    ("unknown", "none", "n/a", "na", "no one", "nobody", "not specified", "not stated")
)
_LEAD = re.compile(
    r"^(?:(?:the\s+)?(?:note|text)\s+(?:is\s+|was\s+)?written\s+by|"
    r"(?:the\s+)?(?:author|writer)(?:\s+is|\s+was)?\s*:?|written\s+by|by)\s+",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_]+(?:['\u2019.-][^\W_]+)*")


@dataclass(frozen=True)
class NoteHead:
    """What the model reads to name a note's writer."""

    path: str
    properties: str  # the frontmatter's text values, one "key: value" line each
    excerpt: str  # the note's first characters


def note_head(path: str, metadata: Mapping[str, Any], contents: Sequence[str]) -> NoteHead:
    """A note's path, its text properties and its opening, as the voice prompt shows them."""
    lines = []
    for key, value in metadata.items():
        if isinstance(value, list):
            value = ", ".join(v for v in value if isinstance(v, str))
        if isinstance(value, str) and value.strip():
            lines.append(f"{key}: {' '.join(value.split())}")
    properties = "\n".join(lines)[:_PROPERTIES_CHARS]
    return NoteHead(path, properties, "\n\n".join(contents)[:EXCERPT_CHARS])


def read_voice(answer: str, head: NoteHead) -> tuple[str, str | None]:
    """The writer's name from the model's answer ("" when it says no one), and why the
    answer is unusable, if it is."""
    line = next((ln for ln in answer.strip().splitlines() if ln.strip()), "")
    name = _LEAD.sub("", line.strip().strip("*_\"'`“”")).split(",")[0]
    name = name.strip().rstrip(".").strip("*_\"'`“”")
    if not name or name.lower() in _NO_ONE:
        return "", None
    words = _WORD.findall(name)
    if not words or len(words) > _MAX_NAME_WORDS or len(name) > 60:
        return "", "not a name"
    seen = {w.lower() for w in _WORD.findall(f"{head.path}\n{head.properties}\n{head.excerpt}")}
    if any(w.lower() not in seen for w in words):
        return "", "a name the note does not hold"
    return " ".join(words), None


def voiced(text: str, writer: str) -> str:
    """`text` with its first-person words replaced by the writer's name ("my" and "mine" by
    the possessive)."""

    def name(match: re.Match[str]) -> str:
        return f"{writer}'s" if match.group(0).lower() in ("my", "mine") else writer

    return FIRST_PERSON.sub(name, text)
