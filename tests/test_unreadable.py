"""A vault folder kb cannot read (permissions, an I/O error, a privacy control) is reported,
and the notes stored under it stay in the index until kb can read it again.

Permissions do not bind root, so these run as an unprivileged user (see support/unprivileged.py)
on an embedded PostgreSQL of its own, started once for the module: the scan, and a daemon on a
clock the test steps, in a forked child; `kb` as a real process. A note root writes into a
folder its owner cannot read needs both users at once: there the daemon is a real process too.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from kb.config import load_config
from kb.container import open_store
from kb.indexing.verify import verify
from kb.logfmt import LogfmtFormatter
from kb.vault import notes
from support.configs import make_config, write_config
from support.daemons import FAST, SteppedClock, running, wait_for
from support.fake_kb import Kb
from support.paths import EXAMPLE_VAULT
from support.unprivileged import (
    KB,
    Account,
    NoAccount,
    account,
    as_user,
    options,
    remove,
    run,
    start,
    workdir,
)

NOTES = 15


# -- the scan, without a database ------------------------------------------------------------------


@pytest.fixture(scope="module")
def who() -> Account:
    try:
        return account()
    except NoAccount as exc:
        pytest.skip(str(exc))


@pytest.fixture
def home(who: Account) -> Iterator[Path]:
    path = workdir(who)
    try:
        yield path
    finally:
        remove(path)


def _vault(who: Account, home: Path, name: str = "vault") -> Path:
    target = home / name
    shutil.copytree(EXAMPLE_VAULT, target)
    if who.switches:
        for folder, _, files in os.walk(target):
            for name_ in (folder, *(os.path.join(folder, f) for f in files)):
                os.chown(name_, who.uid, who.gid)
    return target


@pytest.mark.parametrize("mode", [0o000, 0o444], ids=["no access", "listable, not searchable"])
def test_the_scan_reports_a_folder_it_cannot_read(who: Account, home: Path, mode: int) -> None:
    vault = _vault(who, home)
    config = make_config(vault).vaults[0]
    (vault / "Reference/Recipes").chmod(mode)

    def check() -> None:
        unlisted: list[notes.Unlisted] = []
        found = [n.path for n in notes.scan_vault(config, unlisted=unlisted)]
        assert [u.path for u in unlisted] == ["Reference/Recipes/"]
        assert unlisted[0].reason == "Permission denied"
        assert not any(p.startswith("Reference/Recipes/") for p in found)
        assert "Reference/Postgres Cheatsheet.md" in found

    as_user(who, check)


def test_the_scan_reports_an_unreadable_root(who: Account, home: Path) -> None:
    vault = _vault(who, home)
    config = make_config(vault).vaults[0]
    vault.chmod(0)

    def check() -> None:
        unlisted: list[notes.Unlisted] = []
        assert list(notes.scan_vault(config, unlisted=unlisted)) == []
        assert [u.path for u in unlisted] == [""]

    as_user(who, check)


def test_a_watched_path_in_an_unreadable_folder_is_reported(who: Account, home: Path) -> None:
    vault = _vault(who, home)
    config = make_config(vault).vaults[0]
    (vault / "Reference/Recipes").chmod(0)
    scope = notes.Scope(frozenset({"Reference/Recipes/Weeknight Miso Ramen.md", "Gone.md"}))

    def check() -> None:
        unlisted: list[notes.Unlisted] = []
        assert notes.scan_scope(config, scope, unlisted) == {}
        assert [u.path for u in unlisted] == ["Reference/Recipes/"]
        assert notes.gone(config, "Gone.md")
        assert not notes.gone(config, "Reference/Recipes/Weeknight Miso Ramen.md")

    as_user(who, check)


def test_a_vanished_folder_is_not_unreadable(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, vault)
    config = make_config(vault).vaults[0]
    unlisted: list[notes.Unlisted] = []
    scan = notes.scan_vault(config, unlisted=unlisted)
    first = next(scan)
    shutil.rmtree(vault / "Reference")  # gone after its parent was listed
    rest = [n.path for n in scan]
    assert first.path.startswith("Alex/")
    assert unlisted == [] and not any(p.startswith("Reference/") for p in rest)


def test_a_scan_with_nowhere_to_report_raises(who: Account, home: Path) -> None:
    vault = _vault(who, home)
    config = make_config(vault).vaults[0]
    (vault / "Projects").chmod(0)

    def check() -> None:
        with pytest.raises(PermissionError):
            list(notes.scan_vault(config))

    as_user(who, check)


# -- kb as a user runs it --------------------------------------------------------------------------


@dataclass
class Site:
    """A data folder and an embedded PostgreSQL owned by the unprivileged user."""

    who: Account
    home: Path
    env: dict[str, str]

    def config(self, vault: Path, **sections: Any) -> Path:
        return write_config(self.home / f"{vault.name}.toml", vault, **sections)

    def kb(self, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return run(self.who, [*KB, "--config", str(config), *args], self.env)

    def verify(self, config: Path) -> dict:
        result = self.kb(config, "verify", "--json")
        assert result.returncode in (0, 4), result.stderr
        return json.loads(result.stdout)


@pytest.fixture(scope="module")
def site(who: Account) -> Iterator[Site]:
    home = workdir(who, "kb-site-")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "KB_DATA_DIR": str(home / "data"),
        "COLUMNS": "200",
        # The kb the tests import, wherever it comes from.
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    # One process holds the server for the module; each `kb` joins it.
    holder = subprocess.Popen(
        [
            *KB[:1],
            "-c",
            "import sys; from pathlib import Path; from kb.db import embedded_url; "
            "print(embedded_url(Path(sys.argv[1])), flush=True); sys.stdin.read()",
            str(home / "data"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        **options(who, env),
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        url = holder.stdout.readline().strip()
        assert url, "the embedded PostgreSQL did not start"
        yield Site(who, home, {**env, "KB_DATABASE_URL": url})
    finally:
        holder.stdin.close()
        holder.wait(60)
        remove(home)


@pytest.fixture
def indexed_copy(site: Site, request: pytest.FixtureRequest) -> Iterator[tuple[Path, Path]]:
    """A copy of the example vault, indexed with every note's LLM context."""
    vault = _vault(site.who, site.home, request.node.name.replace("[", "-").strip("]"))
    config = site.config(vault)
    first = site.kb(config, "index", "--wait")
    assert first.returncode == 0, first.stderr
    try:
        yield vault, config
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(vault)], capture_output=True)
        shutil.rmtree(vault, ignore_errors=True)
        # The next test's config names vault "v" at its own folder: with this config still
        # naming it here, that would be another configuration's vault, and refused.
        config.unlink()


def _kinds(report: dict) -> list[tuple[str, str]]:
    return sorted((d["kind"], d["path"]) for d in report["differences"])


@pytest.mark.parametrize("mode", [0o000, 0o444], ids=["no access", "listable, not searchable"])
def test_index_keeps_the_notes_of_an_unreadable_folder(
    site: Site, indexed_copy: tuple[Path, Path], mode: int
) -> None:
    vault, config = indexed_copy
    (vault / "Projects/Home Server.md").write_text("# Home Server\n\nMoved to a NUC.\n")
    (vault / "Reference").chmod(mode)
    result = site.kb(config, "index", "--wait")
    # Not every note could be synced: the exit status says so, as for a note that failed.
    assert result.returncode == 3, result.stderr
    assert "1 indexed" in result.stderr and "0 deleted" in result.stderr
    assert "cannot read v/Reference/: Permission denied" in result.stderr

    report = site.verify(config)
    assert _kinds(report) == [("unlistable", "Reference/")]
    assert report["rows"] == NOTES
    status = site.kb(config, "status")
    assert "v/Reference/: cannot be read (Permission denied)" in status.stdout

    (vault / "Reference").chmod(0o755)
    again = site.kb(config, "index", "--wait")
    assert again.returncode == 0, again.stderr
    assert "0 indexed" in again.stderr and "0 deleted" in again.stderr
    assert " 0 LLM calls" in again.stderr and "enriched" not in again.stderr
    assert site.verify(config)["in_sync"]
    assert "cannot be read" not in site.kb(config, "status").stdout


def test_index_keeps_every_note_of_an_unreadable_vault(
    site: Site, indexed_copy: tuple[Path, Path]
) -> None:
    vault, config = indexed_copy
    vault.chmod(0)
    result = site.kb(config, "index")
    assert result.returncode == 3, result.stderr
    assert "0 deleted" in result.stderr and "cannot read v/: Permission denied" in result.stderr
    report = site.verify(config)
    assert _kinds(report) == [("unlistable", "")] and report["rows"] == NOTES

    vault.chmod(0o755)
    again = site.kb(config, "index", "--wait")
    assert again.returncode == 0, again.stderr
    assert f"{NOTES} unchanged" in again.stderr and " 0 LLM calls" in again.stderr
    assert site.verify(config)["in_sync"]


def test_an_unreadable_note_fails_and_keeps_its_rows(
    site: Site, indexed_copy: tuple[Path, Path]
) -> None:
    vault, config = indexed_copy
    note = vault / "Projects/Home Server.md"
    note.write_text("# Home Server\n\nMoved to a NUC.\n")
    note.chmod(0)
    result = site.kb(config, "index")
    assert result.returncode == 3, result.stderr
    assert (
        "0 deleted" in result.stderr and "Projects/Home Server.md: cannot be read" in result.stderr
    )
    report = site.verify(config)
    assert _kinds(report) == [("failed", "Projects/Home Server.md")]
    assert report["rows"] == NOTES


def _log_lines(log: Path, message: str) -> list[str]:
    """The daemon's log lines whose message starts with `message`."""
    return [
        line
        for line in log.read_text().splitlines()
        if f'msg="{message}' in line or f"msg={message} " in line
    ]


# An interval of the stepped clock: each look the test takes steps it by one.
INTERVAL = 60.0


def _daemon_as_user(
    site: Site, vault: Path, body: Callable[[Kb, SteppedClock, Path], None]
) -> None:
    """`body` run as the unprivileged user (in a forked child) beside a daemon on the vault
    on a clock it steps, reconciling every INTERVAL of it; its log lines go to the file
    `body` is handed."""
    config = site.config(
        vault, daemon={**FAST, "reconcile_interval": INTERVAL, "reconcile_jitter": 0.0}
    )
    log = site.home / f"{vault.name}.log"

    def check() -> None:
        handler = logging.FileHandler(log)
        handler.setFormatter(LogfmtFormatter())
        logger = logging.getLogger("kb")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        clock = SteppedClock()
        with open_store(site.env["KB_DATABASE_URL"]) as store:
            kb = Kb(store, load_config(config, env=site.env))
            with running(kb, clock=clock):
                body(kb, clock, log)

    as_user(site.who, check)


def _stepping(clock: SteppedClock, condition: Callable[[], object], what: str) -> None:
    """Wait for `condition`, the clock stepped an INTERVAL before each look."""

    def look() -> object:
        clock.step(INTERVAL)
        return condition()

    wait_for(look, what, timeout=90.0, every=0.3)


def _verified(kb: Kb) -> dict:
    """verify's report, as `kb verify --json` gives it."""
    report = verify(kb.config, kb.store.documents)
    return {**asdict(report), "in_sync": report.in_sync}


def test_the_daemon_keeps_an_unreadable_folder_and_catches_up(
    site: Site, indexed_copy: tuple[Path, Path]
) -> None:
    vault, _ = indexed_copy

    def body(kb: Kb, clock: SteppedClock, log: Path) -> None:
        folder = vault / "Reference/Recipes"
        note = folder / "Weeknight Miso Ramen.md"
        note.write_text(note.read_text() + "\nMore chili oil.\n")
        folder.chmod(0)
        # Reconciliations run at each step: the folder is seen unreadable, and kept.
        _stepping(clock, lambda: _log_lines(log, "cannot read a folder"), "the daemon's warning")
        # Two more reconciliations that met the folder unreadable, and kept its notes.
        seen = len(_log_lines(log, "reconciliation done"))
        _stepping(
            clock,
            lambda: len(_log_lines(log, "reconciliation done")) >= seen + 2,
            "reconciliations",
        )
        report = _verified(kb)
        assert ("unlistable", "Reference/Recipes/") in _kinds(report)
        assert report["rows"] == NOTES

        folder.chmod(0o755)
        _stepping(clock, lambda: _verified(kb)["in_sync"], "the index to catch up")
        assert _log_lines(log, "folder readable again")
        assert not _log_lines(log, "deleted")
        indexed_lines = _log_lines(log, "indexed")
        assert len(indexed_lines) == 1 and "Weeknight Miso Ramen.md" in indexed_lines[0]

    _daemon_as_user(site, vault, body)


def test_a_folder_is_not_readable_again_while_its_vault_cannot_be_read(
    site: Site, indexed_copy: tuple[Path, Path]
) -> None:
    vault, _ = indexed_copy

    def body(kb: Kb, clock: SteppedClock, log: Path) -> None:
        def count(message: str) -> int:
            return len(_log_lines(log, message))

        try:
            (vault / "Reference").chmod(0)
            _stepping(clock, lambda: count("cannot read a folder"), "the folder's warning")
            vault.chmod(0)
            _stepping(clock, lambda: count("cannot read a folder") == 2, "the vault's warning")
            seen = count("reconciliation done")
            _stepping(
                clock,
                lambda: count("reconciliation done") >= seen + 2,
                "reconciliations of the unreadable vault",
            )
            assert not count("folder readable again"), "said of a folder not looked at"
            vault.chmod(0o755)
            _stepping(clock, lambda: count("folder readable again"), "the vault readable again")
            seen = count("reconciliation done")
            _stepping(
                clock,
                lambda: count("reconciliation done") >= seen + 2,
                "reconciliations of the readable vault",
            )
            again = _log_lines(log, "folder readable again")
            assert len(again) == 1 and again[0].endswith('path=""'), again  # the root alone
            (vault / "Reference").chmod(0o755)
            _stepping(clock, lambda: count("folder readable again") == 2, "Reference/ readable")
            assert "path=Reference/" in _log_lines(log, "folder readable again")[1]
            assert count("cannot read a folder") == 2
        finally:
            vault.chmod(0o755)

    _daemon_as_user(site, vault, body)


def test_the_daemon_keeps_a_note_changed_in_a_folder_it_cannot_read(
    site: Site, indexed_copy: tuple[Path, Path]
) -> None:
    """A sync tool (here root) writes a note in a folder its owner cannot read: the event
    names a path that cannot be stat'ed, which is no delete."""
    vault, _ = indexed_copy
    config = site.config(vault, daemon={"debounce": 0.2, "max_delay": 1.0, "heartbeat": 0.5})
    log = site.home / f"{vault.name}.log"
    daemon = start(site.who, [*KB, "--config", str(config), "daemon"], site.env, log)
    try:
        _wait(lambda: _log_lines(log, "reconciliation done"), "the start-up reconciliation")
        folder = vault / "Reference/Recipes"
        folder.chmod(0)
        note = folder / "Weeknight Miso Ramen.md"
        note.write_text(note.read_text() + "\nMore chili oil.\n")
        _wait(lambda: _log_lines(log, "cannot read a folder"), "the daemon's warning")
        report = site.verify(config)
        assert _kinds(report) == [("unlistable", "Reference/Recipes/")]
        assert report["rows"] == NOTES

        folder.chmod(0o755)
        _wait(lambda: site.verify(config)["in_sync"], "the index to catch up")
        assert not _log_lines(log, "deleted")
    finally:
        daemon.terminate()
        daemon.wait(60)


def _wait(condition: Callable[[], object], what: str, timeout: float = 90.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.3)
