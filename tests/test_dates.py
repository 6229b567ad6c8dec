"""A note's date is the note's: a property, a daily note's name in the vault's format, a date
in the file name, and only then the file's time."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from kb.config import parse_config
from kb.dates import DailyNotes, DateRules, note_date, settings_build, spoken

# 2001-09-09, in any time zone.
MTIME = 1_000_000_000 * 10**9 + 12 * 3600 * 10**9
FILE_DAY = dt.datetime.fromtimestamp(MTIME / 1e9).date()
JOURNAL = DateRules(daily=DailyNotes("Journal", "DD.MM.YYYY"))


def test_a_property_comes_first() -> None:
    assert note_date({"date": "2022-01-21"}, "a.md", MTIME).day == dt.date(2022, 1, 21)
    assert note_date({"date": "2022-01-21T10:30:00"}, "a.md", MTIME).source == "property"
    assert note_date({"created": "2020-02-02"}, "a.md", MTIME).day == dt.date(2020, 2, 2)
    named = DateRules(keys=("written", "date", "created"))
    assert note_date({"written": "2019-03-04"}, "a.md", MTIME, named).day == dt.date(2019, 3, 4)


def test_then_a_daily_note_read_with_the_vault_format() -> None:
    date = note_date({}, "Journal/03.05.2024.md", MTIME, JOURNAL)
    assert (date.day, date.source) == (dt.date(2024, 5, 3), "daily note")
    # Outside the daily folder, the format says nothing.
    assert note_date({}, "Other/03.05.2024.md", MTIME, JOURNAL).source == "file time"
    nested = DateRules(daily=DailyNotes("", "YYYY/MM/YYYY-MM-DD"))
    assert note_date({}, "2024/05/2024-05-03.md", MTIME, nested).source == "daily note"


def test_then_a_date_in_the_file_name_then_the_file_time() -> None:
    assert note_date({}, "Meetings/2024-05-06 Planning.md", MTIME).day == dt.date(2024, 5, 6)
    assert note_date({}, "v2024-05-061.md", MTIME).source == "file time"
    last = note_date({}, "notes.md", MTIME)
    assert (last.day, last.source, last.own) == (FILE_DAY, "file time", None)


def test_a_property_that_names_no_day_falls_back_quietly_and_is_kept() -> None:
    date = note_date({"date": "soon"}, "Journal/2024-04-12.md", MTIME)
    assert (date.day, date.source, date.unread) == (dt.date(2024, 4, 12), "file name", "date: soon")
    assert note_date({"date": "2022-13-40"}, "notes.md", MTIME).source == "file time"
    assert note_date({"date": 2022}, "notes.md", MTIME).unread == "date: 2022"


def test_the_date_rules_a_note_is_built_with() -> None:
    assert JOURNAL.build_part("Projects/x.md") == ""
    part = JOURNAL.build_part("Journal/03.05.2024.md")
    assert part and settings_build("abc" + part) == "abc"
    keyed = DateRules(keys=("written", "date", "created"))
    assert (
        keyed.build_part("Projects/x.md") and settings_build("abc" + keyed.build_part("x")) == "abc"
    )
    assert spoken(dt.date(2022, 1, 21)) == "21 January 2022"
    assert spoken(None) is None


def test_a_vault_names_its_own_date_key(tmp_path: Path) -> None:
    raw = {"owner_name": "Ana", "vaults": [{"path": str(tmp_path), "date_key": "written"}]}
    [vault] = parse_config(raw, base_dir=tmp_path, env={}).vaults
    assert vault.dates.keys == ("written", "date", "created")
    assert vault.obsidian


def test_the_day_a_path_names() -> None:
    assert JOURNAL.named_day("Journal/03.05.2024.md") == (dt.date(2024, 5, 3), "daily note")
    assert JOURNAL.named_day("Meetings/2024-05-06 Planning.md") == (
        dt.date(2024, 5, 6),
        "file name",
    )
    assert JOURNAL.named_day("Meetings/Planning.md") is None
