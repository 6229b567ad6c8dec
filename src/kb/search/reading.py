"""What the answering model reads of a passage: who wrote it and when, then its text in
words a reader needs no more to follow.

A small model cannot tell whose "I" a passage speaks in, nor when "last week" was: a
journal's "I adopted a turtle last week" answers "when did Joanna adopt a turtle?" only for
someone who knows the journal is Joanna's and its date. So every passage starts with its
writer and its note's date ("Nate, 21 January 2022, in "Letters/Nate/2022-01-21":"; the
owner's own notes "You (Joanna), …", as the answer is to them), the "I" of the owner and of
a writer the chat model named (kb.context.voices) becomes their name (a "you" in the owner's notes
is whoever they wrote to), and each time relative to the note ("last week", "yesterday",
"last Friday") carries the date it means.

Pure functions.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

from kb.dates import spoken

_DAYS = [d.lower() for d in calendar.day_name]
_NUMBERS = "one two three four five six seven eight nine ten".split()
_COUNT = rf"(?:\d{{1,2}}|a|{'|'.join(_NUMBERS)})"
# Words that place something relative to the note's own day. "this" and "last" alone
# ("the last step") name no time.
_RELATIVE = re.compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|last\s+night|this\s+(?:morning|afternoon|evening)"
    rf"|(?:last|this|next)\s+(?:week(?:end)?|month|year|{'|'.join(_DAYS)})"
    rf"|{_COUNT}\s+(?:days?|weeks?|months?|years?)\s+ago)\b(?!\s*\()",
    re.IGNORECASE,
)


def _shift_month(day: dt.date, months: int) -> dt.date:
    year, month = divmod(day.year * 12 + day.month - 1 + months, 12)
    return dt.date(year, month + 1, 1)


def _weekday(day: dt.date, name: str, direction: str) -> dt.date:
    """The named weekday before the note's day ("last"), after it ("next"), or in its week
    ("this")."""
    target = _DAYS.index(name)
    if direction == "last":
        return day - dt.timedelta(days=(day.weekday() - target - 1) % 7 + 1)
    if direction == "next":
        return day + dt.timedelta(days=(target - day.weekday() - 1) % 7 + 1)
    return day + dt.timedelta(days=target - day.weekday())


def _meaning(words: str, day: dt.date) -> str | None:
    """The date (or span) that relative `words` mean in a note of `day`."""
    said = " ".join(words.lower().split())
    named = spoken(day)
    fixed = {
        "yesterday": spoken(day - dt.timedelta(days=1)),
        "last night": spoken(day - dt.timedelta(days=1)),
        "today": named,
        "tonight": named,
        "this morning": named,
        "this afternoon": named,
        "this evening": named,
        "tomorrow": spoken(day + dt.timedelta(days=1)),
        "last week": f"the week before {named}",
        "this week": f"the week of {named}",
        "next week": f"the week after {named}",
        "last weekend": f"the weekend before {named}",
        "this weekend": f"the weekend of {named}",
        "next weekend": f"the weekend after {named}",
        "last month": f"{_shift_month(day, -1):%B %Y}",
        "this month": f"{day:%B %Y}",
        "next month": f"{_shift_month(day, 1):%B %Y}",
        "last year": str(day.year - 1),
        "this year": str(day.year),
        "next year": str(day.year + 1),
    }
    if said in fixed:
        return fixed[said]
    first, _, rest = said.partition(" ")
    if rest in _DAYS:
        on = _weekday(day, rest, first)
        return f"{calendar.day_name[on.weekday()]} {spoken(on)}"
    count, unit, _ = said.split(" ")
    n = 1 if count == "a" else int(count) if count.isdigit() else _NUMBERS.index(count) + 1
    if unit.startswith("day"):
        return spoken(day - dt.timedelta(days=n))
    if unit.startswith("week"):
        return f"the week of {spoken(day - dt.timedelta(weeks=n))}"
    if unit.startswith("month"):
        return f"{_shift_month(day, -n):%B %Y}"
    return str(day.year - n)


def dated(text: str, day: dt.date) -> str:
    """`text` with each word for a time relative to `day` followed by the date it means:
    "last week (the week before 21 January 2022)", "yesterday (20 January 2022)"."""

    def annotate(match: re.Match[str]) -> str:
        meaning = _meaning(match.group(0), day)
        return f"{match.group(0)} ({meaning})" if meaning else match.group(0)

    return _RELATIVE.sub(annotate, text)


# The first person, and what it becomes said of the writer by name; the verbs that change
# with it go along.
_OF_THE_WRITER = {
    "i am": "{} is",
    "i'm": "{} is",
    "i was": "{} was",
    "i've": "{} has",
    "i'll": "{} will",
    "i'd": "{} would",
    "am i": "is {}",
    "was i": "was {}",
    "i": "{}",
    "me": "{}",
    "my": "{}'s",
    "mine": "{}'s",
    "myself": "{}",
}
_FIRST_PERSON = re.compile(
    r"\b(?:i\s+am|i['\u2019]m|i\s+was|i['\u2019]ve|i['\u2019]ll|i['\u2019]d|am\s+i|was\s+i"
    r"|i|me|my|mine|myself)\b",
    re.IGNORECASE,
)


def said_of(text: str, name: str) -> str:
    """The first-person words of `text` said of its writer by name: "I'm proud of my turtle"
    becomes "Nate is proud of Nate's turtle"."""

    def swap(match: re.Match[str]) -> str:
        words = " ".join(match.group(0).lower().replace("\u2019", "'").split())
        return _OF_THE_WRITER[words].format(name)

    return _FIRST_PERSON.sub(swap, text)


@dataclass(frozen=True)
class Writer:
    """Who wrote a note, as far as kb knows."""

    name: str | None  # the owner's name in their notes; elsewhere the one the model named
    owner: bool  # the owner's own note (only when the question is read as theirs)

    def label(self) -> str | None:
        if self.owner:
            return f"You ({self.name})" if self.name else "You"
        return self.name


def header(writer: Writer | None, day: dt.date | None, title: str, headings: list[str]) -> str:
    """The line above a passage: "Nate, 21 January 2022, in "Letters/Nate/2022-01-21" >
    Games:" — who wrote it (someone else, when kb does not know who), the note's date, the
    note's title and where in it the passage sits."""
    parts = []
    if writer is not None:
        parts.append(writer.label() or "Someone else (not you)")
    if day is not None:
        parts.append(spoken(day) or "")
    place = " > ".join([f'"{title}"', *headings])
    parts.append(f"in {place}")
    return ", ".join(parts) + ":"


def text_for_reader(content: str, writer: Writer | None, day: dt.date | None) -> str:
    """A passage's text as the answering model reads it: its writer's "I" as their name
    (the owner's too: their notes may say "you" to someone else, as a letter does), and its
    relative times dated."""
    text = content.strip()
    if writer is not None and writer.name:
        text = said_of(text, writer.name)
    return dated(text, day) if day is not None else text
