"""`kb init` on an Obsidian vault with its own settings, and what indexing makes of them: the
daily notes dated by their names, templates and excluded files never indexed, and an edit of
the settings rebuilding exactly the notes it shapes."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from kb.config import load_config
from kb.store import Store
from support.cli import run_kb
from support.configs import write_config
from support.fake_kb import Kb
from support.reading import rows

JOURNAL_DAY = dt.date(2024, 5, 3)


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def obsidian_vault(tmp_path: Path) -> Path:
    """A vault as Obsidian leaves it: daily notes in Journal/ named DD.MM.YYYY, templates in
    Templates/, Archive/ excluded."""
    root = tmp_path / "Ana's vault"
    settings = {
        "daily-notes.json": {"folder": "Journal", "format": "DD.MM.YYYY"},
        "templates.json": {"folder": "Templates"},
        "app.json": {"userIgnoreFilters": ["Archive/"], "attachmentFolderPath": "Files"},
    }
    for name, data in settings.items():
        _write(root, f".obsidian/{name}", json.dumps(data))
    _write(
        root,
        "Journal/03.05.2024.md",
        "I planted the tomato seedlings with my neighbour today. I think they will take.\n",
    )
    _write(root, "Journal/04.05.2024.md", "I watered the seedlings and my back hurts.\n")
    _write(root, "Templates/Daily.md", "# {{date}}\n\nGratitude prompt zanzibarite.\n")
    _write(root, "Archive/Old garden.md", "Tomato seedlings from the archive.\n")
    _write(root, "Projects/Garden.md", "---\ndate: soon\n---\nThe garden plan: tomato beds.\n")
    _write(root, "Projects/Beds.md", "Raised beds, [[Garden|the garden plan]] ^beds\n")
    return root


def _env(db_url: str) -> dict[str, str]:
    return {**os.environ, "KB_DATABASE_URL": db_url, "COLUMNS": "200"}


def test_kb_init_proposes_what_the_obsidian_settings_say(
    obsidian_vault: Path, tmp_path: Path, db_url: str
) -> None:
    config = tmp_path / "config" / "kb.toml"
    env = _env(db_url)
    done = run_kb(
        config,
        env,
        "init",
        str(obsidian_vault),
        "--yes",
        "--owner",
        "Ana Lima",
        "--provider",
        "fake",
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    proposed = [line for line in out.splitlines() if line.startswith("personal")]
    assert proposed == [
        "personal     Journal/**  (the daily-notes folder (daily-notes.json))",
    ]
    assert "/Templates/  (the templates folder (templates.json)" in out
    assert "/Archive/  (excluded in Obsidian: 'Archive/' (app.json)" in out
    assert "dot-folders (.obsidian/, .trash/, .git/) are always skipped" in out
    assert f"kb --config {config} index" in out
    written = load_config(config, env={})
    assert written.owner_name == "Ana Lima"
    [vault] = written.vaults
    assert (vault.name, vault.personal, vault.ignore) == ("Ana's vault", ("Journal/**",), ())

    # Indexed and searched as a newcomer would: the daily note was modified today, and is
    # found for its own day.
    today = time.time()
    os.utime(obsidian_vault / "Journal/03.05.2024.md", (today, today))
    indexed = run_kb(config, env, "index")
    assert indexed.returncode == 0, indexed.stderr
    day = run_kb(
        config,
        env,
        "query",
        "tomato seedlings",
        "--json",
        "--after",
        "2024-05-03",
        "--before",
        "2024-05-04",
    )
    assert day.returncode == 0, day.stderr
    [hit] = json.loads(day.stdout)
    assert (hit["path"], hit["date"]) == ("Journal/03.05.2024.md", JOURNAL_DAY.isoformat())
    modified = run_kb(
        config,
        env,
        "query",
        "tomato seedlings",
        "--json",
        "--modified-after",
        dt.date.today().isoformat(),
    )
    assert "Journal/03.05.2024.md" in {h["path"] for h in json.loads(modified.stdout)}
    # A template, or an excluded note, is never a result.
    template = run_kb(config, env, "query", "gratitude prompt zanzibarite", "--json")
    paths = {h["path"] for h in json.loads(template.stdout)}
    assert not any(p.startswith(("Templates/", "Archive/")) for p in paths)
    status = run_kb(config, env, "status", "--json")
    report = json.loads(status.stdout)
    assert report["undated"] == [
        {
            "vault": "Ana's vault",
            "path": "Projects/Garden.md",
            "property": "date: soon",
            "dated_by": "file time",
        }
    ]
    assert any("daily notes in Journal" in line for line in report["obsidian"]["Ana's vault"])

    # A second vault joins the config; one inside the first is refused.
    other = tmp_path / "work"
    _write(other, "Notes.md", "Work notes.\n")
    added = run_kb(config, env, "init", str(other), "--add", "--yes", "--provider", "fake")
    assert added.returncode == 0, added.stderr
    assert [v.name for v in load_config(config, env={}).vaults] == ["Ana's vault", "work"]
    inside = run_kb(
        config,
        env,
        "init",
        str(obsidian_vault / "Projects"),
        "--add",
        "--yes",
        "--provider",
        "fake",
    )
    assert inside.returncode != 0 and "is inside vault" in inside.stderr


def test_bad_input_gets_one_line_and_a_non_zero_exit(
    obsidian_vault: Path, tmp_path: Path, db_url: str
) -> None:
    config = tmp_path / "kb.toml"
    env = _env(db_url)
    note = obsidian_vault / "Projects/Garden.md"
    for args, said in (
        ((str(note), "--yes", "--owner", "Ana"), "is not a folder"),
        ((str(obsidian_vault), "--yes", "--owner", "  "), "the owner's name is empty"),
        ((str(obsidian_vault), "--yes", "--owner", "Ana", "--ignore", "\\"), "invalid glob"),
        ((str(obsidian_vault), "--yes", "--owner", "Ana", "--personal", "[z-a]"), "invalid glob"),
    ):
        done = run_kb(config, env, "init", *args, "--provider", "fake")
        assert done.returncode != 0 and said in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    first = run_kb(
        config, env, "init", str(obsidian_vault), "--yes", "--owner", "Ana", "--provider", "fake"
    )
    assert first.returncode == 0, first.stderr
    again = run_kb(
        config, env, "init", str(obsidian_vault), "--yes", "--owner", "Bo", "--provider", "fake"
    )
    assert again.returncode != 0 and '+owner_name = "Bo"' in again.stderr
    assert 'owner_name = "Ana"' in config.read_text()
    forced = run_kb(
        config,
        env,
        "init",
        str(obsidian_vault),
        "-y",
        "--owner",
        "Bo",
        "--provider",
        "fake",
        "--force",
    )
    assert forced.returncode == 0 and 'owner_name = "Bo"' in config.read_text(), forced.stderr
    unknown = run_kb(config, env, "init", str(obsidian_vault), "--yes", "--provider", "gpt")
    assert unknown.returncode != 0 and "--provider must be one of" in unknown.stderr


def test_an_edit_of_the_daily_notes_settings_rebuilds_exactly_the_daily_notes(
    obsidian_vault: Path, store: Store
) -> None:
    config = load_config(_config_file(obsidian_vault), env={})
    kb = Kb(store, config)
    first = kb.sync()
    assert first.indexed == 4  # the journal's two days and the projects' two notes
    dated = {
        r["path"]: r["note_date"] for r in rows(store, "SELECT path, note_date FROM documents")
    }
    assert dated["Journal/03.05.2024.md"] == JOURNAL_DAY
    kb.reset_counts()
    unchanged = kb.sync()
    assert (unchanged.indexed, unchanged.unchanged) == (0, 4)

    settings = obsidian_vault / ".obsidian/daily-notes.json"
    settings.write_text(json.dumps({"folder": "Journal", "format": "YYYY-MM-DD"}))
    kb.reset_counts()
    again = kb.sync()
    assert (again.indexed, again.unchanged) == (2, 2)
    # Their questions name their dates, so they alone are written again.
    assert set(kb.chat.calls) <= {"questions"} and kb.chat.total_calls <= 2
    redated = rows(
        store,
        "SELECT note_date, date_source FROM documents WHERE path = %s",
        "Journal/03.05.2024.md",
    )
    assert redated[0]["date_source"] == "file time"


def _config_file(vault: Path) -> Path:
    return write_config(
        vault.parent / "kb.toml",
        vault,
        owner_name="Ana Lima",
        name="ana",
        personal=("Journal/**",),
    )


def test_kb_init_proposes_a_name_the_index_does_not_hold(tmp_path: Path, db_url: str) -> None:
    """Two folders called `notes`, each with its own config on one index."""
    env = _env(db_url)
    folders = {}
    for place in ("work", "home"):
        folders[place] = _write(tmp_path / place / "notes", f"{place}.md", f"I {place}.\n").parent

    def init(place: str, *extra: str) -> subprocess.CompletedProcess[str]:
        config = tmp_path / f"{place}.toml"
        args = ("init", str(folders[place]), "--yes", "--owner", "Ana Lima", "--provider", "fake")
        return run_kb(config, env, *args, *extra)

    assert init("work").returncode == 0
    assert run_kb(tmp_path / "work.toml", env, "index").returncode == 0
    refused = init("home", "--name", "notes")
    assert refused.returncode == 1 and "--name" in refused.stderr
    assert str(folders["work"]) in refused.stderr
    done = init("home")
    assert done.returncode == 0, done.stderr
    assert "(named 'home-notes')" in done.stdout
    assert [v.name for v in load_config(tmp_path / "home.toml").vaults] == ["home-notes"]
    indexed = run_kb(tmp_path / "home.toml", env, "index")
    assert indexed.returncode == 0, indexed.stderr
    # A config written by hand that gives the name to the other folder is refused.
    text = (tmp_path / "home.toml").read_text().replace('"home-notes"', '"notes"')
    (tmp_path / "mine.toml").write_text(text)
    refused = run_kb(tmp_path / "mine.toml", env, "index")
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode == 1 and len(errors) == 1
    assert "kb forget notes" in refused.stderr and str(folders["home"]) in refused.stderr
