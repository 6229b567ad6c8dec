"""`kb daemon` against real watchdog observers, temporary vaults and a real PostgreSQL.

Each scenario changes the vault the way an editor, a sync tool or a shell would, waits
until the index equals the vault (kb.indexing.verify, which hashes every note) and the daemon is
idle, and counts the fake provider's calls where the rule says a change costs nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from watchdog.observers.inotify_c import InotifyFD

from kb.container import open_store
from kb.errors import LLMUnavailable
from kb.indexing.verify import verify
from kb.note_writing import preparing
from kb.store import Store
from kb.vault import notes
from support.daemons import (
    SteppedClock,
    daemon_kb,
    no_calls,
    reconcile_now,
    running,
    settle,
    wait_for,
)
from support.reading import rows, stored_chunks

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
    assert dict(kb.chat.calls) == {"questions": 1}
    # The edited chunk and its paragraphs, searchable at once, then its questions: each
    # new text once (an unchanged paragraph keeps its vector).
    [edited] = [c for c in stored_chunks(kb.store, LONG_NOTE) if "EDITED" in c["content"]]
    [passages] = rows(
        kb.store, "SELECT count(*) AS n FROM passages WHERE chunk_id = %s", edited["id"]
    )
    assert 1 < kb.embedder.texts <= 1 + passages["n"]


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
    assert dict(kb.chat.calls) == {"questions": 1}
    assert not any(".tmp" in p for p in kb.store.documents.states("v"))


def test_vim_save_never_drops_the_note(store: Store, vault: Path) -> None:
    # The default quiet period, which a save dance never outlasts, even on a busy machine.
    kb = daemon_kb(store, vault, debounce=1.0)
    note = vault / LONG_NOTE
    with running(kb) as daemon:
        kb.reset_counts()
        missing: list[bool] = []
        watching = threading.Event()
        watching.set()

        def watch_row() -> None:
            while watching.is_set():
                missing.append(LONG_NOTE not in kb.store.documents.states("v"))

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
    # The edited chunk's questions, and the writer asked again when the opening changed.
    assert kb.chat.calls["voice"] <= 1 and kb.chat.total_calls <= 2


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
    assert kb.chat.calls["questions"] == 1


def test_touch_costs_nothing(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        kb.reset_counts()
        os.utime(vault / LONG_NOTE, None)
        record = reconcile_now(daemon, kb)
        settle(daemon, kb)
    assert record.indexed == 0
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
    paths = set(kb.store.documents.states("v"))
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
        assert not any(p.startswith("Reference/") for p in kb.store.documents.states("v"))
        # The old watches still report these under phantom paths inside the vault.
        moved = outside / "Reference"
        (moved / "Postgres Cheatsheet.md").write_text("# Changed outside\n\nvacuum all\n")
        (moved / "New outside.md").write_text("# New\n\nwritten outside the vault\n")
        (moved / "Books/Sub").mkdir()
        (moved / "Books/Sub/deep.md").write_text("# Deep\n\nalso outside\n")
        # A rename inside the vault, made afterwards, settles after the phantom events.
        os.rename(vault / LONG_NOTE, vault / "Projects/Homelab.md")
        settle(daemon, kb)
    assert not any(p.startswith("Reference/") for p in kb.store.documents.states("v"))
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
    paths = set(kb.store.documents.states("v"))
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
    paths = set(kb.store.documents.states("v"))
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
        for p in kb.store.documents.states("v")
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
    # The edited paragraph's questions, and the new note's writer and questions.
    assert dict(kb.chat.calls) == {"voice": 1, "questions": 2}


# --- bursts ---------------------------------------------------------------------------------------


@pytest.fixture
def fast_store(pg_admin_url: str, db_url: str) -> Iterator[Store]:
    """A store whose commits do not wait for the disk, for bursts of thousands of files
    (one fsync per file would dominate; durability is not what these tests are about)."""
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(
                sql.Identifier(str(conninfo_to_dict(db_url)["dbname"]))
            )
        )
    with open_store(db_url) as s:
        yield s


def _notes(root: Path, count: int, folders: int, text: str = "alpha") -> list[Path]:
    paths = []
    for i in range(count):
        folder = root / f"f{i % folders:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"n{i:05d}.md"
        path.write_text(f"# Note {i}\n\nword{i} {text}\n")
        paths.append(path)
    return paths


def test_git_checkout_of_1000_files(fast_store: Store, tmp_path: Path) -> None:
    vault = tmp_path / "repo"
    paths = _notes(vault, 1000, folders=10)
    # The default quiet period: a checkout never leaves a file missing that long.
    kb = daemon_kb(fast_store, vault, debounce=1.0, max_delay=10.0)
    with running(kb) as daemon:
        kb.reset_counts()
        for i, path in enumerate(paths):  # git: unlink, then write the checked-out blob
            path.unlink()
            text = "beta" if i % 10 == 0 else "alpha"
            path.write_text(f"# Note {i}\n\nword{i} {text}\n")
        settle(daemon, kb)
    assert len(kb.store.documents.states("v")) == 1000
    # Each changed one-chunk note: its writer (its opening changed) and its questions.
    assert dict(kb.chat.calls) == {"voice": 100, "questions": 100}
    # Each changed note once: the chunk's vector reads its own text, which questions leave
    # as it is, and "word7 beta" holds no question.
    assert kb.embedder.texts == 100


def _overflowing_creates() -> int:
    """Enough new notes to overflow the kernel's inotify queue: each makes three events at
    least (created, modified, closed), and the queue holds max_queued_events (16,384 by
    default) before it drops the rest."""
    queued = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if queued > 100_000:
        pytest.skip(f"the inotify queue holds {queued} events: too many notes to overflow it")
    return queued // 3 + 2_000


def test_creates_with_the_watcher_stalled_overflow_and_reconcile(
    fast_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = _overflowing_creates()
    vault = tmp_path / "big"
    for i in range(20):  # watched before the stall, so their files' events reach the kernel
        (vault / f"f{i:02d}").mkdir(parents=True)
    # Few dimensions: inserting thousands of vectors of 256 into the HNSW index takes minutes.
    # The notes' LLM context is left to workers: this is about the watcher and reconciliation.
    kb = daemon_kb(fast_store, vault, llm={"embed_model": "hash-8"}, enrich={"in_daemon": False})
    # Stall watchdog's inotify reader, as a SIGSTOP would: the kernel queue (16384 events by
    # default) overflows, and watchdog only logs it.
    reading = threading.Event()
    reading.set()
    read_events = InotifyFD.read_events

    def stalled(self: InotifyFD, *args: Any, **kwargs: Any) -> Any:
        reading.wait()
        return read_events(self, *args, **kwargs)

    monkeypatch.setattr(InotifyFD, "read_events", stalled)
    try:
        with running(kb) as daemon:
            reading.clear()
            _notes(vault, count, folders=20)
            reading.set()
            settle(daemon, kb, timeout=600)
            record = kb.store.state.last_reconcile()
    finally:
        reading.set()
    assert record is not None and "watcher overflow" in record.reason
    assert len(kb.store.documents.states("v")) == count
    assert kb.store.queue.status().items == count and kb.chat.total_calls == 0


# --- failures -------------------------------------------------------------------------------------


def test_exception_in_one_file_is_recorded_and_work_goes_on(
    store: Store, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parse_note = preparing.parse_note

    def fragile(text: str) -> Any:
        if "EXPLODE" in text:
            raise RuntimeError("parser bug")
        return parse_note(text)

    monkeypatch.setattr(preparing, "parse_note", fragile)
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        (vault / "Inbox/bomb.md").write_text("# Bomb\n\nEXPLODE\n")
        (vault / "Inbox/fine.md").write_text("# Fine\n\nall good\n")
        wait_for(
            lambda: "Inbox/bomb.md" in kb.store.documents.failures("v") and daemon.idle,
            "the failure to be recorded",
        )
        report = verify(kb.config, kb.store.documents)
        assert [(d.kind, d.path) for d in report.differences] == [("failed", "Inbox/bomb.md")]
        assert "RuntimeError: parser bug" in kb.store.documents.failures("v")["Inbox/bomb.md"]
        assert daemon.watcher is not None and daemon.watcher.problem() is None
        (vault / "Inbox/bomb.md").write_text("# Bomb\n\ndefused\n")
        settle(daemon, kb)
    assert kb.store.documents.failures("v") == {}


def test_dead_llm_server_delays_only_the_llm_context(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    complete = kb.chat.complete
    down = threading.Event()

    def flaky(prompt: Any) -> str:
        if down.is_set():
            raise LLMUnavailable("cannot reach the LLM server")
        return complete(prompt)

    kb.chat.complete = flaky  # type: ignore[method-assign]
    with running(kb) as daemon:
        down.set()
        _edit_middle(vault / LONG_NOTE)
        # The edit is indexed and searchable without the chat model ...
        wait_for(lambda: verify(kb.config, kb.store.documents).in_sync, "the edit to be indexed")
        # ... and its LLM context waits, the error shown, until the server is back.
        wait_for(lambda: kb.store.queue.status().failing, "the enrichment to fail")
        [failing] = kb.store.queue.status().failures
        assert failing.path == LONG_NOTE and "cannot reach the LLM server" in failing.error
        assert daemon.enrichment is not None
        assert "cannot reach the LLM server" in (daemon.enrichment.last_error or "")
        down.clear()
        settle(daemon, kb)
    assert daemon.last_error is None and daemon.enrichment.last_error is None


def test_lock_connection_killed_stops_writing_until_retaken(
    store: Store, vault: Path, pg_admin_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kb.daemon")
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        _terminate_backends(pg_admin_url, kb.store.url)
        _edit_middle(vault / LONG_NOTE)
        settle(daemon, kb)
    messages = [r.getMessage() for r in caplog.records]
    lost = messages.index("writer lock lost: writing stops until it is taken again")
    assert "writer lock acquired: watching and writing" in messages[lost:]


def test_database_outage(store: Store, vault: Path, pg_admin_url: str) -> None:
    kb = daemon_kb(store, vault)
    dbname = str(conninfo_to_dict(kb.store.url)["dbname"])
    with running(kb) as daemon:
        try:
            _allow_connections(pg_admin_url, dbname, allow=False)
            _terminate_backends(pg_admin_url, kb.store.url)
            _edit_middle(vault / LONG_NOTE)
            (vault / "Inbox/During the outage.md").write_text("# Outage\n\nwritten meanwhile\n")
            wait_for(lambda: daemon.role != "writer", "the daemon to notice the outage")
        finally:
            _allow_connections(pg_admin_url, dbname, allow=True)
        settle(daemon, kb)


def test_observer_death_is_repaired(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        watcher = daemon.watcher
        assert watcher is not None and watcher.observer is not None
        dead = watcher.observer
        dead.stop()
        _edit_middle(vault / LONG_NOTE)  # while nothing watches: the reconciliation finds it
        wait_for(lambda: watcher.observer is not dead, "a new observer")
        settle(daemon, kb)
        (vault / "Inbox/After.md").write_text("# After\n\nthe new observer sees this\n")
        settle(daemon, kb)
    record = kb.store.state.last_reconcile()
    assert record is not None and "observer thread died" in record.reason


def test_vault_folder_replaced(store: Store, vault: Path, tmp_path: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        os.rename(vault, tmp_path / "old vault")
        shutil.copytree(tmp_path / "old vault", vault)
        shutil.rmtree(vault / "Reference")
        _edit_middle(tmp_path / "old vault" / LONG_NOTE)  # phantom events: not the vault now
        settle(daemon, kb)
    record = kb.store.state.last_reconcile()
    assert record is not None and "folder replaced" in record.reason


def _terminate_backends(admin_url: str, url: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (conninfo_to_dict(url)["dbname"],),
        )


def _allow_connections(admin_url: str, dbname: str, *, allow: bool) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                sql.Identifier(dbname), sql.Literal(allow)
            )
        )


def test_bad_notes_are_recorded_and_the_daemon_goes_on(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        (vault / "Inbox/binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
        (vault / "Inbox/huge.md").write_bytes(b"word " * (notes.MAX_NOTE_BYTES // 5 + 1))
        misnamed = os.path.join(os.fsencode(vault), b"Inbox/caf\xe9.md")
        with open(misnamed, "wb") as f:
            f.write(b"# Latin-1 name\n")
        (vault / "Inbox/fine.md").write_text("# Fine\n\nstill indexed\n")
        wait_for(
            lambda: (
                {"Inbox/binary.md", "Inbox/huge.md", "Inbox/caf\\xe9.md"}
                <= set(kb.store.documents.failures("v"))
                and "Inbox/fine.md" in kb.store.documents.states("v")
                and daemon.idle
            ),
            "the bad notes to be recorded",
        )
        report = verify(kb.config, kb.store.documents)
        assert sorted((d.kind, d.path) for d in report.differences) == [
            ("failed", "Inbox/binary.md"),
            ("failed", "Inbox/caf\\xe9.md"),
            ("failed", "Inbox/huge.md"),
        ]
        (vault / "Inbox/binary.md").unlink()
        (vault / "Inbox/huge.md").unlink()
        os.unlink(misnamed)
        # Deleted notes are in sync at once (no file, no row): wait for their events instead.
        wait_for(
            lambda: kb.store.documents.failures("v") == {} and daemon.idle,
            "the failures of deleted notes to be cleared",
        )
        settle(daemon, kb)


def test_an_edit_of_the_obsidian_settings_is_a_config_change(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        inbox = {p for p in kb.store.documents.states("v") if p.startswith("Inbox/")}
        assert inbox
        kb.reset_counts()
        (vault / ".obsidian").mkdir(exist_ok=True)
        (vault / ".obsidian/templates.json").write_text('{"folder": "Inbox"}')
        settle(daemon, kb)
    # The templates folder leaves the index; no other note is touched.
    assert not any(p.startswith("Inbox/") for p in kb.store.documents.states("v"))
    assert no_calls(kb)
    record = kb.store.state.last_reconcile()
    assert record is not None and record.reason == "v: .obsidian/templates.json changed"
    assert (record.indexed, record.deleted) == (0, len(inbox))


def test_a_templates_folder_named_with_glob_characters_is_followed(
    store: Store, vault: Path
) -> None:
    kb = daemon_kb(store, vault)
    (vault / "Inbox [old]").mkdir()
    (vault / "Inbox [old]/t.md").write_text("# Template\n\n{{date}}\n")
    with running(kb) as daemon:
        assert "Inbox [old]/t.md" in kb.store.documents.states("v")
        (vault / ".obsidian").mkdir(exist_ok=True)
        # A range that does not compile as a glob ("3-2"), and one that does ("o-l").
        (vault / ".obsidian/templates.json").write_text('{"folder": "Inbox [old]"}')
        (vault / ".obsidian/app.json").write_text('{"userIgnoreFilters": ["Log [3-2]/"]}')
        settle(daemon, kb, timeout=60)
    assert not any(p.startswith("Inbox [old]/") for p in kb.store.documents.states("v"))
    assert any(p.startswith("Inbox/") for p in kb.store.documents.states("v"))


def test_the_interval_reconciles_on_the_daemons_own_clock(store: Store, vault: Path) -> None:
    """Half an hour goes by on the clock the daemon is given, a moment on the wall's: its
    timers read that clock alone."""
    now = [1000.0]
    kb = daemon_kb(store, vault, reconcile_interval=1800.0, reconcile_jitter=0.0)
    with running(kb, clock=lambda: now[0]) as daemon:
        start_up = kb.store.state.last_reconcile()
        assert start_up is not None and start_up.reason == "start-up"
        now[0] += 1800.0
        record = wait_for(
            lambda: (r := kb.store.state.last_reconcile()) and r.reason == "interval" and r,
            "the interval's reconciliation",
        )
        assert record.indexed == 0 and daemon.idle


def test_a_save_falls_due_on_the_daemons_own_clock(store: Store, vault: Path) -> None:
    """The quiet period runs on the clock the daemon is given: a save waits an hour of it,
    which the test steps through in a moment of the wall's."""
    clock = SteppedClock()
    kb = daemon_kb(store, vault, debounce=3600.0, max_delay=36000.0, reconcile_interval=1e7)
    with running(kb, clock=clock) as daemon:
        kb.reset_counts()
        _edit_middle(vault / LONG_NOTE)
        wait_for(lambda: len(daemon.debouncer), "the watcher to record the save")
        assert not verify(kb.config, kb.store.documents).in_sync
        settle(daemon, kb, timeout=30, clock=clock)
    assert dict(kb.chat.calls) == {"questions": 1}
