"""A vault folder left empty by an unmounted disk, or on another device with no note, keeps
its index: nothing deleted, nothing sent to a model again when the disk is back."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kb.errors import KbError
from kb.store import Store
from kb.vault import presence
from kb.vault.presence import Held, Root, absence
from support.cli import run_kb
from support.configs import make_config, write_config
from support.daemons import daemon_kb, no_calls, reconcile_now, running, settle, wait_for
from support.fake_kb import Kb
from support.reading import rows

# -- the rule, from data alone ---------------------------------------------------------------------


def test_an_empty_folder_of_a_vault_with_notes_is_missing() -> None:
    assert absence(Root(empty=True, device=7), Held(notes=True, device=7))
    assert absence(Root(empty=True, device=9), Held(notes=True, device=None))


def test_no_folder_of_a_vault_with_notes_is_missing() -> None:
    assert absence(None, Held(notes=True, device=7))
    # A vault with none is no disk that went: the sync stops on it, as before.
    assert absence(None, Held(notes=False, device=None)) is None


def test_an_empty_folder_of_a_vault_without_notes_is_synced() -> None:
    assert absence(Root(empty=True, device=7), Held(notes=False, device=None)) is None
    assert absence(Root(empty=True, device=7), Held(notes=False, device=3)) is None


def test_a_noteless_folder_on_another_device_is_missing() -> None:
    assert absence(Root(empty=False, device=9, notes=False), Held(notes=True, device=7))


def test_a_folder_on_another_device_with_notes_is_synced() -> None:
    # The disk is back under a new device number (tmpfs, NFS, SSHFS take one at each
    # mount), or the vault was moved to another disk.
    assert absence(Root(empty=False, device=9, notes=True), Held(notes=True, device=7)) is None


def test_a_noteless_folder_on_the_same_device_is_synced() -> None:
    # Every note deleted, .obsidian/ left: the notes are deleted from the index.
    assert absence(Root(empty=False, device=7), Held(notes=True, device=7)) is None
    # A device never recorded (an index from before the rule) is no evidence.
    assert absence(Root(empty=False, device=7, notes=None), Held(notes=True, device=None)) is None


def test_the_look_searches_for_a_note_only_on_another_device(
    tmp_path: Path, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(vault).vaults[0]
    here = presence._device(vault)
    assert presence.look(config, Held(True, here)) == Root(False, here, None)
    monkeypatch.setattr(presence, "_device", lambda path: here + 1)
    assert presence.look(config, Held(True, here)) == Root(False, here + 1, True)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.txt").write_text("mount the notes disk here\n")
    assert presence.look(make_config(empty).vaults[0], Held(True, here)) == Root(
        False, here + 1, False
    )
    assert presence.look(make_config(tmp_path / "gone").vaults[0], Held(True, here)) is None


# -- a sync ----------------------------------------------------------------------------------------


def _unmount(vault: Path) -> Path:
    """The vault's notes moved away, its folder left empty, as an unmounted disk leaves its
    mount point; where they went."""
    away = vault.with_name(vault.name + "-disk")
    vault.rename(away)
    vault.mkdir()
    return away


def _mount(vault: Path, away: Path) -> None:
    vault.rmdir()
    away.rename(vault)


def _cli(tmp_path: Path, vault: Path, db_url: str) -> tuple[Path, dict[str, str]]:
    """A config file of vault "v" at `vault`, and the environment `kb` runs in on `db_url`."""
    config = write_config(tmp_path / "kb.toml", vault, personal=())
    return config, {**os.environ, "KB_DATABASE_URL": db_url, "COLUMNS": "200"}


def _notes(kb: Kb) -> int:
    return int(rows(kb.store, "SELECT count(*) AS n FROM documents")[0]["n"])


def test_a_sync_of_an_emptied_vault_keeps_every_note(kb: Kb, vault: Path) -> None:
    kb.sync()
    held = _notes(kb)
    away = _unmount(vault)
    kb.reset_counts()
    report = kb.sync()
    assert report.deleted == 0 and report.unlistable == 1
    assert [(e.path, e.action) for e in report.unlisted] == [("", "unlistable")]
    assert _notes(kb) == held

    _mount(vault, away)
    back = kb.sync()
    assert (back.deleted, back.indexed, back.unlistable) == (0, 0, 0)
    assert back.unchanged == held and no_calls(kb)


def test_a_noteless_folder_on_another_device_keeps_every_note(
    kb: Kb, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb.sync()
    held = _notes(kb)
    away = _unmount(vault)
    (vault / ".obsidian").mkdir()  # something the disk beneath holds
    device = os.stat(vault).st_dev + 1
    monkeypatch.setattr(presence, "_device", lambda path: device)
    report = kb.sync()
    assert report.deleted == 0 and report.unlistable == 1
    assert _notes(kb) == held

    # The disk back under a new device number: synced, nothing sent again.
    shutil.rmtree(vault)
    away.rename(vault)
    kb.reset_counts()
    back = kb.sync()
    assert (back.deleted, back.unchanged, back.unlistable) == (0, held, 0) and no_calls(kb)
    assert rows(kb.store, "SELECT device FROM vaults")[0]["device"] == device


def test_every_note_deleted_on_the_same_device_is_deleted(kb: Kb, vault: Path) -> None:
    kb.sync()
    held = _notes(kb)
    for note in [*vault.rglob("*.md")]:
        note.unlink()
    (vault / ".obsidian").mkdir(exist_ok=True)
    report = kb.sync()
    assert report.deleted == held and _notes(kb) == 0


def test_kb_index_on_an_emptied_vault_is_one_line_and_status_3(
    tmp_path: Path, vault: Path, db_url: str
) -> None:
    config, env = _cli(tmp_path, vault, db_url)
    first = run_kb(config, env, "index", "--wait")
    assert first.returncode == 0, first.stderr
    away = _unmount(vault)
    result = run_kb(config, env, "index")
    assert result.returncode == 3, result.stderr
    assert "0 deleted" in result.stderr
    assert [line for line in result.stderr.splitlines() if "cannot read" in line] == [
        "  cannot read v/: the folder is empty, as an unmounted disk leaves it; the notes"
        " indexed under it are kept as they were"
    ]
    _mount(vault, away)
    again = run_kb(config, env, "index")
    assert again.returncode == 0, again.stderr
    assert " 0 indexed" in again.stderr and "0 deleted" in again.stderr
    assert " 0 LLM calls" in again.stderr and "0 texts embedded" in again.stderr


# -- the daemon ------------------------------------------------------------------------------------


def test_the_daemon_keeps_an_unmounted_vault_and_resumes(
    store: Store, vault: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kb.daemon")
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        held = _notes(kb)
        kb.reset_counts()
        away = _unmount(vault)
        wait_for(
            lambda: any("cannot read a folder" in r.getMessage() for r in caplog.records),
            "the daemon to say the vault is missing",
        )
        reconcile_now(daemon, kb)
        reconcile_now(daemon, kb)
        assert _notes(kb) == held
        messages = [r.getMessage() for r in caplog.records]
        assert messages.count("cannot read a folder: the notes indexed under it are kept") == 1
        assert "deleted" not in messages

        _mount(vault, away)
        settle(daemon, kb)
        reconcile_now(daemon, kb)
    assert _notes(kb) == held and no_calls(kb)
    assert "deleted" not in [r.getMessage() for r in caplog.records]


def test_a_vault_folder_gone_is_kept_and_the_other_vaults_synced(
    store: Store, vault: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "Lighthouse.md").write_text("# Lighthouse\n\nThe keeper waved.\n")
    both = [{"name": "v", "path": str(vault)}, {"name": "o", "path": str(other)}]
    kb = Kb(store, make_config(vault, vaults=both))
    kb.sync()
    held = _notes(kb)
    away = vault.with_name("disk")
    vault.rename(away)  # the disk was mounted at a folder above the vault's
    (other / "Harbour.md").write_text("# Harbour\n\nBoats.\n")
    report = kb.sync()
    assert (report.deleted, report.unlistable, report.indexed) == (0, 1, 1)
    assert _notes(kb) == held + 1


def test_a_new_vault_with_no_folder_stops_the_sync(store: Store, tmp_path: Path) -> None:
    with pytest.raises(KbError, match="is not a directory"):
        Kb(store, make_config(tmp_path / "nowhere")).sync()


def test_a_new_vault_with_an_empty_folder_is_synced(store: Store, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    report = Kb(store, make_config(empty)).sync()
    assert (report.files, report.unlistable, report.deleted) == (0, 0, 0)


def test_a_folder_that_cannot_be_listed_is_not_taken_for_empty(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(path: object) -> None:
        raise PermissionError(13, "Permission denied")

    here = presence._device(vault)
    monkeypatch.setattr(os, "scandir", refused)
    root = presence.look(make_config(vault).vaults[0], Held(True, here))
    assert root == Root(empty=False, device=here)
    assert absence(root, Held(True, here)) is None


def test_kb_verify_on_an_emptied_vault_says_the_disk_is_away(
    tmp_path: Path, vault: Path, db_url: str
) -> None:
    # Told every note is "extra", a user would run a sync or forget the vault; the folder is
    # a disk away, and its notes are kept, as the sync says.
    config, env = _cli(tmp_path, vault, db_url)
    assert run_kb(config, env, "index", "--wait").returncode == 0
    _unmount(vault)
    result = run_kb(config, env, "verify")
    assert result.returncode == 4, result.stderr
    assert "extra" not in result.stdout
    assert result.stdout.split() == [
        "unlistable",
        "v",
        "(the",
        *"folder is empty, as an unmounted disk leaves it)".split(),
    ]


def test_an_unmounted_bind_mount_on_the_same_disk_keeps_every_note(
    kb: Kb, vault: Path, tmp_path: Path
) -> None:
    # A bind mount shares its device with the folder it shows: unmounted, its mount point
    # (left a `lost+found/` here) is on the same device, and must not read as every note
    # deleted.
    disk = tmp_path / "disk"
    vault.rename(disk)
    vault.mkdir()
    if subprocess.run(["mount", "--bind", str(disk), str(vault)], capture_output=True).returncode:
        pytest.skip("bind mounts need root")
    try:
        kb.sync()
        held = _notes(kb)
    finally:
        subprocess.run(["umount", str(vault)], check=True)
    (vault / "lost+found").mkdir()
    report = kb.sync()
    assert report.deleted == 0 and report.unlistable == 1
    assert _notes(kb) == held
