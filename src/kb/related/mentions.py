"""The word n-grams of a text, keyed as links key a note's names (kb.vault.links.note_keys:
one Unicode form, case folded), to look up against the index of every note's names: how a
note mentions another by name without linking to it (Obsidian's "unlinked mentions").

A name is matched as the words it is written with, one space apart, and in the singular or
the plural of its last word ("Core plugins" is found in "a core plugin").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.vault.names import composed

# A word, with its inner hyphens and apostrophes ("pre-release", "Obsidian's").
_WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")

# The longest name looked for, in words: longer titles are rarely written out whole.
MOST_WORDS = 6


@dataclass(frozen=True)
class Grams:
    """A text's n-grams: how often each occurs, and where first, as a share of its words."""

    counts: dict[str, int]
    first: dict[str, float]

    def count(self, name: str) -> int:
        return self.counts.get(name, 0)


def ngrams(text: str, *, most: int = MOST_WORDS) -> Grams:
    """Every run of one to `most` words of `text`, folded, each with its last word in the
    other number too (counted as the same name)."""
    words = _WORD.findall(composed(text).casefold())
    counts: dict[str, int] = {}
    first: dict[str, float] = {}
    for start in range(len(words)):
        for end in range(start + 1, min(start + most, len(words)) + 1):
            run = words[start:end]
            last = run[-1]
            other = last[:-1] if last.endswith("s") and len(last) > 3 else last + "s"
            for gram in (" ".join(run), " ".join([*run[:-1], other])):
                counts[gram] = counts.get(gram, 0) + 1
                first.setdefault(gram, start / len(words))
    return Grams(counts, first)
