"""Nothing outside a vault is ever read: not through a link to a file or a folder, not
through /proc, not through an event path that climbs out of the vault."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from watchdog.events import FileModifiedEvent, FileMovedEvent

from kb.daemon.watcher import Recorder
from kb.errors import NoteError
from kb.indexing.verify import verify
from kb.store import Store
from kb.vault.notes import Scope, read_note, scan_vault
from support.configs import make_config
from support.fake_kb import Kb

SECRET = "TOP-SECRET-OUTSIDE-THE-VAULT"


@pytest.fixture
def escaping_vault(tmp_path: Path) -> Path:
    """A vault holding one real note and links that lead in and out of it."""
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "secret.txt").write_text(f"# Secret\n\n{SECRET} in a text file\n")
    (outside / "folder" / "note.md").write_text(f"# Elsewhere\n\n{SECRET} in a folder\n")
    vault = tmp_path / "vault"
    (vault / "sub").mkdir(parents=True)
    (vault / "sub" / "real.md").write_text("# Real\n\nA note about lighthouses.\n")
    (vault / "passwd.md").symlink_to("/etc/passwd")
    (vault / "status.md").symlink_to("/proc/self/status")
    (vault / "secret.md").symlink_to(outside / "secret.txt")
    (vault / "climb.md").symlink_to(Path("..") / "outside" / "secret.txt")
    (vault / "linked").symlink_to(outside / "folder", target_is_directory=True)
    (vault / "alias.md").symlink_to(Path("sub") / "real.md")
    return vault


OUT = {"passwd.md", "status.md", "secret.md", "climb.md"}


def _contents(store: Store) -> list[str]:
    with store.pool.connection() as conn:
        rows = conn.execute("SELECT content, full_context FROM chunks").fetchall()
    return [r["content"] + r["full_context"] for r in rows]


def test_links_out_of_the_vault_are_never_read(store: Store, escaping_vault: Path) -> None:
    kb = Kb(store, make_config(escaping_vault))
    report = kb.sync()
    assert set(kb.store.documents.states("v")) == {"sub/real.md", "alias.md"}
    assert {f.path for f in report.failures} == OUT
    assert all("outside the vault" in f.error for f in report.failures)
    texts = _contents(store)
    assert texts and not any(SECRET in t or "root:x:0" in t or "VmRSS" in t for t in texts)
    # kb verify and kb status list them with the reason, like any note that failed.
    diffs = {d.path: d for d in verify(kb.config, store.documents).differences}
    assert set(diffs) == OUT and {d.kind for d in diffs.values()} == {"failed"}
    assert set(store.documents.failures("v")) == OUT


def test_a_scoped_sync_checks_the_same(store: Store, escaping_vault: Path) -> None:
    kb = Kb(store, make_config(escaping_vault))
    with kb.indexer() as indexer:
        report = indexer.sync_scope(
            kb.config.vaults[0], Scope(frozenset(OUT | {"alias.md"}), frozenset({"linked/"}))
        )
    assert set(store.documents.states("v")) == {"alias.md"}
    assert {f.path for f in report.failures} == OUT
    assert not any(SECRET in t for t in _contents(store))


def test_read_note_refuses_paths_that_climb_out(escaping_vault: Path) -> None:
    vault = make_config(escaping_vault).vaults[0]
    for rel in ("../outside/secret.txt", "sub/../../outside/folder/note.md", "linked/note.md"):
        with pytest.raises(NoteError, match="outside the vault"):
            read_note(vault, rel)
    assert read_note(vault, "alias.md") == (escaping_vault / "sub" / "real.md").read_bytes()


def test_watcher_ignores_event_paths_outside_the_vault(escaping_vault: Path) -> None:
    vault = make_config(escaping_vault).vaults[0]
    seen: list[tuple[str, str]] = []
    recorder = Recorder(vault, lambda name, *keys: seen.extend((name, k) for k in keys))
    root = os.fspath(escaping_vault)
    recorder.dispatch(FileModifiedEvent(f"{root}/../outside/folder/note.md"))
    recorder.dispatch(FileModifiedEvent(f"{root}/sub/../../outside/x.md"))
    recorder.dispatch(FileMovedEvent(f"{root}/sub/../../outside/y.md", f"{root}/sub/real.md"))
    assert seen == [("v", "sub/real.md")]


def test_scan_lists_notes_in_walk_order_at_any_depth(tmp_path: Path) -> None:
    """The scan goes as os.walk does (a folder's files by name, then its subfolders by
    name), skips dot-folders, ignored paths and links to folders, and has no depth limit: a
    vault nested deeper than Python's recursion limit is scanned whole."""
    vault = deep = tmp_path / "vault"
    vault.mkdir()
    for _ in range(1100):
        deep = deep / "d"
        deep.mkdir()
    (deep / "bottom.md").write_text("# Bottom\n")
    for rel in ("b.md", "a.md", "z/c.md", "m/n/e.md", "m/d.md", ".obsidian/x.md", "skip/f.md"):
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text("# Note\n")
    (vault / "notes.txt").write_text("not a note")
    (vault / "link").symlink_to(vault / "m", target_is_directory=True)
    config = make_config(vault, vaults=[{"name": "v", "path": str(vault), "ignore": ["skip/"]}])
    try:
        found = [n.path for n in scan_vault(config.vaults[0])]
        bottom = "/".join(["d"] * 1100) + "/bottom.md"
        assert found == ["a.md", "b.md", bottom, "m/d.md", "m/n/e.md", "z/c.md"]
    finally:
        # Removed bottom up: shutil.rmtree, which pytest's clean-up uses, recurses once a
        # folder on Python 3.11 and would stop at this depth.
        (deep / "bottom.md").unlink()
        while deep != vault:
            deep.rmdir()
            deep = deep.parent
