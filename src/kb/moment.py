"""Dates written in a Moment.js format, read back: the format Obsidian names a daily note by
("YYYY-MM-DD", "DD.MM.YYYY", "YYYY/MM/YYYY-MM-DD", "dddd, MMMM Do YYYY").

Pure functions. A format is compiled once into a regular expression whose groups are the
year, month and day; tokens that name no part of the date (a weekday, an hour) only have to
match. Each token is read once, greedily, as Moment reads it: a name costs time in
proportion to its length, whatever the format. A folder in the format ("YYYY/MM/…") is part
of the path the expression reads.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
from dataclasses import dataclass
from typing import Literal

Part = Literal["year", "month", "day"]

_MONTH_NAMES = [m.lower() for m in calendar.month_name[1:]]
_MONTH_ABBRS = [m.lower() for m in calendar.month_abbr[1:]]
_DAY_NAMES = "|".join(calendar.day_name)
_DAY_ABBRS = "|".join(calendar.day_abbr)

# Token → (expression, the part of the date it gives, or None). Longest tokens first, so
# that "MMMM" is not read as "MM" twice.
_TOKENS: list[tuple[str, str, Part | None]] = [
    ("YYYY", r"\d{4}", "year"),
    ("MMMM", "|".join(calendar.month_name[1:]), "month"),
    ("dddd", _DAY_NAMES, None),
    ("MMM", "|".join(calendar.month_abbr[1:]), "month"),
    ("ddd", _DAY_ABBRS, None),
    ("YY", r"\d{2}", "year"),
    ("MM", r"\d{2}", "month"),
    ("DD", r"\d{2}", "day"),
    ("Do", r"\d{1,2}(?:st|nd|rd|th)", "day"),
    ("dd", r"Mo|Tu|We|Th|Fr|Sa|Su", None),
    ("HH", r"\d{2}", None),
    ("hh", r"\d{2}", None),
    ("mm", r"\d{2}", None),
    ("ss", r"\d{2}", None),
    ("gggg", r"\d{4}", None),
    ("GGGG", r"\d{4}", None),
    ("ww", r"\d{2}", None),
    ("WW", r"\d{2}", None),
    ("M", r"\d{1,2}", "month"),
    ("D", r"\d{1,2}", "day"),
    ("d", r"[0-6]", None),
    ("H", r"\d{1,2}", None),
    ("h", r"\d{1,2}", None),
    ("m", r"\d{1,2}", None),
    ("s", r"\d{1,2}", None),
    ("w", r"\d{1,2}", None),
    ("W", r"\d{1,2}", None),
    ("A", r"AM|PM", None),
    ("a", r"am|pm", None),
    ("Q", r"[1-4]", None),
]


@dataclass(frozen=True)
class Compiled:
    """A format as an expression over a note's path without its suffix."""

    pattern: re.Pattern[str]
    parts: tuple[Part | None, ...]  # what each group gives

    @property
    def dates(self) -> bool:
        """Whether the format names a whole day: a year, a month and a day."""
        return {"year", "month", "day"} <= set(self.parts)


@functools.lru_cache(maxsize=32)
def compile_format(fmt: str) -> Compiled:
    """A Moment.js format as an expression; text in [brackets] is literal, as in Moment."""
    pieces: list[str] = []
    parts: list[Part | None] = []
    i = 0
    while i < len(fmt):
        if fmt[i] == "[":
            end = fmt.find("]", i)
            end = len(fmt) if end < 0 else end
            pieces.append(re.escape(fmt[i + 1 : end]))
            i = end + 1
            continue
        token = next((t for t in _TOKENS if fmt.startswith(t[0], i)), None)
        if token is None:
            pieces.append(re.escape(fmt[i]))
            i += 1
            continue
        name, expression, part = token
        # Atomic: each token takes what it matches and is never read again, as Moment reads
        # a name. Backtracking into adjacent variable-width tokens ("DMDM…") would try every
        # split of a long run of digits, in every sync.
        pieces.append(f"(?>({expression}))")
        parts.append(part)
        i += len(name)
    return Compiled(re.compile("".join(pieces), re.IGNORECASE), tuple(parts))


def read_date(text: str, fmt: str) -> dt.date | None:
    """The day `text` names in format `fmt` (the whole text, as a daily note's name is the
    format), or None when it does not match or names no real day."""
    compiled = compile_format(fmt)
    if not compiled.dates:
        return None
    match = compiled.pattern.fullmatch(text)
    if match is None:
        return None
    found: dict[Part, int] = {}
    for part, value in zip(compiled.parts, match.groups(), strict=True):
        if part is None:
            continue
        number = _number(part, value)
        # A part given twice ("YYYY/MM/YYYY-MM-DD") must say the same both times.
        if found.setdefault(part, number) != number:
            return None
    try:
        return dt.date(found["year"], found["month"], found["day"])
    except ValueError:
        return None  # no such day, or the year 0000


def _number(part: Part, value: str) -> int:
    if part == "year" and len(value) == 2:
        return int(value) + (2000 if int(value) < 69 else 1900)  # Moment's two-digit year
    if value.isdigit():
        return int(value)
    if part == "day":
        return int(value[:-2])  # "3rd"
    word = value.lower()
    return (_MONTH_NAMES.index(word) if word in _MONTH_NAMES else _MONTH_ABBRS.index(word)) + 1
