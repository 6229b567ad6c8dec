"""A note's date, the note's own: what `--after` and `--before` filter on, what results show,
and where its statements' "when" starts from.

In this order: a frontmatter property (`date`, `created`, or a key the config names), the
name of a daily note read with the vault's own format (kb.moment), a YYYY-MM-DD in the file
name, and only then the file's modification time, which a clone, a sync or a backup resets.
Pure functions.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal

from kb.moment import read_date
from kb.names import composed

DateSource = Literal["property", "daily note", "file name", "file time"]

DEFAULT_DATE_KEYS = ("date", "created")
# Obsidian's own default, when daily-notes.json names no format.
DEFAULT_DAILY_FORMAT = "YYYY-MM-DD"

_ISO_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
# Between the settings part of a stored context build and its date rules' part.
_DATES_MARK = "|dates:"


@dataclass(frozen=True)
class DailyNotes:
    """Where a vault's daily notes are, and the format that names them."""

    folder: str  # vault-relative, "" for the vault's root
    format: str = DEFAULT_DAILY_FORMAT

    def holds(self, path: str) -> bool:
        return not self.folder or composed(path).startswith(self._prefix)

    @property
    def _prefix(self) -> str:
        # Composed, as every name kb compares (kb.names): a folder set in Obsidian on one
        # disk holds the notes synced to another.
        return composed(self.folder.rstrip("/") + "/")

    def day(self, path: str) -> dt.date | None:
        """The day a daily note's name says; the format may name folders ("YYYY/MM/…")."""
        if not self.holds(path):
            return None
        name = composed(path)
        inside = name[len(self._prefix) :] if self.folder else name
        return read_date(str(PurePosixPath(inside).with_suffix("")), self.format)


@dataclass(frozen=True)
class DateRules:
    """How a vault's notes are dated."""

    keys: tuple[str, ...] = DEFAULT_DATE_KEYS
    daily: DailyNotes | None = None

    def named_day(self, path: str) -> tuple[dt.date, DateSource] | None:
        """The day a note's path names: a daily note's in the vault's format, else a
        YYYY-MM-DD in its file name. A move that changes it is indexed, not re-keyed."""
        if self.daily is not None and (day := self.daily.day(path)) is not None:
            return day, "daily note"
        match = _ISO_DATE.search(PurePosixPath(path).stem)
        if match is not None and (day := _real_day(match)) is not None:
            return day, "file name"
        return None

    def build_part(self, path: str) -> str:
        """What a note's stored date depends on besides the note, for its context build: a
        change of the daily-notes settings rebuilds exactly the notes in the old or the new
        daily folder; a `date_key` set or changed, every note."""
        parts = [] if self.keys == DEFAULT_DATE_KEYS else ["keys=" + ",".join(self.keys)]
        if self.daily is not None and self.daily.holds(path):
            parts.append(f"{self.daily.folder}:{self.daily.format}")
        return _DATES_MARK + ";".join(parts) if parts else ""


def settings_build(stored: str) -> str:
    """A stored context build without its date rules' part (see DateRules.build_part)."""
    return stored.split(_DATES_MARK, 1)[0]


@dataclass(frozen=True)
class NoteDate:
    day: dt.date
    source: DateSource
    # A property that names no day ("date: soon"), passed over; listed by `kb status --json`.
    unread: str | None = None

    @property
    def own(self) -> dt.date | None:
        """The date the note gives itself; None when it is only the file's time."""
        return None if self.source == "file time" else self.day


def note_date(
    metadata: Mapping[str, Any], path: str, mtime_ns: int, rules: DateRules = DateRules()
) -> NoteDate:
    """A note's date: see the module's docstring for the order."""
    unread: str | None = None
    for key in rules.keys:
        value = metadata.get(key)
        if value is None or value == "":
            continue
        day = _iso_day(value) if isinstance(value, str) else None
        if day is not None:
            return NoteDate(day, "property")
        unread = unread or f"{key}: {value}"
    if (named := rules.named_day(path)) is not None:
        return NoteDate(*named, unread)
    return NoteDate(file_day(mtime_ns), "file time", unread)


def file_day(mtime_ns: int) -> dt.date:
    """The local day of a file's modification time."""
    return dt.datetime.fromtimestamp(mtime_ns / 1e9).date()


def _iso_day(text: str) -> dt.date | None:
    """The day a property says: a YYYY-MM-DD at its start (a date or a time stamp)."""
    match = _ISO_DATE.match(text.strip())
    return _real_day(match) if match else None


def _real_day(match: re.Match[str]) -> dt.date | None:
    try:
        return dt.date(*map(int, match.groups()))
    except ValueError:
        return None


def spoken(day: dt.date | None) -> str | None:
    """A day in words ("21 January 2022"), as passages and statements say it."""
    return f"{day.day} {day:%B %Y}" if day else None
