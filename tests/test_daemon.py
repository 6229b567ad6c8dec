"""`kb daemon` against real watchdog observers, temporary vaults and a real PostgreSQL.

Each scenario changes the vault the way an editor, a sync tool or a shell would, waits
until the index equals the vault (kb.verify, which hashes every note) and the daemon is
idle, and counts the fake provider's calls where the rule says a change costs nothing.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from daemon_helpers import daemon_kb, no_calls, reconcile_now, running, settle
from kb.store import Store

LONG_NOTE = "Projects/Home Server.md"


def _edit_middle(path: Path) -> None:
    lines = path.read_text().split("\n")
    prose = [i for i, line in enumerate(lines) if " the " in line and not line.startswith("#")]
    i = prose[len(prose) // 2]
    lines[i] = lines[i].replace(" the ", " the EDITED ", 1)
    path.write_text("\n".join(lines))


def _ids(store: Store, path: str) -> list[int]:
    with store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id"
            " WHERE d.path = %s ORDER BY c.position",
            (path,),
        ).fetchall()
    return [r["id"] for r in rows]


def test_plain_save(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        kb.reset_counts()
        _edit_middle(vault / LONG_NOTE)
        settle(daemon, kb)
    assert dict(kb.chat.calls) == {"chunk_summary": 1}
    assert kb.embedder.texts == 1


def test_atomic_save(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        kb.reset_counts()
        note = vault / LONG_NOTE
        tmp = note.with_name(".Home Server.md.tmp")
        shutil.copy2(note, tmp)
        _edit_middle(tmp)
        os.replace(tmp, note)
        settle(daemon, kb)
    assert dict(kb.chat.calls) == {"chunk_summary": 1}
    assert not any(".tmp" in p for p in kb.store.documents("v"))


def test_vim_save_never_drops_the_note(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    note = vault / LONG_NOTE
    with running(kb) as daemon:
        kb.reset_counts()
        missing: list[bool] = []
        watching = threading.Event()
        watching.set()

        def watch_row() -> None:
            while watching.is_set():
                missing.append(LONG_NOTE not in kb.store.documents("v"))

        poller = threading.Thread(target=watch_row)
        poller.start()
        try:
            swap = note.with_name(".Home Server.md.swp")
            swap.write_text("swap")
            probe = note.with_name("4913")
            probe.write_text("")
            probe.unlink()
            backup = note.with_name("Home Server.md~")
            text = note.read_text()
            os.rename(note, backup)
            note.write_text(text.replace(" the ", " the EDITED ", 1))
            backup.unlink()
            swap.unlink()
            settle(daemon, kb)
        finally:
            watching.clear()
            poller.join()
    assert missing and not any(missing)
    assert kb.chat.calls["file_summary"] <= 1 and kb.chat.total_calls <= 2


def test_syncthing_replace_keeping_the_old_mtime(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    note = vault / LONG_NOTE
    with running(kb) as daemon:
        kb.reset_counts()
        old = note.stat()
        tmp = note.with_name(".syncthing.Home Server.md.tmp")
        text = note.read_text()
        tmp.write_text(text.replace(" the ", " thE ", 1))  # same size, other content
        os.utime(tmp, ns=(old.st_atime_ns, old.st_mtime_ns))
        os.replace(tmp, note)
        settle(daemon, kb)
    assert kb.chat.calls["chunk_summary"] == 1


def test_touch_costs_nothing(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        kb.reset_counts()
        os.utime(vault / LONG_NOTE, None)
        record = reconcile_now(daemon, kb)
        settle(daemon, kb)
    assert record["indexed"] == 0
    assert no_calls(kb)


def test_rename_costs_nothing(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        ids = _ids(kb.store, LONG_NOTE)
        kb.reset_counts()
        os.rename(vault / LONG_NOTE, vault / "Projects/Homelab.md")
        settle(daemon, kb)
    assert no_calls(kb)
    assert _ids(kb.store, "Projects/Homelab.md") == ids


def test_directory_rename_inside_the_vault(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        kb.reset_counts()
        os.rename(vault / "Reference", vault / "Library")
        settle(daemon, kb)
        os.rename(vault / "Library/Recipes", vault / "Recipes")
        settle(daemon, kb)
    assert no_calls(kb)
    paths = set(kb.store.documents("v"))
    assert "Library/Books/Designing Data-Intensive Applications.md" in paths
    assert "Recipes/Weeknight Miso Ramen.md" in paths
    assert not any(p.startswith("Reference/") for p in paths)


def test_directory_moved_out_then_edited_outside(store: Store, vault: Path, tmp_path: Path) -> None:
    kb = daemon_kb(store, vault)
    outside = tmp_path / "outside"
    outside.mkdir()
    with running(kb) as daemon:
        kb.reset_counts()
        os.rename(vault / "Reference", outside / "Reference")
        settle(daemon, kb)
        assert not any(p.startswith("Reference/") for p in kb.store.documents("v"))
        # The old watches still report these under phantom paths inside the vault.
        moved = outside / "Reference"
        (moved / "Postgres Cheatsheet.md").write_text("# Changed outside\n\nvacuum all\n")
        (moved / "New outside.md").write_text("# New\n\nwritten outside the vault\n")
        (moved / "Books/Sub").mkdir()
        (moved / "Books/Sub/deep.md").write_text("# Deep\n\nalso outside\n")
        # A rename inside the vault, made afterwards, settles after the phantom events.
        os.rename(vault / LONG_NOTE, vault / "Projects/Homelab.md")
        settle(daemon, kb)
    assert not any(p.startswith("Reference/") for p in kb.store.documents("v"))
    assert no_calls(kb)


def test_directory_moved_in(store: Store, vault: Path, tmp_path: Path) -> None:
    kb = daemon_kb(store, vault)
    outside = tmp_path / "incoming"
    (outside / "Sub").mkdir(parents=True)
    for i in range(5):
        (outside / f"note {i}.md").write_text(f"# Incoming {i}\n\nword{i} arrives\n")
    (outside / "Sub/deep.md").write_text("# Deep\n\nnested\n")
    (outside / "picture.png").write_bytes(b"\x89PNG\r\n")
    with running(kb) as daemon:
        os.rename(outside, vault / "Incoming")
        settle(daemon, kb)
    paths = set(kb.store.documents("v"))
    assert {f"Incoming/note {i}.md" for i in range(5)} | {"Incoming/Sub/deep.md"} <= paths
    assert "Incoming/picture.png" not in paths


def test_rmtree_and_trash_cost_nothing(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        kb.reset_counts()
        shutil.rmtree(vault / "Reference")
        (vault / ".trash").mkdir(exist_ok=True)
        os.rename(vault / LONG_NOTE, vault / ".trash/Home Server.md")
        settle(daemon, kb)
    paths = set(kb.store.documents("v"))
    assert LONG_NOTE not in paths and not any(
        p.startswith(("Reference/", ".trash/")) for p in paths
    )
    assert no_calls(kb)


def test_editor_and_sync_leftovers_are_never_notes(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        kb.reset_counts()
        projects = vault / "Projects"
        for name in (
            "4913",
            ".Home Server.md.swp",
            "Home Server.md~",
            "Home Server.md.tmp",
            ".syncthing.Home Server.md.tmp",
            "Home Server.sync-conflict-20240501-101010-ABCDEFG.md",
            "Home Server (Conflicted copy MacBook 202405011010).md",
            "Diagram.canvas",
            "photo.jpg",
        ):
            (projects / name).write_text("# Not a note\n\nnever indexed\n")
        reconcile_now(daemon, kb)
        settle(daemon, kb)
    assert no_calls(kb)
    assert not any(
        p.endswith(("~", ".tmp", ".swp", ".canvas", ".jpg")) or "onflict" in p
        for p in kb.store.documents("v")
    )


def test_edits_while_stopped_are_caught_up(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb):
        pass
    _edit_middle(vault / LONG_NOTE)
    (vault / "Inbox/While away.md").write_text("# Away\n\nwritten while kb was stopped\n")
    os.rename(vault / "People", vault / "Contacts")
    (vault / "Inbox/Untitled.md").unlink()
    kb.reset_counts()
    with running(kb) as daemon:
        settle(daemon, kb)
    assert kb.chat.calls["chunk_summary"] == 2  # the edited paragraph and the new note
