"""Whether an answer says only what its passages say, checked without another model.

A small model given passages that do not answer a question often answers anyway: with the
words of a passage about something else, or with another person's facts ("What colour did
Joanna dye her hair?" answered from Nate's letter about his). The checks are the kind the
lines the model writes at index time pass (kb.prompting.chunk_writes): each sentence of the answer,
past what the question itself says, must be made of the passages' words; its numbers and
months must be theirs; and when the question is about someone kb knows (the owner, or a
writer the model named), the passages behind the sentence must be that person's own notes
or name them. An answer that fails is not shown as an answer (kb.search.answer).

Pure functions.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass

from kb.prompting.voices import FIRST_PERSON
from kb.search.reading import Writer

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?")
_NUMBER = re.compile(r"\b\d+(?:[.,:]\d+)?\b")
_MONTH = re.compile(r"\b(" + "|".join(calendar.month_name[1:]) + r")\b", re.IGNORECASE)
_CITATION = re.compile(r"\[\s*\d+(?:\s*,\s*\d+)*\s*\]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_PARAGRAPH = re.compile(r"\n\s*\n")
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


def stems(text: str) -> set[str]:
    """The content words of `text`, each cut to its first five letters (so "adopted" is
    "adopt"), without the words any restatement adds."""
    words = (w.lower() for w in _WORD.findall(text))
    return {w[:5] for w in words if len(w) > 3 and w.isalpha() and w not in _FILLER}


def people_asked_about(question: str, owner: str | None, writers: Sequence[str]) -> set[str]:
    """Whom the question is about, of the people kb knows: the owner (named, or the "I" of
    the question) and the writers the model named. Empty when it names none of them."""
    words = {w.lower() for w in _WORD.findall(question)}
    about = {name for name in writers if _named(name, words)}
    if owner and (_named(owner, words) or FIRST_PERSON.search(question)):
        about.add(owner)
    return about


def _named(name: str, words: set[str]) -> bool:
    return any(part.lower() in words for part in _WORD.findall(name))


def _tied(read: Read, paragraph: str, about: set[str], owner: str | None) -> bool:
    """Whether a paragraph of a passage is about one of the people asked about: their own
    note, or one that names them; or, for the owner, someone else's note speaking to "you"
    (a letter to them). A writer kb does not know may be anyone but the owner."""
    writer = read.writer
    words = {w.lower() for w in _WORD.findall(paragraph)}
    if writer is not None and writer.owner:
        return owner in about or any(_named(person, words) for person in about)
    if writer is not None and writer.name in about:
        return True
    if any(_named(person, words) for person in about):
        return True
    if owner in about:
        return bool(words & _SECOND_PERSON)
    return writer is None or not writer.name


def unsupported(
    answer: str,
    question: str,
    passages: Sequence[Read],
    cited: Sequence[int],
    *,
    owner: str | None,
) -> str | None:
    """Why the answer says what its passages do not, or None when they hold it.

    The passages behind it are the ones it cites, or all it was given when it cites none.
    `owner` is the owner's name when the question is read as theirs."""
    behind = [p for p in passages if p.number in cited] or list(passages)
    held_text = "\n".join(f"{p.header}\n{p.text}" for p in behind)
    held = stems(held_text)
    numbers = set(_NUMBER.findall(held_text))
    months = {m.lower() for m in _MONTH.findall(held_text)}
    asked = stems(question)
    writers = [p.writer.name for p in passages if p.writer and p.writer.name]
    about = people_asked_about(question, owner, writers)
    # A paragraph stands behind a sentence by what it says, not by naming someone in it.
    names = stems(" ".join(about))
    places = {place for p in passages for place in _HEADER_PLACE.findall(p.header)}
    for sentence in _SENTENCE.split(_CITATION.sub(" ", answer)):
        # kb's own line above a passage (who, when, which note) is no fact of the notes: a
        # small model asked what the passages do not say sometimes copies it as its answer.
        if any(f'"{place}"' in sentence for place in places):
            return "a passage's header line, not its words"
        new = stems(sentence) - asked
        missing = new - held
        if len(missing) >= _FEWEST_WORDS_CHECKED and len(missing) > len(new) / 2:
            return "words the passages do not hold"
        if set(_NUMBER.findall(sentence)) - numbers - set(_NUMBER.findall(question)):
            return "a number the passages do not give"
        if {m.lower() for m in _MONTH.findall(sentence)} - months:
            return "a month the passages do not give"
        # Whom the passages say it of, by the words of it they hold (a word from nowhere was
        # weighed above).
        said = (new - names) & held
        if about and said and not _said_of(said, behind, about, owner):
            return "not about whom the question asks"
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
