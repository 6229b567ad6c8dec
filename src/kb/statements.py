"""A chunk's statements: the facts it holds, one a line, each naming who and when.

The chat model writes them from the chunk, told who the note's "I" is (kb.voices) and the
note's date, so "I won last week" can become "Nate won a tournament in the week before 21
January 2022". Each statement is then embedded as a vector of its own (kb.passages), which
is what a question about one fact of a long chunk matches.

A small model fails in known ways: it copies the note's lines under a speaker label, lists
bare dates, keeps "I", invents dates. Every line is checked and dropped when it fails;
only what passes is kept. Pure functions.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass

from kb.voices import FIRST_PERSON

# At most this many statements of one chunk are kept: a runaway list is noise.
MAX_STATEMENTS = 12
_MIN_WORDS, _MAX_WORDS = 4, 40
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)]|statement\s*\d*\s*:)\s*", re.IGNORECASE)
# "Nate: Thanks, Joanna!": a line of the note under a speaker's label, not a statement.
_LABEL = re.compile(r"^[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,2}:\s")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?")
_CAPITALISED = re.compile(r"\b[A-Z][\w'\u2019-]+")
_YEAR = re.compile(r"\b(?:1[89]|2[01])\d\d\b")
_MONTH = re.compile(r"\b(" + "|".join(m for m in calendar.month_name[1:]) + r")\b", re.IGNORECASE)
# "Nate wrote the note on 21 January 2022": about the note, not a fact in it.
_ABOUT_THE_NOTE = re.compile(r"\b(?:wrote|writes|written|write)\s+(?:the|this)\s+note\b", re.I)
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”")
# Capitalised words that start sentences without naming anyone.
_COMMON = frozenset(
    "the a an this that these those it they he she we you there here his her their its "
    "in on at for and but or so then when after before during".split()
)


@dataclass(frozen=True)
class Written:
    """What was kept of the model's answer, and why each dropped line was dropped."""

    kept: tuple[str, ...]
    dropped: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.kept)


def read_statements(answer: str, *, source: str, writer: str | None, date: str | None) -> Written:
    """The usable statements of `answer`, written from the chunk `source`.

    A statement is kept when it is a sentence of 4 to 40 words, says no "I", is not a
    labelled line of the chunk, names someone the chunk or the writer names (when the note
    has a writer: a manual's facts are about things), and every year and month it gives is
    the chunk's or the note's date's."""
    known = f"{source}\n{writer or ''}\n{date or ''}"
    names = {w.lower() for w in _CAPITALISED.findall(known)} - _COMMON if writer else None
    dates = {m.lower() for m in _MONTH.findall(known)} | set(_YEAR.findall(known))
    lines = {_squeeze(line) for line in source.splitlines() if line.strip()}
    kept: list[str] = []
    dropped: list[str] = []
    for raw in answer.splitlines():
        line = _BULLET.sub("", raw.strip()).strip()
        if not line:
            continue
        problem = _problem(line, names=names, dates=dates, lines=lines, seen=kept)
        if problem:
            dropped.append(problem)
        elif len(kept) < MAX_STATEMENTS:
            kept.append(line)
    return Written(tuple(kept), tuple(dropped))


def _problem(
    line: str, *, names: set[str] | None, dates: set[str], lines: set[str], seen: list[str]
) -> str | None:
    words = _WORD.findall(line)
    if not _MIN_WORDS <= len(words) <= _MAX_WORDS:
        return "not a sentence"
    if _LABEL.match(line) or _squeeze(line) in lines:
        return "a line of the note"
    if _ABOUT_THE_NOTE.search(line):
        return "about the note"
    if FIRST_PERSON.search(_QUOTED.sub(" ", line)):
        return "first person"
    if names is not None and not any(w.lower() in names for w in _CAPITALISED.findall(line)):
        return "names no one"
    given = {m.lower() for m in _MONTH.findall(line)} | set(_YEAR.findall(line))
    if given - dates:
        return "a date the note does not give"
    if line in seen:
        return "repeated"
    return None


def _squeeze(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))
