"""`kb init`'s proposals, pure: from what was read of a vault and a machine to what is shown
and written."""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path

import pytest

from kb.config import VaultConfig, parse_config
from kb.dates import DailyNotes
from kb.errors import ConfigError, LLMError
from kb.services.init_proposals import (
    Choices,
    Folder,
    Proposal,
    Survey,
    config_text,
    first_person,
    ignore_proposals,
    model_check,
    owner_names,
    personal_proposals,
    refuse_vault,
    vault_name,
)
from kb.vault.obsidian import Settings


def test_the_owner_proposed_from_git_then_the_account() -> None:
    assert owner_names("Ana Lima", "Ana L.") == ["Ana Lima", "Ana L."]
    assert owner_names(None, " Ana Lima ") == ["Ana Lima"]
    assert owner_names("Ana", "Ana") == ["Ana"]
    assert owner_names("", None) == []


def test_first_person_notes() -> None:
    assert first_person("I woke early and my coffee was cold; I went out anyway.")
    assert not first_person("Install the package, then run the command. " * 20 + "I")


def test_personal_folders_each_with_its_reason() -> None:
    settings = Settings(
        daily=DailyNotes("Days", "YYYY-MM-DD"), daily_from="daily-notes.json", templates="Templates"
    )
    survey = Survey(
        (
            Folder("Days", 10, 2),
            Folder("Diary", 1, 0),
            Folder("Letters", 5, 4),
            Folder("Manuals", 8, 1),
            Folder("Templates", 4, 4),
            Folder("Two", 2, 2),  # too few notes to tell
        ),
        settings,
    )
    assert personal_proposals(survey) == [
        Proposal("Days/**", "the daily-notes folder (daily-notes.json)"),
        Proposal("Diary/**", "named like a journal"),
        Proposal("Letters/**", "4 of 5 notes read are in the first person"),
    ]
    assert ignore_proposals(settings) == [
        Proposal("/Templates/", "the templates folder (templates.json)")
    ]


def test_folders_with_glob_characters_are_proposed_as_their_names() -> None:
    settings = Settings(
        daily=DailyNotes("Days [old]", "YYYY-MM-DD"),
        daily_from="daily-notes.json",
        templates="Templates [a]",
    )
    survey = Survey(
        (Folder("Days [old]", 3, 3), Folder("Me*", 3, 3), Folder("Templates [a]", 4, 4)),
        settings,
    )
    proposed = personal_proposals(survey)
    assert [p.glob for p in proposed] == ["Days \\[old\\]/**", "Me\\*/**"]
    vault = VaultConfig("v", Path("/v"), personal=tuple(p.glob for p in proposed))
    assert vault.is_personal("Days [old]/a.md") and vault.is_personal("Me*/a.md")
    assert not vault.is_personal("Days o/a.md") and not vault.is_personal("Mel/a.md")


def test_what_the_model_server_lacks_and_how_to_fix_it() -> None:
    wanted = ["qwen2.5:1.5b", "nomic-embed-text"]
    ready = model_check("ollama", "h", wanted, ["qwen2.5:1.5b", "nomic-embed-text:latest"])
    assert ready.ready and ready.fixes == ()
    missing = model_check("ollama", "h", wanted, ["qwen2.5:1.5b"])
    assert missing.missing == ("nomic-embed-text",)
    assert missing.fixes == ("ollama pull nomic-embed-text",)
    down = model_check("ollama", "http://localhost:11434", wanted, LLMError("refused"))
    assert not down.reachable
    assert "ollama pull qwen2.5:1.5b" in down.fixes
    assert any('provider = "openai"' in fix for fix in down.fixes)


def test_the_config_written_is_short_commented_and_valid(tmp_path: Path) -> None:
    choices = Choices(
        owner='Ana "Nan" Lima',
        name="notes",
        path=tmp_path,
        personal=(Proposal("Journal/**", "named like a journal"),),
        ignore=("*.excalidraw.md",),
        followed=("templates in Templates/ are not indexed (templates.json)",),
        provider="ollama",
    )
    text = config_text(choices, dt.date(2026, 1, 2))
    assert "config.example.toml" in text and "# named like a journal" in text
    config = parse_config(tomllib.loads(text), base_dir=tmp_path, env={})
    assert config.owner_name == 'Ana "Nan" Lima'
    [vault] = config.vaults
    assert (vault.personal, vault.ignore) == (("Journal/**",), ("*.excalidraw.md",))


def test_a_folder_that_cannot_be_a_new_vault(tmp_path: Path) -> None:
    (tmp_path / "notes/inner").mkdir(parents=True)
    (tmp_path / "file.md").write_text("x")
    configured = [VaultConfig("notes", tmp_path / "notes")]
    refuse_vault(tmp_path / "notes/inner", [])  # no vault configured: any folder will do
    for path, said in (
        (tmp_path / "file.md", "is not a folder"),
        (tmp_path / "missing", "is not a folder"),
        (tmp_path / "notes/inner", "is inside vault 'notes'"),
        (tmp_path, "contains vault 'notes'"),
        (tmp_path / "notes", "is already configured"),
    ):
        with pytest.raises(ConfigError, match=said):
            refuse_vault(path, configured)


def test_a_new_vault_is_named_as_the_index_holds_no_other_folder() -> None:
    assert vault_name("/h/notes", {}) == "notes"
    work = {"notes": "/w/notes"}
    assert vault_name("/h/notes", work) == "h-notes"
    assert vault_name("/h/notes", {**work, "h-notes": "/x"}) == "notes-2"
    # The folder the index holds already keeps its name; an old row's folder is not known.
    assert vault_name("/w/notes", {"work": "/w/notes"}) == "work"
    assert vault_name("/h/notes", {"notes": None}, "notes") == "notes"
    with pytest.raises(ConfigError, match=r"'notes' is /w/notes in the index.*--name"):
        vault_name("/h/notes", work, "notes")
