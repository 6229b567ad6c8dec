"""Ignore rules and dot-folders hold for where a path leads, not only for how it is spelled:
through a link to a note, a linked folder, a differently cased name; and a note that can be
listed but not opened (a loop of links, a path too long) is named, never skipped unseen."""

from __future__ import annotations

import datetime as dt
import os
import unicodedata
from pathlib import Path

import anyio
import pytest
from mcp import Client
from watchdog.events import FileModifiedEvent

from kb.config import Config, VaultConfig
from kb.daemon.watcher import Recorder
from kb.dates import DailyNotes
from kb.errors import NoteError
from kb.indexing.verify import verify
from kb.mcp.tools import build_server
from kb.services.note_reader import Vaults
from kb.services.searching import SearchRequest
from kb.store import SearchFilter, Store
from kb.vault.notes import Scope, folds_case, is_note, read_note, scan_vault, stat_note
from kb.vault.obsidian import settings_of
from support.configs import make_config
from support.fake_kb import Kb
from support.reading import rows, tool_text

SECRET = "IGNORED-SECRET-TEXT"
LINKS = {"Pub/link.md", "Pub/trash.md", "Pub/settings.md"}


@pytest.fixture
def symlinked_vault(tmp_path: Path) -> Path:
    """A vault whose ignored folder, .trash/ and .obsidian/ are reached through links."""
    vault = tmp_path / "vault"
    for rel in ("Private/secret.md", ".trash/old.md", ".obsidian/x.md"):
        (vault / rel).parent.mkdir(parents=True)
        (vault / rel).write_text(f"# Hidden\n\n{SECRET} in {rel}\n")
    (vault / "Pub").mkdir()
    (vault / "Pub/ok.md").write_text("# Public\n\nA note about lighthouses.\n")
    (vault / "Pub/link.md").symlink_to(Path("../Private/secret.md"))
    (vault / "Pub/trash.md").symlink_to(Path("../.trash/old.md"))
    (vault / "Pub/settings.md").symlink_to(Path("../.obsidian/x.md"))
    (vault / "Pub/privdir").symlink_to(Path("../Private"), target_is_directory=True)
    (vault / "Pub/trashdir").symlink_to(Path("../.trash"), target_is_directory=True)
    return vault


def _config(vault: Path) -> Config:
    return make_config(vault, vaults=[{"name": "v", "path": str(vault), "ignore": ["Private/**"]}])


def _texts(store: Store) -> str:
    with store.pool.connection() as conn:
        rows = conn.execute("SELECT content, full_context FROM chunks").fetchall()
    return "".join(r["content"] + r["full_context"] for r in rows)


def test_a_link_to_an_ignored_or_hidden_note_is_not_read(
    store: Store, symlinked_vault: Path
) -> None:
    config = _config(symlinked_vault)
    kb = Kb(store, config)
    report = kb.sync()
    assert set(store.documents.states("v")) == {"Pub/ok.md"}
    assert {f.path for f in report.failures} == LINKS
    assert all("ignored" in f.error for f in report.failures)
    assert SECRET not in _texts(store)
    diffs = {d.path: d for d in verify(config, store.documents).differences}
    assert set(diffs) == LINKS and {d.kind for d in diffs.values()} == {"failed"}
    for rel in LINKS:
        with pytest.raises(NoteError, match="ignored"):
            read_note(config.vaults[0], rel)


def test_a_linked_folder_into_an_ignored_folder_is_not_entered(
    store: Store, symlinked_vault: Path
) -> None:
    """The scan never enters a linked folder; a path through one, named by a watcher event,
    a scoped sync or a caller, is not a note either."""
    config = _config(symlinked_vault)
    vault = config.vaults[0]
    through = {"Pub/privdir/secret.md", "Pub/trashdir/old.md"}
    keys: list[str] = []
    recorder = Recorder(vault, lambda _name, *k: keys.extend(k))
    for rel in through:
        recorder.dispatch(FileModifiedEvent(os.path.join(symlinked_vault, rel)))
    assert set(keys) == through  # by their names, notes: what they lead to decides
    assert all(stat_note(vault, rel) is None for rel in through)
    for rel in through:
        with pytest.raises(NoteError, match="ignored"):
            read_note(vault, rel)
    assert list(scan_vault(vault, "Pub/privdir/")) == []
    kb = Kb(store, config)
    with kb.indexer() as indexer:
        report = indexer.sync_scope(
            vault, Scope(frozenset(through), frozenset({"Pub/privdir/", "Pub/trashdir/"}))
        )
    assert report.failures == [] and set(store.documents.states("v")) == set()
    assert SECRET not in _texts(store)


def test_get_note_refuses_a_path_that_leads_to_an_ignored_note(
    store: Store, symlinked_vault: Path
) -> None:
    kb = Kb(store, _config(symlinked_vault))
    paths = ["Pub/privdir/secret.md", "Pub/trashdir/old.md", *sorted(LINKS)]

    async def check(client: Client) -> None:
        for path in paths:
            result = await client.call_tool("get_note", {"vault": "v", "path": path})
            assert result.is_error, path
            assert "ignored" in tool_text(result)
            assert SECRET not in tool_text(result)
        ok = await client.call_tool("get_note", {"vault": "v", "path": "Pub/ok.md"})
        assert not ok.is_error and "lighthouses" in tool_text(ok)

    server = build_server(kb)

    async def main() -> None:
        async with Client(server) as client:
            await check(client)

    anyio.run(main)


# -- case: on a file system that folds case, "private/x.md" opens Private/x.md -------------------


@pytest.mark.parametrize(
    ("path", "folding", "sensitive"),
    [
        ("Private/secret.md", True, True),
        ("private/secret.md", True, False),
        ("PRIVATE/x/y.md", True, False),
        ("Privé/a.md", True, True),
        (unicodedata.normalize("NFD", "PRIVÉ/a.md"), True, False),
        ("Pub/a (Conflicted Copy 2024-01-02).md", True, False),
        ("Pub/a (Conflicted copy 2024-01-02).md", True, True),
        (".Trash/old.md", True, True),
        (".OBSIDIAN/x.md", True, True),
        ("Private/keep.md", False, False),
        ("PRIVATE/KEEP.md", False, False),
        ("Pub/private/x.md", False, False),
    ],
)
def test_ignore_rules_match_without_case_where_the_disk_folds_it(
    path: str, folding: bool, sensitive: bool
) -> None:
    vault = VaultConfig("v", Path("/v"), ignore=("Private/**", "Privé/", "!Private/keep.md"))
    assert vault.is_ignored(path, case_sensitive=False) is folding
    assert vault.is_ignored(path, case_sensitive=True) is sensitive


def test_a_range_that_is_valid_stays_valid_without_case() -> None:
    vault = VaultConfig("v", Path("/v"), ignore=("[Z-a]x.md",))
    assert vault.is_ignored("_x.md", case_sensitive=False)
    assert vault.is_ignored("_X.MD", case_sensitive=False)
    assert not vault.is_ignored("_X.MD", case_sensitive=True)


def test_folds_case_is_what_the_disk_does(tmp_path: Path) -> None:
    (tmp_path / "Probe.md").write_text("x")
    assert folds_case(os.fspath(tmp_path)) is (tmp_path / "pROBE.MD").exists()


def test_a_folding_disk_applies_rules_to_every_spelling(
    symlinked_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on macOS: a request or a link target spelled in another case is held to the rule
    of the name the disk takes it for (simulated on Linux with a second, lower-case folder)."""
    (symlinked_vault / "private").mkdir()
    (symlinked_vault / "private/other.md").write_text(f"# Other\n\n{SECRET}\n")
    (symlinked_vault / "Pub/lower.md").symlink_to(Path("../private/other.md"))
    vault = _config(symlinked_vault).vaults[0]
    assert is_note(vault, "private/other.md")
    assert read_note(vault, "Pub/lower.md")
    monkeypatch.setattr("kb.vault.notes.folds_case", lambda _folder: True)
    assert not is_note(vault, "private/other.md")
    with pytest.raises(NoteError, match="ignored"):
        read_note(vault, "private/other.md")
    with pytest.raises(NoteError, match="ignored"):
        read_note(vault, "Pub/lower.md")
    with pytest.raises(Exception, match="not a note"):
        Vaults((vault,)).read("v", "private/other.md")


# -- notes that are listed but cannot be opened ------------------------------------------------


@pytest.fixture
def unopenable(tmp_path: Path) -> tuple[Path, str]:
    """A vault with loops of links, a note whose path is longer than PATH_MAX (4,096 bytes
    on Linux) in a folder whose own path is not, and a folder whose own path is."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "ok.md").write_text("# Fine\n")
    (vault / "loop.md").symlink_to("loop.md")
    (vault / "a.md").symlink_to("b.md")
    (vault / "b.md").symlink_to("a.md")
    folder = vault
    while len(os.fsencode(folder)) < 3900:
        folder = folder / ("f" * 200)
        folder.mkdir()
    name = "n" * (4100 - len(os.fsencode(folder))) + ".md"
    fd = os.open(folder, os.O_RDONLY)
    try:
        _write_at(fd, name)
        os.mkdir("g" * 200, dir_fd=fd)
        deeper = os.open("g" * 200, os.O_RDONLY, dir_fd=fd)
        _write_at(deeper, "deeper.md")
        os.close(deeper)
    finally:
        os.close(fd)
    return vault, os.path.relpath(folder, vault) + "/"


def _write_at(folder_fd: int, name: str) -> None:
    """A note written where its full path is too long to name."""
    note = os.open(name, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=folder_fd)
    os.write(note, b"# Deep\n")
    os.close(note)


def test_loops_and_long_paths_are_named_by_verify_and_index(
    store: Store, unopenable: tuple[Path, str]
) -> None:
    vault, deep = unopenable
    config = make_config(vault)
    note = deep + next(n for n in os.listdir(vault / deep) if n.endswith(".md"))
    why = {"loop.md": "loop", "a.md": "loop", "b.md": "loop", note: "too long"}
    diffs = {d.path: d for d in verify(config, store.documents).differences if d.kind != "missing"}
    folder = deep + "g" * 200 + "/"
    assert set(diffs) == {*why, folder}
    for path, reason in why.items():
        assert diffs[path].kind == "unreadable" and reason in diffs[path].detail
    assert diffs[folder].kind == "unlistable" and "too long" in diffs[folder].detail

    kb = Kb(store, config)
    report = kb.sync()
    assert {f.path: f.error for f in report.failures}.keys() == why.keys()
    assert all(why[f.path] in f.error for f in report.failures)
    assert [(u.path, u.error) for u in report.unlisted] == [(folder, "File name too long")]
    assert set(store.documents.states("v")) == {"ok.md"}
    # They stay listed, run after run, until fixed.
    assert {f.path for f in kb.sync().failures} == set(why)
    assert {d.path: d.kind for d in verify(config, store.documents).differences} == {
        **dict.fromkeys(why, "failed"),
        folder: "unlistable",
    }


# -- Unicode: a name composed in a glob, decomposed on the disk (as macOS writes it) ------------


def _nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


@pytest.mark.parametrize("glob_form", ["NFC", "NFD"])
@pytest.mark.parametrize("path_form", ["NFC", "NFD"])
def test_globs_and_paths_are_compared_in_one_normal_form(glob_form: str, path_form: str) -> None:
    def written(text: str, form: str) -> str:
        return unicodedata.normalize(form, text)  # type: ignore[arg-type]

    vault = VaultConfig(
        "v",
        Path("/v"),
        ignore=(written("Privé/**", glob_form),),
        personal=(written("Journée/**", glob_form),),
    )
    for sensitive in (True, False):
        assert vault.is_ignored(written("Privé/a.md", path_form), case_sensitive=sensitive)
    assert vault.is_personal(written("Journée/a.md", path_form))
    assert not vault.is_personal(written("Journal/a.md", path_form))
    daily = DailyNotes(written("Journée", glob_form), "D MMMM YYYY")
    assert daily.day(written("Journée/3 May 2024.md", path_form)) == dt.date(2024, 5, 3)
    settings = settings_of(
        {
            "templates.json": {"folder": written("Modèles", glob_form)},
            "app.json": {"userIgnoreFilters": [written("Archivé/", glob_form)]},
        }
    )
    followed = VaultConfig("v", Path("/v"), ignore=settings.ignores)
    assert followed.is_ignored(written("Modèles/t.md", path_form))
    assert followed.is_ignored(written("Archivé/x.md", path_form))


def test_a_decomposed_folder_is_held_to_the_composed_rules(store: Store, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    for rel, text in (
        (_nfd("Privé/secret.md"), f"# Hidden\n\n{SECRET}\n"),
        (_nfd("Journée/day.md"), "# Day\n\nI walked to the lighthouse.\n"),
        ("Pub/ok.md", "# Public\n\nA note about lighthouses.\n"),
    ):
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text)
    config = make_config(
        vault,
        vaults=[
            {"name": "v", "path": str(vault), "ignore": ["Privé/**"], "personal": ["Journée/**"]}
        ],
    )
    kb = Kb(store, config)
    kb.sync()
    assert SECRET not in _texts(store)
    # Stored as the disk names it, so that it can be read again.
    states = kb.store.documents.states("v")
    assert set(states) == {_nfd("Journée/day.md"), "Pub/ok.md"}
    found = kb.search_service().search(
        SearchRequest("lighthouse", filters=SearchFilter(path_prefix="Journée"))
    )
    assert [h.path for h in found.hits] == [_nfd("Journée/day.md")]
    personal = rows(store, "SELECT path FROM documents WHERE personal")
    assert personal == [{"path": _nfd("Journée/day.md")}]
    listed = kb.store.candidates.list_notes(vaults=["v"], folder="Journée/")
    assert [n.path for n in listed.notes] == [_nfd("Journée/day.md")]
    assert "lighthouse" in Vaults(config.vaults).read("v", _nfd("Journée/day.md")).text
    assert verify(config, store.documents).in_sync
