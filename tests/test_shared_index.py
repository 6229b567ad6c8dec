"""Several configurations on one index: a sync touches only the vaults its config names, a
vault renamed in a config keeps its rows, and a vault no config names stays until the user
forgets it, its model outputs kept."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
import unicodedata
from dataclasses import replace
from pathlib import Path

import pytest

from kb.config import parse_config
from kb.container import open_store
from kb.daemon.daemon import writer_vaults
from kb.errors import KbError
from kb.llm.fake import FakeEmbedder
from kb.services.searching import SearchRequest
from kb.store import DaemonBeat, Store, WorkerBeat, WriterLock
from kb.vault.sync_plan import (
    StoredVault,
    VaultClaim,
    searched_vaults,
    vault_filter,
    vault_refusal,
    vault_renames,
)
from support.cli import run_kb
from support.configs import OWNER, write_config
from support.fake_kb import Kb
from support.reading import rows


def _vault(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / f"{name}.md").write_text(text)
    return folder


def _kb(store: Store, name: str, folder: Path) -> Kb:
    raw = {
        "owner_name": OWNER,
        "vaults": [{"name": name, "path": str(folder), "personal": ["**"]}],
        "llm": {"provider": "fake", "chat_model": "fake-chat", "embed_model": "hash-256"},
    }
    return Kb(store, parse_config(raw, base_dir=folder.parent, env={}))


@pytest.fixture
def two(store: Store, tmp_path: Path) -> tuple[Kb, Kb]:
    a = _vault(tmp_path, "a", "# A\n\nI climbed a hill near the lighthouse.\n")
    b = _vault(tmp_path, "b", "# B\n\nI read a book about zeppelins.\n")
    return _kb(store, "a", a), _kb(store, "b", b)


def _notes(store: Store) -> dict[str, int]:
    found = rows(store, "SELECT vault, count(*) AS n FROM documents GROUP BY vault")
    return {r["vault"]: r["n"] for r in found}


def test_a_sync_leaves_the_vaults_its_config_does_not_name(two: tuple[Kb, Kb]) -> None:
    a, b = two
    first = a.sync()
    assert first.indexed == 1 and first.llm_calls
    report = b.sync()
    assert report.indexed == 1 and report.deleted == 0
    assert _notes(a.store) == {"a": 1, "b": 1}
    a.reset_counts()
    again = a.sync()
    assert again.unchanged == 1 and again.indexed == 0 and a.chat.total_calls == 0


def test_each_config_searches_lists_and_reports_its_own_vaults(two: tuple[Kb, Kb]) -> None:
    a, b = two
    a.sync()
    b.sync()
    for mode in ("hybrid", "text", "vector"):
        found = a.search_service().search(SearchRequest("zeppelins book hill", mode=mode))
        assert {h.vault for h in found.hits} == {"a"}, mode
    status = a.status_reader()()
    assert status.index.documents == 1
    assert [(v.name, v.notes) for v in status.other_vaults] == [("b", 1)]
    assert status.summary()["other_vaults"] == {"b": 1}
    page = a.store.candidates.list_notes(vaults=["a"])
    assert [n.vault for n in page.notes] == ["a"]


def test_a_config_enriches_only_its_own_vaults(two: tuple[Kb, Kb]) -> None:
    a, b = two
    # Stored and queued, not enriched: Container.sync, not the test double's drain.
    super(Kb, b).sync()
    assert b.store.queue.status(("b",)).items == 1
    a.sync()
    assert a.store.queue.status(("a",)).items == 0
    assert b.store.queue.status(("b",)).items == 1  # b's note is b's workers' to build
    assert b.drain().done == 1


def test_a_vault_renamed_in_the_config_keeps_its_rows(store: Store, tmp_path: Path) -> None:
    folder = _vault(tmp_path, "notes", "# N\n\nI planted tomatoes on the balcony.\n")
    before = _kb(store, "notes", folder)
    before.sync()
    ids = rows(store, "SELECT id FROM documents")
    renamed = _kb(store, "Notes", folder)
    report = renamed.sync()
    assert report.unchanged == 1 and report.indexed == 0
    assert renamed.chat.total_calls == 0 and renamed.embedder.texts == 0
    assert _notes(store) == {"Notes": 1}
    assert rows(store, "SELECT id FROM documents") == ids
    assert renamed.status_reader()().other_vaults == []


def test_forgotten_outputs_are_never_asked_again(two: tuple[Kb, Kb]) -> None:
    _, b = two
    b.sync()
    assert b.store.vaults.forget("b") == 1
    assert _notes(b.store) == {}
    b.reset_counts()
    report = b.sync()
    assert report.indexed == 1 and b.chat.total_calls == 0


def test_one_writer_per_configuration(db_url: str) -> None:
    locks = [WriterLock(db_url, ["a"]), WriterLock(db_url, ["b"]), WriterLock(db_url, ["a"])]
    try:
        assert [lock.try_acquire() for lock in locks] == [True, True, False]
    finally:
        for lock in locks:
            lock.close()


def test_which_vault_takes_over_which_rows() -> None:
    stored = [StoredVault("notes", "/n", 3), StoredVault("work", "/w", 2)]
    assert vault_renames({"Notes": "/n", "work": "/w"}, stored) == {"notes": "Notes"}
    # A name that holds rows keeps them; another folder is another vault.
    assert vault_renames({"notes": "/n"}, stored) == {}
    assert vault_renames({"Notes": "/elsewhere"}, stored) == {}
    # A folder two stored vaults were synced from is not guessed at.
    twins = [StoredVault("x", "/n", 1), StoredVault("y", "/n", 1)]
    assert vault_renames({"z": "/n"}, twins) == {}
    # A vault stored before folders were recorded is never taken over.
    assert vault_renames({"z": "/n"}, [StoredVault("x", None, 1)]) == {}
    assert vault_filter(["a"], {"a"}) is None and vault_filter(["a"], set()) is None
    assert vault_filter(["a"], {"a", "b"}) == ("a",)


def _config(tmp_path: Path, name: str, folder: Path) -> Path:
    return write_config(
        tmp_path / f"{name}.toml",
        folder,
        name=name,
        personal=(),
        llm={"chat_model": "offline-digest"},
    )


def test_two_configs_side_by_side_and_forget(tmp_path: Path, db_url: str) -> None:
    """The issue's commands: two configs on one database, each indexed with --wait."""
    env = {**os.environ, "KB_DATABASE_URL": db_url, "COLUMNS": "200"}
    configs = {
        x: _config(tmp_path, x, _vault(tmp_path, x, f"# {x}\n\nI climbed hill {x}.\n"))
        for x in ("a", "b")
    }

    def kb(name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return run_kb(configs[name], env, *args)

    assert "1 indexed" in kb("a", "index", "--wait").stderr
    b = kb("b", "index", "--wait")
    assert b.returncode == 0 and "1 indexed" in b.stderr
    again = kb("a", "index", "--wait")
    assert "1 unchanged" in again.stderr and " 0 LLM calls" in again.stderr
    assert kb("a", "verify").returncode == 0
    status = kb("a", "status")
    assert "other vault  b: 1 notes" in status.stdout and "kb forget b" in status.stdout
    assert json.loads(kb("a", "status", "--json").stdout)["other_vaults"][0]["name"] == "b"

    refused = kb("a", "forget", "b")  # no terminal to ask on
    assert refused.returncode == 1 and "add --yes" in refused.stderr
    assert "is in this config" in kb("a", "forget", "a", "--yes").stderr
    assert "holds no vault 'c'" in kb("a", "forget", "c", "--yes").stderr
    done = kb("a", "forget", "b", "--yes")
    assert done.returncode == 0 and "forgot vault b: 1 notes removed" in done.stderr
    assert "other vault" not in kb("a", "status").stdout
    back = kb("b", "index", "--wait")
    assert "1 indexed" in back.stderr and " 0 LLM calls" in back.stderr


def test_another_embedding_model_never_re_embeds_another_configs_vaults(
    store: Store, tmp_path: Path
) -> None:
    a = _kb(store, "a", _vault(tmp_path, "a", "# A\n\nThe lighthouse keeper.\n"))
    b_folder = _vault(tmp_path, "b", "# B\n\nThe zeppelin pilot.\n")
    a.sync()
    raw = {
        "owner_name": OWNER,
        "vaults": [{"name": "b", "path": str(b_folder)}],
        "llm": {"provider": "fake", "chat_model": "fake-chat", "embed_model": "hash-128"},
    }
    b = Kb(store, parse_config(raw, base_dir=tmp_path, env={}))
    before = rows(store, "SELECT id, embedding::text FROM chunks ORDER BY id")
    with pytest.raises(KbError, match=r"vaults a also use.*kb forget"):
        b.sync()
    with b.indexer() as indexer, pytest.raises(KbError, match=r"vaults a also use"):
        indexer.space.reembed_all()
    assert rows(store, "SELECT id, embedding::text FROM chunks ORDER BY id") == before
    # Renamed in the same change as its model: its own rows, re-embedded.
    c = _kb(store, "A", tmp_path / "a")
    c.embedder = FakeEmbedder("hash-128")
    assert c.sync().unchanged == 1 and _notes(store) == {"A": 1}


def _owned(store: Store, name: str, folder: Path, config: Path, **vault: object) -> Kb:
    """A configuration read from a file (`config`, written here), as `kb` reads one: the
    index knows which configuration synced each vault."""
    raw = {
        "owner_name": OWNER,
        "vaults": [{"name": name, "path": str(folder), **vault}],
        "llm": {"provider": "fake", "chat_model": "fake-chat", "embed_model": "hash-256"},
    }
    config.write_text(
        f'owner_name = "{OWNER}"\n[[vaults]]\nname = "{name}"\npath = "{folder}"\n'
        + "".join(f"{k} = {json.dumps(v)}\n" for k, v in vault.items())
        + '[llm]\nprovider = "fake"\nchat_model = "fake-chat"\nembed_model = "hash-256"\n'
    )
    return Kb(store, parse_config(raw, base_dir=folder.parent, env={}, source=config))


def _work_and_home(
    store: Store,
    tmp_path: Path,
    work: str = "The quarterly budget.",
    home: str = "I planted tomatoes.",
) -> tuple[Kb, Kb]:
    """Two configurations, each read from its file, that give the name "notes" to two
    folders (`kb init` on ~/work/notes and on ~/home/notes): tmp_path/work/notes, whose note
    says `work`, and tmp_path/home/notes."""
    made = []
    for who, text in (("work", work), ("home", home)):
        (tmp_path / who).mkdir()
        folder = _vault(tmp_path / who, "notes", f"# {who[0].upper()}\n\n{text}\n")
        made.append(_owned(store, "notes", folder, tmp_path / f"{who}.toml"))
    return made[0], made[1]


def test_one_name_for_two_folders_is_refused_and_a_moved_folder_kept(
    store: Store, tmp_path: Path
) -> None:
    work, home = _work_and_home(
        store, tmp_path, "The quarterly budget review.", "I planted tomatoes."
    )
    assert work.sync().indexed == 1
    ids = rows(store, "SELECT id, path FROM documents")
    with pytest.raises(KbError) as refused:
        home.sync()
    line = str(refused.value)
    assert (
        "\n" not in line
        and str(tmp_path / "work" / "notes") in line
        and str(tmp_path / "home" / "notes") in line
    )
    assert "name" in line and "kb forget notes" in line
    assert rows(store, "SELECT id, path FROM documents") == ids
    found = work.search_service().search(SearchRequest("tomatoes budget", mode="text"))
    assert {h.path for h in found.hits} <= {"notes.md"} and found.hits
    # The folder really moved (the config edited to follow it): its rows go with it.
    moved = tmp_path / "Documents"
    moved.mkdir()
    (tmp_path / "work" / "notes").rename(moved / "notes")
    after = _owned(store, "notes", moved / "notes", tmp_path / "work.toml")
    report = after.sync()
    assert report.unchanged == 1 and report.indexed == 0 and after.chat.total_calls == 0
    assert rows(store, "SELECT id, path FROM documents") == ids


def test_other_settings_for_the_same_vault_are_refused(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(3):
        (folder / f"n{n}.md").write_text(f"# N{n}\n\nI walked to the harbour on day {n}.\n")
    one = _owned(store, "notes", folder, tmp_path / "one.toml")
    two = _owned(store, "notes", folder, tmp_path / "two.toml", personal=["**"])
    same = _owned(store, "notes", folder, tmp_path / "same.toml")
    one.sync()
    one.reset_counts()
    with pytest.raises(KbError, match=r"one\.toml.*other settings.*personal"):
        two.sync()
    assert two.chat.total_calls == 0
    # The same settings share the vault; one's own config edited is its own to change.
    assert same.sync().unchanged == 3 and same.chat.total_calls == 0
    edited = _owned(store, "notes", folder, tmp_path / "same.toml", personal=["**"])
    assert edited.sync().indexed == 3


def test_one_folder_under_a_second_name_is_refused(store: Store, tmp_path: Path) -> None:
    folder = _vault(tmp_path, "notes", "# N\n\nI planted tomatoes on the balcony.\n")
    a = _owned(store, "a", folder, tmp_path / "a.toml")
    b = _owned(store, "b", folder, tmp_path / "b.toml")
    a.sync()
    with pytest.raises(KbError) as refused:
        b.sync()
    line = str(refused.value)
    assert "'a'" in line and "'b'" in line and "a.toml" in line and "kb forget a" in line
    assert _notes(store) == {"a": 1}
    assert a.status_reader()().index.documents == 1
    # Renamed in the config that holds it: its rows follow, as before.
    renamed = _owned(store, "c", folder, tmp_path / "a.toml")
    assert renamed.sync().unchanged == 1 and _notes(store) == {"c": 1}


def test_which_configured_vault_is_refused() -> None:
    mine = VaultClaim("notes", "/home/notes", "/c/home.toml", {"personal": ""})
    theirs = StoredVault("notes", "/work/notes", 3, "/c/work.toml", {"personal": ""})
    # Another folder under the name: refused while it is there, or another config names it.
    assert vault_refusal(mine, [theirs], held=(), present={"notes"})
    assert vault_refusal(mine, [theirs], held={"notes"}, present=())
    assert vault_refusal(mine, [theirs], held=(), present=()) is None  # moved
    own = StoredVault("notes", "/work/notes", 3, "/c/home.toml", {"personal": ""})
    assert vault_refusal(mine, [own], held=(), present={"notes"}) is None  # pointed elsewhere
    # The same folder: other settings of a config that still names it.
    same = StoredVault("notes", "/home/notes", 3, "/c/work.toml", {"personal": "**"})
    assert "personal" in (vault_refusal(mine, [same], held={"notes"}, present={"notes"}) or "")
    assert vault_refusal(mine, [same], held=(), present={"notes"}) is None
    mine_before = StoredVault("notes", "/home/notes", 3, "/c/home.toml", {"personal": "**"})
    assert vault_refusal(mine, [mine_before], held=(), present={"notes"}) is None
    # The folder under another name another config holds.
    other = StoredVault("work", "/home/notes", 3, "/c/work.toml", {})
    assert "'work'" in (vault_refusal(mine, [other], held={"work"}, present={"work"}) or "")
    assert vault_renames({"notes": "/home/notes"}, [other], held={"work"}) == {}
    assert vault_renames({"notes": "/home/notes"}, [other]) == {"work": "notes"}


def _beat(db_url: str, vaults: tuple[str, ...]) -> WriterLock:
    lock = WriterLock(db_url, list(vaults))
    assert lock.try_acquire()
    lock.beat(DaemonBeat("host:7", "host", 7, "writer", "watching", 0, 5.0, vaults=vaults))
    return lock


def test_status_lists_only_the_daemons_of_its_vaults(two: tuple[Kb, Kb], db_url: str) -> None:
    a, b = two
    lock = _beat(db_url, ("b",))
    try:
        mine = a.status_reader()()
        assert mine.daemons == [] and mine.daemon == "not running"
        assert mine.summary()["daemon"] == "not running"
        theirs = b.status_reader()()
        assert theirs.daemon == "running"
        assert list(theirs.as_json()["daemons"][0]["vaults"]) == ["b"]
    finally:
        lock.close()


def test_a_config_counts_only_its_vaults_finished_items(two: tuple[Kb, Kb]) -> None:
    a, b = two
    super(Kb, b).sync()
    assert b.drain().done == 1
    assert b.store.queue.status(("b",)).done_last_hour == 1
    assert a.store.queue.status(("a",)).done_last_hour == 0
    assert a.store.queue.status(("a",), "embed").done_last_hour == 0


def test_a_note_deleted_and_put_back_costs_nothing(store: Store, tmp_path: Path) -> None:
    folder = _vault(tmp_path, "a", "# A\n\nI climbed a hill near the lighthouse.\n")
    # A second note: a folder left with no entry at all is read as an unmounted disk.
    (folder / "b.md").write_text("# B\n\nThe ferry leaves at noon.\n")
    a = _kb(store, "a", folder)
    a.sync()
    text = (folder / "a.md").read_text()
    (folder / "a.md").unlink()
    assert a.sync().deleted == 1
    (folder / "a.md").write_text(text)
    a.reset_counts()
    assert a.sync().indexed == 1
    assert a.chat.total_calls == 0 and a.embedder.texts == 0


def test_forget_keeps_to_vaults_no_daemon_or_worker_holds(tmp_path: Path, db_url: str) -> None:
    env = {**os.environ, "KB_DATABASE_URL": db_url, "COLUMNS": "200"}
    name = "Café notes"
    configs = {
        x: _config(tmp_path, x, _vault(tmp_path, x, f"# {x}\n\nI climbed hill {x}.\n"))
        for x in ("a", name)
    }
    assert run_kb(configs[name], env, "index").returncode == 0
    status = run_kb(configs["a"], env, "status").stdout
    assert "`kb forget 'Café notes'`" in status
    typed = unicodedata.normalize("NFD", name)
    lock = _beat(db_url, (name,))
    try:
        held = run_kb(configs["a"], env, "forget", typed, "--yes")
        assert held.returncode == 1 and "daemon host:7" in held.stderr
        assert "pid 7" in held.stderr and "\n" not in held.stderr.strip()
        watched = run_kb(configs["a"], env, "status").stdout
        assert "other vault  Café notes: 1 notes" in watched and "kb forget" not in watched
        assert "daemon host:7 watches it" in watched
        listed = json.loads(run_kb(configs["a"], env, "status", "--json").stdout)
        assert listed["other_vaults"][0]["held_by"] == "daemon host:7 watches it"
    finally:
        lock.leave("host:7")
    store_workers = WorkerBeat("w:9", "w", 9, 1, 0, 5.0, vaults=(name,))
    with open_store(db_url) as store:
        store.workers.beat(store_workers)
        held = run_kb(configs["a"], env, "forget", typed, "--yes")
        assert held.returncode == 1 and "worker w:9" in held.stderr
        store.workers.leave("w:9")
    done = run_kb(configs["a"], env, "forget", typed, "--yes")
    assert done.returncode == 0, done.stderr


def test_a_config_refused_its_vaults_name_never_searches_the_other_folders_notes(
    store: Store, tmp_path: Path
) -> None:
    # `kb init` on ~/work/notes and on ~/home/notes names both "notes": home's sync is
    # refused, and its searches, by that name, would read work's notes.
    work, home = _work_and_home(
        store, tmp_path, "The quarterly budget kestrel.", "A kestrel in the garden."
    )
    assert work.sync().indexed == 1
    with pytest.raises(KbError):
        home.sync()
    with pytest.raises(KbError, match="none of this config's vaults"):
        home.search_service().search(SearchRequest("quarterly budget kestrel", mode="text"))


def test_a_config_refused_its_vaults_name_counts_none_of_the_other_folders_notes(
    store: Store, tmp_path: Path
) -> None:
    # The same two configs: home's status, by that name, would count work's notes as its own.
    work, home = _work_and_home(
        store, tmp_path, "The quarterly budget, see [[Plans]] and [[Kestrel]].", "A kestrel."
    )
    (tmp_path / "work" / "notes" / "Later.md").write_text("---\ndate: soon\n---\nLater.\n")
    assert work.sync().indexed == 2
    with pytest.raises(KbError):
        home.sync()
    worked = work.status_reader()()
    assert worked.index.documents == 2 and worked.index.chunks and worked.links.links == 2
    assert worked.vectors.done_last_hour == 2 and len(worked.undated) == 1
    report = home.status_reader()()
    assert (report.index.documents, report.index.chunks, report.index.failures) == (0, 0, [])
    assert (report.links.links, report.links.unresolved) == (0, 0)
    assert (report.queue.items, report.vectors.items, report.vectors.done_last_hour) == (0, 0, 0)
    assert report.undated == []


def test_a_config_refused_its_vaults_name_builds_none_of_the_other_folders_notes(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The same two configs, work's note queued: home's workers (`kb worker`, `kb index
    # --wait`), claiming by that name, would embed it with home's model and write its LLM
    # context with home's settings.
    work, home = _work_and_home(store, tmp_path)
    super(Kb, work).sync()
    with pytest.raises(KbError):
        home.sync()
    caplog.set_level(logging.INFO, logger="kb.worker")
    drained = home.drain()
    assert (drained.done, drained.vectored, drained.failed) == (0, 0, 0)
    home.worker(until_empty=True).run()
    assert home.chat.total_calls == 0 and home.embedder.texts == 0
    assert store.queue.status(("notes",)).items == 1
    assert store.queue.status(("notes",), "embed").items == 1
    # Each says so once, in one line, rather than idling without a word.
    told = [r.getMessage() for r in caplog.records if "no vault" in r.getMessage()]
    assert len(told) == 2 and "\n" not in told[0]
    assert work.drain().done == 1


def test_a_running_worker_takes_up_its_vault_once_the_other_folders_is_forgotten(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The same two configs, home's worker running: `kb forget notes` (work's), then home's
    # sync, make the name home's, and its worker builds home's note without a restart.
    from support.daemons import wait_for

    work, home = _work_and_home(store, tmp_path)
    work.sync()
    caplog.set_level(logging.INFO, logger="kb.worker")
    worker = home.worker()
    thread = threading.Thread(target=worker.run, name="test-worker", daemon=True)
    thread.start()
    try:
        wait_for(lambda: any("no vault" in r.getMessage() for r in caplog.records), "its line")
        assert store.workers.listed() == []  # an empty list would say every vault
        assert store.vaults.forget("notes") == 1
        super(Kb, home).sync()
        wait_for(lambda: not store.queue.status(("notes",)).items, "home's note built")
        wait_for(lambda: [w.vaults for w in store.workers.listed()] == [("notes",)], "a beat")
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive() and home.chat.total_calls


def test_a_refused_configs_daemon_builds_none_of_the_other_folders_notes(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The same two configs, work's note queued: home's daemon, refused at each sync, would
    # build it in its background work.
    from support.daemons import wait_for

    work, home = _work_and_home(store, tmp_path)
    super(Kb, work).sync()
    caplog.set_level(logging.INFO, logger="kb.worker")
    daemon = home.daemon()
    thread = threading.Thread(target=daemon.run, name="test-daemon", daemon=True)
    thread.start()
    try:
        wait_for(
            lambda: (
                any("no vault" in r.getMessage() for r in caplog.records)
                or not store.queue.status(("notes",)).items
            ),
            "home's daemon to take up its background work",
        )
        time.sleep(1.5)  # a slot's poll, and more: it would have claimed the note by now
    finally:
        daemon.stop()
        thread.join(30)
    assert not thread.is_alive()
    assert home.chat.total_calls == 0 and home.embedder.texts == 0
    assert store.queue.status(("notes",)).items == 1
    assert store.queue.status(("notes",), "embed").items == 1


def test_a_config_refused_its_vaults_name_lists_the_other_folders_vault_and_workers_as_others(
    store: Store, tmp_path: Path, db_url: str
) -> None:
    # The same two configs, a worker of work's running: home's status, by that name, would
    # list it as its own, and hide work's vault, which it does not search.
    work, home = _work_and_home(store, tmp_path)
    assert work.sync().indexed == 1
    with pytest.raises(KbError):
        home.sync()
    store.workers.beat(WorkerBeat("w:9", "w", 9, 1, 0, 5.0, vaults=("notes",)))
    try:
        theirs = work.status_reader()()
        assert [w.id for w in theirs.running_workers] == ["w:9"]
        assert theirs.other_vaults == [] and theirs.held == {}
        mine = home.status_reader()()
        assert mine.workers == [] and mine.running_workers == []
        folder = str((tmp_path / "work" / "notes").resolve())
        assert [(v.name, v.folder, v.notes) for v in mine.other_vaults] == [("notes", folder, 1)]
        assert mine.held == {"notes": "worker w:9 builds its notes"}
        assert mine.summary()["other_vaults"] == {"notes": 1}
        env = {**os.environ, "KB_DATABASE_URL": db_url, "COLUMNS": "300"}
        shown = run_kb(tmp_path / "home.toml", env, "status").stdout
        assert "workers      none running" in shown
        assert (
            f"other vault  notes: 1 notes at {folder}, not this config's folder;"
            " worker w:9 builds its notes"
        ) in shown
    finally:
        store.workers.leave("w:9")


def test_which_vaults_a_config_searches() -> None:
    mine = {"notes": "/w/notes", "garden": "/h/garden"}
    # Only its vaults in the index: no filter.
    held = {"notes": ("/w/notes", "/w.toml"), "garden": ("/h/garden", "/w.toml")}
    assert searched_vaults(mine, "/w.toml", held) is None
    # Its name held by another config at another folder: that vault is left out.
    held = {"notes": ("/x/notes", "/x.toml"), "garden": ("/h/garden", "/w.toml")}
    assert searched_vaults(mine, "/w.toml", held) == ("garden",)
    assert searched_vaults({"notes": "/w/notes"}, "/w.toml", held) == ()  # no vault
    # Moved by its own config (not synced yet), or a folder not known: still its own.
    held = {"notes": ("/old/notes", "/w.toml"), "other": ("/o", "/o.toml")}
    assert searched_vaults(mine, "/w.toml", held) == ("notes", "garden")
    assert searched_vaults(mine, "/w.toml", {"notes": (None, None)}) is None


def test_one_name_for_two_folders_is_two_writers(tmp_path: Path, db_url: str) -> None:
    # `kb init` on ~/work/notes and ~/home/notes, then `kb daemon` on both: home's daemon,
    # refused at each sync, must not keep work's from writing.
    def vaults(folder: str) -> list[str]:
        raw = {
            "owner_name": OWNER,
            "vaults": [{"name": "notes", "path": str(tmp_path / folder)}],
            "llm": {"provider": "fake", "chat_model": "fake-chat", "embed_model": "hash-256"},
        }
        return writer_vaults(parse_config(raw, base_dir=tmp_path, env={}).vaults)

    home, work = WriterLock(db_url, vaults("home")), WriterLock(db_url, vaults("work"))
    also_work = WriterLock(db_url, vaults("work"))
    try:
        assert home.try_acquire() and work.try_acquire()
        assert not also_work.try_acquire()  # one vault shared by two configs: one writer
    finally:
        for lock in (home, work, also_work):
            lock.close()


def test_status_lists_no_daemon_of_its_vaults_name_at_another_folder(
    store: Store, tmp_path: Path, db_url: str
) -> None:
    work, home = _work_and_home(store, tmp_path)
    lock = WriterLock(db_url, ["work"])
    assert lock.try_acquire()
    beat = DaemonBeat("host:7", "host", 7, "writer", "watching", 0, 5.0, vaults=("notes",))
    lock.beat(replace(beat, folders=(str((tmp_path / "work" / "notes").resolve()),)))
    try:
        assert home.status_reader()().daemon == "not running"
        theirs = work.status_reader()()
        assert theirs.daemon == "running"
        assert list(theirs.as_json()["daemons"][0]["folders"]) == [
            str((tmp_path / "work" / "notes").resolve())
        ]
        # A daemon that does not say its folders (before 029) is listed by name, as before.
        lock.beat(beat)
        assert home.status_reader()().daemon == "running"
    finally:
        lock.close()


def test_mcp_list_notes_of_a_refused_config_lists_no_other_folders_note(
    store: Store, tmp_path: Path
) -> None:
    import anyio
    from mcp import Client

    from kb.mcp.tools import build_server

    work, home = _work_and_home(store, tmp_path)
    assert work.sync().indexed == 1

    async def main() -> None:
        async with Client(build_server(home)) as client:
            listed = await client.call_tool("list_notes", {})
            assert listed.is_error or listed.structured_content["notes"] == []
        async with Client(build_server(work)) as client:
            listed = await client.call_tool("list_notes", {})
            assert [n["path"] for n in listed.structured_content["notes"]] == ["notes.md"]

    anyio.run(main)
