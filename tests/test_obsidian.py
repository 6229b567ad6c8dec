"""An Obsidian vault's own settings, read from .obsidian/: pure readers over the files'
contents, and the vault as a sync then sees it."""

from __future__ import annotations

import json
from pathlib import Path

from kb.config import VaultConfig
from kb.dates import DailyNotes
from kb.obsidian import excluded_glob, followed, is_settings_file, settings_of


def test_daily_notes_templates_and_excluded_files() -> None:
    settings = settings_of(
        {
            "daily-notes.json": {"folder": "Journal/", "format": "DD.MM.YYYY"},
            "templates.json": {"folder": "Templates"},
            "app.json": {"userIgnoreFilters": ["Archive/", "Drafts", "/^secret/"]},
        }
    )
    assert settings.daily == DailyNotes("Journal", "DD.MM.YYYY")
    assert settings.templates == "Templates"
    assert settings.ignores == ("/Templates/", "/Archive/", "/Drafts*")
    assert "excluded '/^secret/' cannot be followed (a regular expression)" in settings.lines()


def test_obsidian_defaults_and_the_periodic_notes_plugin() -> None:
    assert settings_of({"daily-notes.json": {}}).daily == DailyNotes("", "YYYY-MM-DD")
    periodic = {"daily": {"enabled": True, "folder": "Daily", "format": "YYYY/MM/YYYY-MM-DD"}}
    settings = settings_of(
        {"daily-notes.json": {"folder": "Journal"}, "plugins/periodic-notes/data.json": periodic}
    )
    assert settings.daily == DailyNotes("Daily", "YYYY/MM/YYYY-MM-DD")
    off = {"daily": {"enabled": False, "folder": "Daily"}}
    assert settings_of({"plugins/periodic-notes/data.json": off}).daily is None
    assert settings_of({}).ignores == ()


def test_excluded_filters_as_globs() -> None:
    assert excluded_glob("Archive/") == "/Archive/"
    assert excluded_glob("Old notes") == "/Old notes*"
    assert excluded_glob("/regex/") is None
    assert excluded_glob("  ") is None


def test_a_vault_as_a_sync_sees_it(tmp_path: Path) -> None:
    (tmp_path / ".obsidian").mkdir()
    (tmp_path / ".obsidian/templates.json").write_text(json.dumps({"folder": "Templates"}))
    (tmp_path / ".obsidian/app.json").write_text("not json")  # as if it were not there
    vault = VaultConfig("v", tmp_path, ignore=("*.tmp",))
    seen, settings = followed(vault)
    assert seen.ignore == ("*.tmp", "/Templates/")
    assert seen.is_ignored("Templates/Daily.md") and not seen.is_ignored("Notes/Templates.md")
    assert settings.lines() == ["templates in Templates/ are not indexed (templates.json)"]
    off = VaultConfig("v", tmp_path, obsidian=False)
    assert followed(off)[0] is off
    assert is_settings_file(".obsidian/daily-notes.json")
    assert not is_settings_file(".obsidian/workspace.json")
