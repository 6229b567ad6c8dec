"""A chunk's passages: extra texts, each embedded as a vector of its own, by which the
vector list can find the chunk (its score is the best of its own vector and theirs).

A small embedder reads a long chunk of many voices poorly: it averages every token of its
window into one vector. One paragraph at a time, said in its writer's voice, is what a question
matches: "<voice>, <date>: <paragraph>". The voice is a writer's name, whose the paragraph's
first-person words become (the same words a query in the first person is read by, see
`kb.context.voices.FIRST_PERSON`): the owner's in the owner's personal notes, elsewhere the writer
the chat model named (kb.context.voices); else the note's title, the paragraph as written. The
date is the note's own (kb.dates: a property, a daily note's name, a date in its file
name), left out when it has only its file's time.

Pure functions: what a note's passages say depends on the chunks' contents, the voice and
the date only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import islice

from kb.context.voices import voiced
from kb.hashes import content_hash
from kb.store.passages import PassageKind

# Bump when the same chunk, voice and date make other passages: stored notes are rebuilt.
# 2: paragraphs of fewer than MIN_WORDS words, and repeats within a note, are left out.
PASSAGES_VERSION = "2"
# A paragraph needs this many words to say something a question matches: "Thanks!", a
# one-line import or a tab label says nothing the chunk's own vector does not.
MIN_WORDS = 6
_WORD = re.compile(r"[^\W\d_]{2,}")

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^#{1,6}\s")


@dataclass(frozen=True)
class Passage:
    position: int  # its place among its chunk's passages
    kind: PassageKind
    text: str

    @property
    def text_hash(self) -> str:
        return content_hash(self.text)


@dataclass(frozen=True)
class Voice:
    """Who speaks in a note, and when."""

    name: str
    writer: bool  # a writer's name: the paragraph's first-person words are theirs
    date: str | None  # the note's date, as words ("21 January 2022")

    @property
    def prefix(self) -> str:
        return f"{self.name}, {self.date}: " if self.date else f"{self.name}: "

    def say(self, paragraph: str) -> str:
        """The paragraph in this voice."""
        return self.prefix + (voiced(paragraph, self.name) if self.writer else paragraph)


def paragraphs(content: str) -> list[str]:
    """The chunk's paragraphs: its blocks apart from blank lines, a code fence whole, a
    heading joined to what follows it."""
    blocks: list[list[str]] = [[]]
    fenced = False
    for line in content.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        if not line.strip() and not fenced:
            if blocks[-1]:
                blocks.append([])
            continue
        blocks[-1].append(line)
    out: list[str] = []
    heading: list[str] = []
    for block in blocks:
        if not block:
            continue
        text = "\n".join(block).strip()
        if all(_HEADING.match(line) for line in block):
            heading.append(text)
            continue
        out.append("\n".join([*heading, text]))
        heading = []
    if heading and out:
        out[-1] += "\n" + "\n".join(heading)
    return out


def chunk_passages(content: str, voice: Voice, seen: set[str] | None = None) -> list[Passage]:
    """A chunk's paragraphs as passages in `voice`; none for a chunk of one paragraph, which
    its own vector covers, nor for a paragraph of fewer than MIN_WORDS words or one already
    in `seen` (the note's earlier chunks: documentation repeats its code in every tab), to
    which the ones kept are added."""
    texts = paragraphs(content)
    if len(texts) < 2:
        return []
    seen = set() if seen is None else seen
    kept = []
    for text in texts:
        if text in seen or _words_up_to(text, MIN_WORDS) < MIN_WORDS:
            continue
        seen.add(text)
        kept.append(text)
    return [Passage(i, "paragraph", voice.say(t)) for i, t in enumerate(kept)]


def _words_up_to(text: str, most: int) -> int:
    """How many words `text` holds, counted no further than `most` (paragraphs are long)."""
    return sum(1 for _ in islice(_WORD.finditer(text), most))


def line_passages(text: str, kind: PassageKind, *, start: int) -> list[Passage]:
    """A chunk's lines the model wrote (kb.context.chunk_writes: statements, questions;
    one a line) as passages of `kind`, numbered from `start`: each names who and when, so it is
    embedded as written."""
    lines = [line for line in text.splitlines() if line.strip()]
    return [Passage(start + i, kind, line) for i, line in enumerate(lines)]


def build_id() -> str:
    """What a note's stored passages depend on besides the note, for `ContextBuild.id`."""
    return f"paragraphs{PASSAGES_VERSION}"
