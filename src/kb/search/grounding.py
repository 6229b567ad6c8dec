"""Whether an answer says only what its passages say, checked without another model.

A small model given passages that do not answer a question often answers anyway: with the
words of a passage about something else, or with another person's facts ("What colour did
Joanna dye her hair?" answered from Nate's letter about his). The checks are the kind the
lines the model writes at index time pass (kb.context.chunk_writes): each sentence of the answer,
past what the question itself says, must be made of the passages' words; its numbers and
months must be theirs; and when the question is about someone kb knows (the owner, a writer
the model named, or someone a folder of the vault is named for: "Letters/Nate"), the
passages behind the sentence must be that person's own notes or name them. An answer that
fails is not shown as an answer (kb.search.answer).

Pure functions.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kb.context.voices import FIRST_PERSON
from kb.search.reading import Writer

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?")
_NUMBER = re.compile(r"\b\d+(?:[.,:]\d+)?\b")
_MONTH = re.compile(r"\b(" + "|".join(calendar.month_name[1:]) + r")\b", re.IGNORECASE)
_CITATION = re.compile(r"\[\s*\d+(?:\s*,\s*\d+)*\s*\]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_PARAGRAPH = re.compile(r"\n\s*\n")
# A list item's number ("2. Install the SDK"): the answer's layout, not a fact.
_ENUMERATOR = re.compile(r"^\s*\d+[.)](?:\s+|$)")
# "Nate's project" is about Nate.
_POSSESSIVE = re.compile(r"['\u2019]s$")
_SECOND_PERSON = frozenset(("you", "your", "yours", "yourself"))
# Where a header line names its note: `in "Letters/Nate/2022-04-15"` (kb.search.reading.header).
_HEADER_PLACE = re.compile(r'\bin "([^"\n]+)"')
# An answer this short ("Twice", "Mafia") may name one thing its passages say otherwise
# (a count, a word for it): only a longer one is held to their words.
_FEWEST_WORDS_CHECKED = 2
# Words any restatement adds, which say nothing the passages must hold.
_FILLER = frozenset(
    "about also after again before being both during from have having into just more most "
    "much only other over some such than that their them then there these they this those "
    "through very what when where which while will with would your yours yourself says said "
    "mentions mentioned according notes note passage passages wrote written does doing "
    "going were been".split()
)


@dataclass(frozen=True)
class Read:
    """One passage as the model read it, and who wrote it."""

    number: int
    header: str  # who wrote it, when, where (kb.search.reading.header)
    text: str
    writer: Writer | None

    def read(self) -> str:
        """What the model read of it: its header line, then its text."""
        return f"{self.header}\n{self.text}"


def stems(text: str) -> set[str]:
    """The content words of `text`, each cut to its first five letters (so "adopted" is
    "adopt"), without the words any restatement adds."""
    words = (w.lower() for w in _WORD.findall(text))
    return {w[:5] for w in words if len(w) > 3 and w.isalpha() and w not in _FILLER}


def people_asked_about(question: str, owner: str | None, writers: Sequence[str]) -> set[str]:
    """Whom the question is about, of the people kb knows: the owner (named, or the "I" of
    the question) and the writers the model named. Empty when it names none of them."""
    words = {_POSSESSIVE.sub("", w.lower()) for w in _WORD.findall(question)}
    about = {name for name in writers if _named(name, words)}
    if owner and (_named(owner, words) or FIRST_PERSON.search(question)):
        about.add(owner)
    return about


def _capitalised(question: str) -> set[str]:
    """The words a question writes as names: capitalised past its first word."""
    return {_POSSESSIVE.sub("", w.lower()) for w in _WORD.findall(question)[1:] if w[:1].isupper()}


def _named(name: str, words: set[str]) -> bool:
    return any(part.lower() in words for part in _WORD.findall(name))


def _tied(read: Read, paragraph: str, about: set[str], owner: str | None) -> bool:
    """Whether a paragraph of a passage is about one of the people asked about: their own
    note (by its writer, or a folder named for them), or one that names them; or, for the
    owner, someone else's note speaking to "you" (a letter to them). A note of a writer kb
    does not know may be anyone's but the owner's, unless a folder of it is named for
    someone else."""
    writer = read.writer
    words = {w.lower() for w in _WORD.findall(paragraph)}
    if writer is not None and writer.owner:
        return owner in about or any(_named(person, words) for person in about)
    if writer is not None and writer.name in about:
        return True
    if any(_named(person, words) for person in about):
        return True
    folders = _folders(read.header)
    if folders & about:
        return True
    if owner in about:
        return bool(words & _SECOND_PERSON)
    return (writer is None or not writer.name) and not folders


def _folders(header: str) -> set[str]:
    """The folders of a passage's note that may be named for someone: capitalised ones
    ("Letters/Nate/2022-04-15": Letters, Nate); a person's name never matches the others."""
    return {
        part
        for place in _HEADER_PLACE.findall(header)
        for part in place.split("/")[:-1]
        if part[:1].isupper()
    }


@dataclass(frozen=True)
class Grounding:
    """What the check found: why the passages do not hold the answer (None: they do), and
    the passages behind it: those it cites that hold a sentence of it, and for a sentence
    it cites another passage for, the one that holds the most of it. Empty when it cites
    none."""

    why: str | None
    behind: tuple[int, ...] = ()


def check(
    answer: str,
    question: str,
    passages: Sequence[Read],
    cited: Sequence[int],
    *,
    owner: str | None,
    folders: Collection[str] = (),
) -> Grounding:
    """Whether the answer says only what its passages say.

    The passages behind each sentence are the ones the answer cites, or all it was given
    when it cites none, or when the cited ones miss what the passages given hold: a small
    model often copies a sentence well and cites the wrong number for it. `owner` is the
    owner's name when the question is read as theirs; `folders` the names of the folders of
    the vaults the passages come from."""
    given = _Held.of(passages)
    cited_reads = [p for p in passages if p.number in cited]
    first = _Held.of(cited_reads) if cited_reads else given
    asked = stems(question)
    asked_numbers = set(_NUMBER.findall(question))
    # The people kb knows: the writers the model named, and whom the vaults' folders are
    # named for (at the structure level, no writer is known but the owner), a folder only
    # where the question writes its name as a name ("Nate", not "projects").
    writers = [p.writer.name for p in passages if p.writer and p.writer.name]
    capitalised = _capitalised(question)
    named = {f for p in passages for f in _folders(p.header)} | set(folders)
    known = [*writers, *(f for f in named if f[:1].isupper() and f.lower() in capitalised)]
    about = people_asked_about(question, owner, known)
    # A paragraph stands behind a sentence by what it says, not by naming someone in it.
    names = stems(" ".join(about))
    places = {place for p in passages for place in _HEADER_PLACE.findall(p.header)}
    behind: list[int] = []
    for sentence in _SENTENCE.split(_CITATION.sub(" ", answer)):
        # kb's own line above a passage (who, when, which note) is no fact of the notes: a
        # small model asked what the passages do not say sometimes copies it as its answer.
        if any(f'"{place}"' in sentence for place in places):
            return Grounding("a passage's header line, not its words")
        sentence = _ENUMERATOR.sub("", sentence)
        held = first
        why = held.misses(sentence, asked, asked_numbers)
        if why is None and cited_reads:
            behind.extend(p.number for p in cited_reads)
        elif why is not None and held is not given:
            held = given
            why = held.misses(sentence, asked, asked_numbers)
            if why is None and (source := _source(stems(sentence) - asked, passages)):
                behind.append(source)
        if why is not None:
            return Grounding(why)
        # Whom the passages say it of, by the words of it they hold (a word from nowhere was
        # weighed above).
        said = (stems(sentence) - asked - names) & held.stems
        if about and said and not _said_of(said, held.reads, about, owner):
            return Grounding("not about whom the question asks")
    return Grounding(None, tuple(dict.fromkeys(behind)))


def _source(words: set[str], passages: Sequence[Read]) -> int | None:
    """The passage that holds the most of a sentence's words (the first of equals)."""
    counts = [(len(words & stems(p.read())), p.number) for p in passages]
    most = max((count for count, _ in counts), default=0)
    return next((number for count, number in counts if count == most), None) if most else None


@dataclass(frozen=True)
class _Held:
    """What some passages hold: their content words, numbers and months."""

    reads: Sequence[Read]
    stems: set[str]
    numbers: set[str]
    months: set[str]

    @classmethod
    def of(cls, reads: Sequence[Read]) -> _Held:
        text = "\n".join(p.read() for p in reads)
        months = {m.lower() for m in _MONTH.findall(text)}
        return cls(reads, stems(text), set(_NUMBER.findall(text)), months)

    def misses(self, sentence: str, asked: set[str], asked_numbers: set[str]) -> str | None:
        """Why these passages do not hold a sentence of an answer, or None."""
        new = stems(sentence) - asked
        missing = new - self.stems
        if len(missing) >= _FEWEST_WORDS_CHECKED and len(missing) > len(new) / 2:
            return "words the passages do not hold"
        if set(_NUMBER.findall(sentence)) - self.numbers - asked_numbers:
            return "a number the passages do not give"
        if {m.lower() for m in _MONTH.findall(sentence)} - self.months:
            return "a month the passages do not give"
        return None


def _said_of(said: set[str], behind: Sequence[Read], about: set[str], owner: str | None) -> bool:
    """Whether a paragraph that holds the most of the sentence's words is about one of the
    people asked about: the one it was taken from, not one sharing a word with it."""
    held = [
        (len(stems(paragraph) & said), read, paragraph)
        for read in behind
        for paragraph in _PARAGRAPH.split(read.text)
    ]
    most = max((count for count, _, _ in held), default=0)
    return any(
        _tied(read, paragraph, about, owner)
        for count, read, paragraph in held
        if count == most and count
    )
