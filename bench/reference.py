"""Reference statements: a dataset's own facts put where the chat model's statements go.

personal-dev ships, for each note, one-line facts about its people written by a strong
model and tied to the lines they come from (`observations.jsonl`). `ReferenceWriter`
answers kb's statements prompt for a chunk with the facts whose lines it holds, and passes
every other prompt to the real model. Indexed that way, a level measures what kb's design
does with a good statement writer, apart from how well the 1.5B model writes: the two
figures the statements issue asks to be reported side by side. kb's checks still read
every fact, as they read the model's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kb.models.base import ChatModel, Prompt, TokenUsage

FACTS_FILE = "observations.jsonl"


@dataclass(frozen=True)
class Fact:
    file: str  # as the dataset names it: the vault's folder, then the note's path
    start: int  # characters into the note
    end: int
    text: str
    about: str  # whom it is about


def load_facts(folder: Path) -> tuple[Fact, ...]:
    """The dataset's reference facts; none when it has no such file."""
    path = folder / FACTS_FILE
    if not path.exists():
        return ()
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line)
    return tuple(Fact(r["file"], r["start"], r["end"], r["text"], r["about"]) for r in rows)


class FactFinder:
    """The reference facts of a chunk, found from its text."""

    def __init__(
        self, vault: Path, prefix: str, files: Sequence[str], facts: Sequence[Fact]
    ) -> None:
        self._texts = {f: (vault / f).read_text(encoding="utf-8") for f in files}
        self._facts: dict[str, list[Fact]] = {}
        for fact in facts:
            if fact.file.startswith(prefix):
                self._facts.setdefault(fact.file.removeprefix(prefix), []).append(fact)

    def facts_of(self, content: str, path: str | None = None) -> list[Fact] | None:
        """The facts whose lines lie in the chunk `content` (by their middle, so a fact
        across two chunks belongs to one), or None when no note holds it."""
        # A chunk too long for the prompt was cut: its opening places it.
        opening = content[:200]
        files = [path] if path is not None else list(self._texts)
        for file in files:
            start = self._texts[file].find(opening)
            if start >= 0:
                end = start + len(content)
                facts = self._facts.get(file, ())
                return [f for f in facts if start <= (f.start + f.end) // 2 < end]
        return None


class ReferenceWriter:
    """A chat model whose statements are the reference facts of the chunk asked about."""

    def __init__(self, inner: ChatModel, facts: FactFinder) -> None:
        self.inner = inner
        # The inner model's name: the other prompts' cached answers stay valid.
        self.name = inner.name
        self.usage: TokenUsage = inner.usage
        self.facts = facts
        self.unplaced = 0

    def complete(self, prompt: Prompt) -> str:
        if prompt.task != "statements":
            return self.inner.complete(prompt)
        found = self.facts.facts_of(prompt.inputs["content"])
        if found is None:
            self.unplaced += 1
        return "\n".join(fact.text for fact in found or ())

    def stream(self, prompt: Prompt) -> Iterator[str]:
        yield self.complete(prompt)
