"""The word n-grams of a text, keyed as links key a note's names (kb.vault.links.note_keys:
one Unicode form, case folded), to look up against the index of every note's names: how a
note mentions another by name without linking to it (Obsidian's "unlinked mentions").

A name is matched as the words it is written with, one space apart, and in the singular or
the plural of its last word ("Core plugins" is found in "a core plugin").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.names import composed

# A word, with its inner hyphens and apostrophes ("pre-release", "Obsidian's").
_WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")

# The longest name looked for, in words: longer titles are rarely written out whole.
MOST_WORDS = 5
# Words a name hardly ever ends with: a run of words ending with one is not looked up (half
# a text's runs, and the lookups they cost).
_NO_LAST = frozenset(
    "a an and are as at be by for from in is it of on or that the this to was with".split()
)


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
    # Each word in the other number, once: a word ends a run up to `most` times.
    others = [w[:-1] if w.endswith("s") and len(w) > 3 else w + "s" for w in words]
    counts: dict[str, int] = {}
    first: dict[str, float] = {}
    for start in range(len(words)):
        where = start / len(words)
        head = ""  # the run's words before its last, each followed by a space
        for end in range(start, min(start + most, len(words))):
            last = words[end]
            if last not in _NO_LAST:
                for gram in (head + last, head + others[end]):
                    counts[gram] = counts.get(gram, 0) + 1
                    first.setdefault(gram, where)
            head += last + " "
    return Grams(counts, first)
