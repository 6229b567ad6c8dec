"""The time a question names: "in March 2023", "on 1 May, 2022", "in 2019", "yesterday".

A question that names a time prefers the notes of that time (kb.search.hybrid), by the note's own
date (kb.dates.note_date), not the file's modification time. Dates are read by
dateparser, and only when the question holds a word that can start one: most questions
name no time, and they pay nothing for this.

A month or a day with no year ("in May") is left alone: which May is a guess, and a wrong
guess would push the right notes down.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass
from typing import Literal

_MONTHS = "|".join(m.lower() for m in (*calendar.month_name[1:], *calendar.month_abbr[1:]))
_DAYS = "|".join(d.lower() for d in calendar.day_name)
# Words that make a time relative to today: "yesterday", "3 days ago", "last week". "last"
# or "this" alone ("the last step", "what does this do") names no time.
_RELATIVE = re.compile(
    rf"\b(?:yesterday|today|ago|(?:last|this|past)\s+(?:day|week|month|year|weekend|{_DAYS}))\b",
    re.IGNORECASE,
)
_MAYBE_A_DATE = re.compile(rf"\b(?:\d{{4}}|{_MONTHS})\b|{_RELATIVE.pattern}", re.IGNORECASE)
_YEAR = re.compile(r"\b\d{4}\b")

Granularity = Literal["day", "week", "month", "year"]


@dataclass(frozen=True)
class Period:
    """The days a question's time covers, first and last included."""

    first: dt.date
    last: dt.date

    def holds(self, day: dt.date | None) -> bool:
        return day is not None and self.first <= day <= self.last


def period_of(day: dt.date, granularity: Granularity) -> Period:
    """The day, week (Monday to Sunday), month or year around `day`."""
    if granularity == "day":
        return Period(day, day)
    if granularity == "week":
        monday = day - dt.timedelta(days=day.weekday())
        return Period(monday, monday + dt.timedelta(days=6))
    if granularity == "month":
        end = calendar.monthrange(day.year, day.month)[1]
        return Period(day.replace(day=1), day.replace(day=end))
    return Period(dt.date(day.year, 1, 1), dt.date(day.year, 12, 31))


def question_period(question: str, today: dt.date) -> Period | None:
    """The time `question` names, relative words read from `today`; None when it names none,
    or only a time without a year."""
    if not _MAYBE_A_DATE.search(question):
        return None
    # Imported here: it takes most of a second, and most questions never need it.
    from dateparser.date import DateDataParser
    from dateparser.search import search_dates

    base = dt.datetime.combine(today, dt.time())
    settings = {"PREFER_DATES_FROM": "past", "RELATIVE_BASE": base}
    found = search_dates(question, languages=["en"], settings=settings) or []
    reader = DateDataParser(languages=["en"], settings={**settings, "RETURN_TIME_AS_PERIOD": True})
    for words, _ in found:
        if not (_YEAR.search(words) or _RELATIVE.search(words)):
            continue
        data = reader.get_date_data(words)
        if data.date_obj is None or data.period not in ("day", "week", "month", "year"):
            continue
        return period_of(data.date_obj.date(), data.period)
    return None
