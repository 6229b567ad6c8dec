"""A deterministic synthetic Obsidian-style vault, for measuring kb at scale.

    python bench/vaultgen.py OUT --notes N [--seed S]

writes N Markdown notes under OUT: frontmatter (tags, date, sometimes aliases), headings one
to three levels deep, paragraphs, bullet and numbered lists, an occasional code block, and
wikilinks to other notes of the vault. Words are drawn from a Zipf-like vocabulary (the
`vocabulary()` of the seed: real English function words, a few hundred common English
content words, then a few thousand made-up words), so term frequencies look like real text:
a handful of words are in nearly every chunk, most are rare. About a fifth of the notes lie
in `Journal/` and are written in the first person ("I", "my"), the rest in topic folders.

The same (notes, seed) always gives the same bytes. With kb's default chunking
(`chunking.max_chars` 1600) a note averages about 8.6 chunks of about 610 characters:

| --notes | chunks   | size on disk | time  |
|---------|----------|--------------|-------|
| 1,000   | 8,608    | 7 MB         | 1 s   |
| 10,000  | ~86,000  | 71 MB        | 8 s   |
| 12,000  | 102,335  | 85 MB        | 10 s  |
| 50,000  | ~430,000 | ~360 MB      | ~45 s |

(chunks counted by kb at the `structure` level; figures marked ~ are extrapolated from the
others; times on two shared cores: about 0.35 ms a note to generate, the rest is writing
files).

Importable: `generate(out, notes, seed)`; `vocabulary(seed)` gives the words by rank (most
frequent first), for drawing realistic queries.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Function words, the head of the distribution: PostgreSQL's English configuration drops
# most of them, as it would in real notes.
FUNCTION_WORDS = (
    "the of and to a in is that it for on was with as be this by at are from or have an not "
    "but which one all their there were can has been more if when will would what about so "
    "up out them some into than then its only other also over after just most these two may "
    "any like how where should through very because each both those could our while"
).split()
# Common content words, just below the function words: what every vault talks about.
_COMMON_WORDS = (
    "time work project note meeting team data system server file issue change plan week "
    "day year people question idea problem design release code review test build version "
    "user list page process update result number point part group case service client "
    "database query index model report goal task document budget schedule deadline draft "
    "feature bug fix deploy config network memory cache disk backup log error request "
    "response api model trip travel book article recipe garden house family friend city "
    "train flight hotel weather morning evening lunch dinner coffee walk run hike climb "
    "mountain river lake beach park museum market music film game sport health doctor "
    "sleep exercise habit reading writing learning language course lesson teacher student "
    "research paper experiment measure sample method theory value cost price money account "
    "contract invoice customer vendor product market strategy roadmap milestone sprint "
    "standup retro feedback interview hire onboarding salary office remote laptop phone "
    "email message calendar reminder todo inbox archive folder tag link reference source "
    "summary outline chapter section draft edit publish blog post thread comment reply "
    "decision option risk assumption constraint requirement scope estimate priority owner "
    "status progress blocker dependency migration upgrade install setup script tool editor "
    "terminal shell branch commit merge rebase pipeline container cluster node storage "
    "queue worker thread lock latency throughput benchmark profile metric alert dashboard "
    "incident outage postmortem security password token certificate permission role policy"
).split()
_SYLLABLES = (
    "ka ri to na mi so le vo da pe lu zan tor mel fin gar bel cor dun ver sil tam ros "
    "quin hal mor pex tri lan sun wex yor bra cle dro fla gri plo ske sta thu vel"
).split()
_INVENTED_WORDS = 4000
_ZIPF_EXPONENT = 1.05
_BATCH = 1 << 20

_FOLDERS = ("Projects", "Reference", "Meetings", "Areas", "Clippings", "People", "Inbox")
_PERSONAL_FOLDER = "Journal"
_PERSONAL_SHARE = 0.2
_FIRST_PERSON = ("I", "I", "I", "my", "me", "I've", "I'm")
# Section counts and paragraph lengths chosen so a note averages ~8.5 chunks of kb's
# default 1600-character chunking.
_SECTIONS = (5, 10)
_SENTENCE_WORDS = (6, 22)


@dataclass(frozen=True)
class Vocabulary:
    words: list[str]  # by rank, most frequent first
    cumulative: np.ndarray  # cumulative Zipf probabilities, for sampling by rank


def vocabulary(seed: int = 0) -> list[str]:
    """The vault's words by rank, most frequent first."""
    return _vocabulary(seed).words


def _vocabulary(seed: int) -> Vocabulary:
    rng = np.random.default_rng(seed)
    seen = set(FUNCTION_WORDS) | set(_COMMON_WORDS)
    invented: list[str] = []
    while len(invented) < _INVENTED_WORDS:
        n = int(rng.integers(2, 5))
        word = "".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), n))
        if word not in seen:
            seen.add(word)
            invented.append(word)
    common = list(dict.fromkeys(_COMMON_WORDS))
    rng.shuffle(common)
    words = list(dict.fromkeys(FUNCTION_WORDS)) + common + invented
    weights = 1.0 / np.arange(1, len(words) + 1) ** _ZIPF_EXPONENT
    return Vocabulary(words, np.cumsum(weights / weights.sum()))


class _Writer:
    """One vault's notes: words drawn by NumPy in bulk, every other choice by `random`."""

    def __init__(self, notes: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.numpy_rng = np.random.default_rng(seed)
        self.vocab = _vocabulary(seed)
        self.content = len(FUNCTION_WORDS)  # the rank of the first content word
        self.buffer: list[str] = []
        self.titles = [self._title(i) for i in range(notes)]
        self.folders = [self._folder() for _ in range(notes)]

    def _draw(self, n: int) -> list[str]:
        # Drawing a million ranks at once costs what a few hundred small draws would.
        if len(self.buffer) < n:
            ranks = np.searchsorted(self.vocab.cumulative, self.numpy_rng.random(_BATCH))
            words = self.vocab.words
            self.buffer += [words[r] for r in np.minimum(ranks, len(words) - 1).tolist()]
        drawn = self.buffer[-n:]
        del self.buffer[-n:]
        return drawn

    def _int(self, low: int, high: int) -> int:
        # random.randint's argument checks cost more than the rest of a sentence.
        return low + int(self.rng.random() * (high - low + 1))

    def _content_words(self, n: int) -> list[str]:
        # Tags and headings are made of content words, never "the" or "of".
        top = len(self.vocab.words)
        return [self.vocab.words[self._zipf_rank(self.content, top)] for _ in range(n)]

    def _zipf_rank(self, low: int, high: int) -> int:
        # Log-uniform between low and high: roughly Zipf's 1/rank.
        return min(high - 1, int(low * (high / low) ** self.rng.random()))

    def _title(self, i: int) -> str:
        # Titles lean on the less common words, as real note titles do; the number keeps
        # them unique.
        words = self.vocab.words
        picks = [self._zipf_rank(4 * self.content, len(words)) for _ in range(self._int(2, 4))]
        return " ".join(words[p] for p in picks).capitalize() + f" {i}"

    def _folder(self) -> str:
        if self.rng.random() < _PERSONAL_SHARE:
            return _PERSONAL_FOLDER
        return _FOLDERS[self._int(0, len(_FOLDERS) - 1)]

    def _sentence(self, personal: bool) -> str:
        words = self._draw(self._int(*_SENTENCE_WORDS))
        if personal and self.rng.random() < 0.7:
            words.insert(0, _FIRST_PERSON[self._int(0, len(_FIRST_PERSON) - 1)])
            if self.rng.random() < 0.5:
                words.insert(self._int(2, len(words)), "my")
        if self.rng.random() < 0.12:
            target = self.titles[self._int(0, len(self.titles) - 1)]
            words.insert(self._int(0, len(words) - 1), f"[[{target}]]")
        text = " ".join(words)
        return text[0].upper() + text[1:] + "."

    def _paragraph(self, personal: bool) -> str:
        return " ".join(self._sentence(personal) for _ in range(self._int(2, 6)))

    def _list(self, personal: bool) -> str:
        ordered = self.rng.random() < 0.3
        items = []
        for n in range(self._int(3, 7)):
            marker = f"{n + 1}." if ordered else "-"
            items.append(f"{marker} {' '.join(self._draw(self._int(3, 11)))}")
        return "\n".join(items)

    def _code(self) -> str:
        names = self._draw(6)
        lines = [
            f"def {names[0]}_{names[1]}({names[2]}):",
            f"    {names[3]} = {names[2]}.get('{names[4]}')",
            f"    return {names[3]} or '{names[5]}'",
        ]
        return "```python\n" + "\n".join(lines) + "\n```"

    def _block(self, personal: bool) -> str:
        roll = self.rng.random()
        if roll < 0.04:
            return self._code()
        if roll < 0.22:
            return self._list(personal)
        return self._paragraph(personal)

    def note(self, i: int) -> tuple[str, str]:
        folder = self.folders[i]
        personal = folder == _PERSONAL_FOLDER
        date = dt.date(2019, 1, 1) + dt.timedelta(days=self._int(0, 5 * 365 - 1))
        title = date.isoformat() + f" {i}" if personal else self.titles[i]
        tags = sorted(set(self._content_words(self._int(1, 3))))
        if personal:
            tags.insert(0, "journal")
        lines = ["---", f"date: {date.isoformat()}", f"tags: [{', '.join(tags)}]"]
        if self.rng.random() < 0.1:
            lines.append(f"aliases: [{self.titles[i]} alias]")
        lines += ["---", f"# {title}", "", self._paragraph(personal), ""]
        depth = 1
        for _ in range(self._int(*_SECTIONS)):
            depth = max(2, min(3, depth + self._int(-1, 1)))
            heading = " ".join(self._content_words(self._int(1, 3))).capitalize()
            lines += ["#" * depth + " " + heading, ""]
            for _ in range(self._int(1, 3)):
                lines += [self._block(personal), ""]
        return f"{folder}/{title}.md", "\n".join(lines)


def generate(out: Path, notes: int, seed: int = 0) -> None:
    """Write `notes` notes under `out` (created if missing); the same arguments, the same vault."""
    writer = _Writer(notes, seed)
    for folder in {*_FOLDERS, _PERSONAL_FOLDER}:
        (out / folder).mkdir(parents=True, exist_ok=True)
    for i in range(notes):
        path, text = writer.note(i)
        (out / path).write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write the vault into")
    parser.add_argument("--notes", type=int, required=True, help="how many notes")
    parser.add_argument("--seed", type=int, default=0, help="the same seed, the same vault")
    args = parser.parse_args()
    generate(args.out, args.notes, args.seed)


if __name__ == "__main__":
    main()
