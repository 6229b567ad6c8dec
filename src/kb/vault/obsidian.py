"""An Obsidian vault's own settings, as kb follows them: the daily notes' folder and the
format that names them (`daily-notes.json`, or the Periodic Notes plugin's
`plugins/periodic-notes/data.json`), the templates folder (`templates.json`), the files the
user excluded and the attachments folder (`app.json`).

Pure functions over the files' contents, and one small reader. Read at each sync: a change
in `.obsidian/*.json` acts as a config change (see DateRules.build_part), and the templates
and excluded files become ignore rules, so that their notes leave the index as a deleted
note does.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb.config import VaultConfig, glob_problem, literal_glob
from kb.dates import DEFAULT_DAILY_FORMAT, DailyNotes

CONFIG_DIR = ".obsidian"
# The files read, relative to the config folder: a change in one of them is a settings change.
SETTINGS_FILES = (
    "app.json",
    "daily-notes.json",
    "templates.json",
    "plugins/periodic-notes/data.json",
)


def is_settings_file(rel_path: str) -> bool:
    """Whether a vault-relative path is one of the settings files kb follows."""
    folder, _, name = rel_path.partition("/")
    return folder == CONFIG_DIR and name in SETTINGS_FILES


@dataclass(frozen=True)
class Exclusion:
    """A folder or filter the settings leave out."""

    glob: str | None  # as an ignore glob; None when it cannot be followed
    reason: str  # why it is left out, as `kb init` shows it beside the glob
    line: str  # as `kb status` and `kb init` list the settings followed


@dataclass(frozen=True)
class Settings:
    """What kb follows of a vault's Obsidian settings; empty for a vault without them."""

    daily: DailyNotes | None = None
    daily_from: str = ""  # the settings file that named the daily notes
    templates: str | None = None  # vault-relative folder
    excluded: tuple[str, ...] = ()  # app.json's userIgnoreFilters, as written
    attachments: str | None = None  # only shown: attachments are never notes

    @property
    def ignores(self) -> tuple[str, ...]:
        """The templates folder and the excluded files as ignore globs (gitignore style)."""
        return tuple(glob for glob, _ in self.ignored())

    def ignored(self) -> list[tuple[str, str]]:
        """Each ignore glob the settings make, and why."""
        return [(e.glob, e.reason) for e in self.exclusions() if e.glob is not None]

    def exclusions(self) -> list[Exclusion]:
        """The templates folder and each excluded-files filter, as kb follows them."""
        out: list[Exclusion] = []
        if self.templates:
            out.append(
                _followed(
                    literal_glob(self.templates + "/"),
                    "the templates folder (templates.json)",
                    f"templates in {self.templates}/ are not indexed (templates.json)",
                    f"the templates folder {self.templates!r}",
                )
            )
        for filter_ in self.excluded:
            if not filter_.strip():
                continue  # names nothing
            glob = excluded_glob(filter_)
            if glob is None:
                out.append(
                    Exclusion(
                        None, "", f"excluded {filter_!r} cannot be followed (a regular expression)"
                    )
                )
                continue
            out.append(
                _followed(
                    glob,
                    f"excluded in Obsidian: {filter_!r} (app.json)",
                    f"excluded {filter_!r} is not indexed (app.json)",
                    f"excluded {filter_!r}",
                )
            )
        return out

    def lines(self) -> list[str]:
        """The settings followed, one a line, as `kb status` and `kb init` show them."""
        out: list[str] = []
        if self.daily is not None:
            where = self.daily.folder or "the vault's root"
            out.append(f"daily notes in {where}, named {self.daily.format} ({self.daily_from})")
        out += [e.line for e in self.exclusions()]
        if self.attachments:
            out.append(f"attachments in {self.attachments}/ (never notes)")
        return out


def _followed(glob: str, reason: str, line: str, setting: str) -> Exclusion:
    """A setting's glob, or one line saying why it cannot be followed: whatever a settings
    file holds, a sync goes on."""
    if (problem := glob_problem(glob)) is not None:
        return Exclusion(None, "", f"{setting} cannot be followed: {problem}")
    return Exclusion(glob, reason, line)


def _folder(value: Any) -> str | None:
    """A folder setting as a vault-relative path; None for the vault's root or none."""
    if not isinstance(value, str):
        return None
    folder = value.strip().removeprefix("./").strip("/")
    return None if folder in ("", ".") else folder


def excluded_glob(filter_: str) -> str | None:
    """An excluded-files filter as an ignore glob. Obsidian excludes every path that starts
    with a filter ("Archive/", "Drafts"), whatever characters it holds; one written /like
    this/ is a regular expression, which a glob cannot say (None)."""
    text = filter_.strip()
    if not text or (len(text) > 1 and text.startswith("/") and text.endswith("/")):
        return None
    prefix = text.lstrip("/")
    return literal_glob(prefix) if prefix else None


def daily_notes(data: Mapping[str, Any]) -> DailyNotes:
    """The core Daily notes plugin's settings (daily-notes.json)."""
    return DailyNotes(
        _folder(data.get("folder")) or "",
        _format(data.get("format")),
    )


def periodic_daily(data: Mapping[str, Any]) -> DailyNotes | None:
    """The Periodic Notes plugin's daily notes, when it has them on."""
    daily = data.get("daily")
    if not isinstance(daily, dict) or not daily.get("enabled"):
        return None
    return DailyNotes(_folder(daily.get("folder")) or "", _format(daily.get("format")))


def _format(value: Any) -> str:
    return value.strip() if isinstance(value, str) and value.strip() else DEFAULT_DAILY_FORMAT


def settings_of(files: Mapping[str, Mapping[str, Any]]) -> Settings:
    """The settings named by the files' contents (by name in SETTINGS_FILES)."""
    daily, daily_from = None, ""
    periodic = files.get("plugins/periodic-notes/data.json")
    if periodic is not None and (daily := periodic_daily(periodic)) is not None:
        daily_from = "plugins/periodic-notes/data.json"
    elif "daily-notes.json" in files:
        daily, daily_from = daily_notes(files["daily-notes.json"]), "daily-notes.json"
    app = files.get("app.json", {})
    filters = app.get("userIgnoreFilters")
    excluded = tuple(f for f in filters if isinstance(f, str)) if isinstance(filters, list) else ()
    return Settings(
        daily=daily,
        daily_from=daily_from,
        templates=_folder(files.get("templates.json", {}).get("folder")),
        excluded=excluded,
        attachments=_folder(app.get("attachmentFolderPath")),
    )


# Obsidian's settings files are a few KiB; a larger one is not a settings file kb reads.
MAX_SETTINGS_BYTES = 1 << 20


def read_settings(vault_path: Path) -> Settings:
    """The settings in a vault's .obsidian/ folder; a file that is missing, unreadable or
    not a JSON object is as if it were not there (Obsidian then uses its defaults)."""
    files: dict[str, Mapping[str, Any]] = {}
    for name in SETTINGS_FILES:
        data = _settings_file(vault_path / CONFIG_DIR / name)
        if isinstance(data, dict):
            files[name] = data
    return settings_of(files)


def _settings_file(path: Path) -> Any:
    """A settings file's JSON, or None for one that cannot be read as such."""
    try:
        # O_NONBLOCK: a FIFO in a settings file's place does not hang the sync.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as file:
            st = os.fstat(file.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SETTINGS_BYTES:
                return None
            # RecursionError: arrays or objects nested deeper than the parser goes.
            return json.loads(file.read(MAX_SETTINGS_BYTES + 1))
    except (OSError, ValueError, RecursionError):
        return None


def followed(vault: VaultConfig) -> tuple[VaultConfig, Settings]:
    """The vault as a sync sees it, its Obsidian settings applied (unless the config turns
    them off), and those settings."""
    if not vault.obsidian:
        return vault, Settings()
    settings = read_settings(vault.path)
    extra = tuple(g for g in settings.ignores if g not in vault.ignore)
    dates = dataclasses.replace(vault.dates, daily=settings.daily)
    return dataclasses.replace(vault, ignore=vault.ignore + extra, dates=dates), settings
