"""An Obsidian vault's own settings, read from .obsidian/: pure readers over the files'
contents, and the vault as a sync then sees it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.testclient import TestClient

from kb.config import VaultConfig
from kb.dates import DailyNotes
from kb.errors import KbError
from kb.mcp.tools import build_server
from kb.services.note_reader import Vaults
from kb.store import Store
from kb.vault.obsidian import (
    Settings,
    excluded_glob,
    followed,
    is_settings_file,
    read_settings,
    settings_of,
)
from kb.web.routes import web_app
from support.cli import run_kb
from support.configs import write_config
from support.fake_kb import Kb
from support.reading import tool_text

EXCLUDED = "EXCLUDED-IN-OBSIDIAN"


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


# -- folder names are names: Obsidian's settings are literal path prefixes ----------------------

# Obsidian excludes every path that starts with a filter, character for character.
ODD_NAMES: dict[str, dict[str, Any]] = {
    "templates.json": {"folder": "Templates [old]"},
    "app.json": {"userIgnoreFilters": ["Archive [2023-2024]/", "Drafts\\", "a*b", "Notes/#1?"]},
}


def test_obsidian_folder_names_are_literal_prefixes() -> None:
    settings = settings_of(ODD_NAMES)
    vault = VaultConfig("v", Path("/v"), ignore=settings.ignores)
    for path in (
        "Templates [old]/t.md",
        "Archive [2023-2024]/old.md",
        "Archive [2023-2024]/",
        "Drafts\\x.md",
        "Drafts\\/y.md",
        "a*b.md",
        "a*bc/d.md",
        "Notes/#1?.md",
    ):
        assert vault.is_ignored(path), path
    for path in (
        "Templates o/t.md",
        "Templates d/t.md",
        "Archive 2/x.md",
        "Archive [2023-2024].md",
        "Drafts/x.md",
        "axb.md",
        "Notes/#12.md",
        "Notes/#1.md",
    ):
        assert not vault.is_ignored(path), path
    assert "excluded 'Archive [2023-2024]/' is not indexed (app.json)" in settings.lines()


def _odd_vault(root: Path) -> Path:
    for name, data in ODD_NAMES.items():
        (root / ".obsidian").mkdir(parents=True, exist_ok=True)
        (root / ".obsidian" / name).write_text(json.dumps(data))
    for rel in (
        "n.md",
        "Templates o/kept.md",
        "Templates [old]/t.md",
        "Archive [2023-2024]/old.md",
        "Drafts\\x.md",
        "Notes/#1?.md",
        "Notes/#12.md",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n\nA note about lighthouses.\n")
    return root


def _env(db_url: str) -> dict[str, str]:
    return {**os.environ, "KB_DATABASE_URL": db_url, "COLUMNS": "200"}


def test_kb_follows_folder_names_with_glob_characters(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    vault = _odd_vault(tmp_path / "vault")
    config, env = tmp_path / "kb.toml", _env(db_url)
    init = run_kb(config, env, "init", str(vault), "--yes", "--owner", "Ana", "--provider", "fake")
    assert init.returncode == 0, init.stderr
    assert "/Archive \\[2023-2024\\]/  (excluded in Obsidian" in init.stdout
    for command in (("index",), ("verify",), ("status", "--json")):
        done = run_kb(config, env, *command)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    assert set(store.documents.states("vault")) == {"n.md", "Templates o/kept.md", "Notes/#12.md"}
    status = json.loads(run_kb(config, env, "status", "--json").stdout)
    assert (
        "templates in Templates [old]/ are not indexed (templates.json)"
        in (status["obsidian"]["vault"])
    )


def test_a_settings_file_nested_too_deep_is_as_if_it_were_not_there(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    deep = "[" * 100_000 + "]" * 100_000
    for name in ("app.json", "templates.json"):
        (vault / ".obsidian" / name).write_text(deep)
    os.mkfifo(vault / ".obsidian/daily-notes.json")  # read, it would wait for a writer
    (vault / ".obsidian/plugins/periodic-notes").mkdir(parents=True)
    (vault / ".obsidian/plugins/periodic-notes/data.json").write_text(
        '{"daily": ' + "{" * 1000 + "}" * 1000 + "}"
    )
    (vault / "n.md").write_text("# n\n\nA note about lighthouses.\n")
    assert read_settings(vault) == Settings()
    config = write_config(tmp_path / "kb.toml", vault, owner_name="Ana", personal=())
    env = _env(db_url)
    for command in (("index",), ("verify",), ("status",)):
        done = run_kb(config, env, *command)
        assert done.returncode == 0, done.stderr
        assert "Recursion" not in done.stderr and "Traceback" not in done.stderr
        assert sum(".obsidian" in line for line in done.stderr.splitlines()) <= 1
    assert set(store.documents.states("v")) == {"n.md"}
    made = tmp_path / "init.toml"
    init = run_kb(made, env, "init", str(vault), "--yes", "--owner", "A", "--provider", "fake")
    assert init.returncode == 0, init.stderr


def test_the_faces_read_no_note_obsidian_excludes(kb: Kb, vault: Path) -> None:
    (vault / ".obsidian/templates.json").write_text('{"folder": "Templates [old]"}')
    (vault / ".obsidian/app.json").write_text('{"userIgnoreFilters": ["Archive/"]}')
    for rel in ("Templates [old]/t.md", "Archive/a.md"):
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(f"# Hidden\n\n{EXCLUDED} in {rel}\n")
    (vault / "Projects/link.md").symlink_to(Path("../Archive/a.md"))
    kb.sync()
    hidden = ("Templates [old]/t.md", "Archive/a.md", "Projects/link.md")
    assert not set(hidden) & set(kb.store.documents.states("v"))
    vaults = Vaults(kb.config.vaults)
    for path in hidden:
        with pytest.raises(KbError):
            vaults.read("v", path)
    web = TestClient(web_app(kb, host="127.0.0.1", token=None), base_url="http://127.0.0.1:8766")
    for path in hidden:
        for route in ("/note", "/api/note"):
            page = web.get(route, params={"vault": "v", "path": path})
            assert page.status_code == 404 and EXCLUDED not in page.text, (route, path)

    async def main() -> None:
        async with Client(build_server(kb)) as client:
            for path in hidden:
                result = await client.call_tool("get_note", {"vault": "v", "path": path})
                assert result.is_error and EXCLUDED not in tool_text(result), path
            ok = await client.call_tool(
                "get_note", {"vault": "v", "path": "Projects/Home Server.md"}
            )
            assert not ok.is_error

    anyio.run(main)
