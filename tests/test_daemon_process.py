"""`kb daemon` as users run it: real processes, signals, a second daemon on one database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kb.config import Config, load_config
from kb.container import open_store
from kb.indexing.verify import verify
from kb.store import Store
from support.configs import write_config
from support.daemons import FAST, wait_for


class KbDaemon:
    """One `kb daemon` process; its log goes to a file (a pipe could fill up and block it)."""

    def __init__(self, config: Path, db_url: str, log: Path) -> None:
        self.log_path = log
        env = {**os.environ, "KB_DATABASE_URL": db_url}
        with log.open("w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kb", "--config", str(config), "daemon"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)


@pytest.fixture
def daemon_setup(tmp_path: Path, vault: Path, db_url: str) -> Iterator[tuple[Path, Config, Store]]:
    path = write_config(tmp_path / "kb.toml", vault, llm={"embed_model": "hash-8"}, daemon=FAST)
    config = load_config(path, env={})
    with open_store(db_url) as store:
        yield path, config, store


@pytest.fixture
def daemons() -> Iterator[list[KbDaemon]]:
    started: list[KbDaemon] = []
    yield started
    for d in started:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait(30)


def _start(
    daemon_setup: tuple[Path, Config, Store], db_url: str, started: list[KbDaemon], role: str
) -> KbDaemon:
    """Start a daemon and wait until it reports the role it should take."""
    config_path, _, store = daemon_setup
    d = KbDaemon(config_path, db_url, config_path.parent / f"daemon-{len(started)}.log")
    started.append(d)
    wait_for(lambda: _role(store, d.pid) == role, f"the new daemon to be a {role}")
    return d


def _role(store: Store, pid: int) -> str | None:
    rows = [d for d in store.daemons.listed() if d.pid == pid and d.alive]
    return rows[0].role if rows else None


def _in_sync(config: Config, store: Store) -> bool:
    return verify(config, store.documents).in_sync


def test_second_daemon_is_a_standby_and_takes_over(
    daemon_setup: tuple[Path, Config, Store], db_url: str, vault: Path, daemons: list[KbDaemon]
) -> None:
    config_path, config, store = daemon_setup
    first = _start(daemon_setup, db_url, daemons, "writer")
    second = _start(daemon_setup, db_url, daemons, "standby")
    wait_for(lambda: _in_sync(config, store), "the index to equal the vault")

    (vault / "Inbox/First.md").write_text("# First\n\nwritten while the first daemon runs\n")
    wait_for(lambda: _in_sync(config, store), "the first daemon to index the note")

    status = subprocess.run(
        [sys.executable, "-m", "kb", "--config", str(config_path), "status", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "KB_DATABASE_URL": db_url},
        timeout=120,
    )
    report = json.loads(status.stdout)
    roles = {d["pid"]: (d["role"], d["alive"]) for d in report["daemons"]}
    assert roles == {first.pid: ("writer", True), second.pid: ("standby", True)}
    assert report["last_reconcile"]["reason"] == "start-up"

    first.proc.kill()  # no clean exit: the lock goes with its connection
    first.proc.wait(30)
    wait_for(lambda: _role(store, second.pid) == "writer", "the standby to take over")
    (vault / "Inbox/Second.md").write_text("# Second\n\nwritten after the takeover\n")
    os.rename(vault / "Reference", vault / "Library")
    wait_for(lambda: _in_sync(config, store), "the second daemon to catch up")

    assert second.stop() == 0
    standby_part = second.log().split("writer lock acquired")[0]
    assert "standby: another daemon is the writer" in standby_part
    assert "msg=indexed" not in standby_part and "reconciliation" not in standby_part
    assert 'msg="daemon stopped"' in second.log()
    # The clean exit removed its row; the killed daemon's row stays, and soon looks dead.
    assert [d.pid for d in store.daemons.listed()] == [first.pid]
    wait_for(lambda: not store.daemons.listed()[0].alive, "the killed daemon to look dead")


def test_sigterm_in_the_middle_of_a_burst_then_restart_converges(
    daemon_setup: tuple[Path, Config, Store], db_url: str, vault: Path, daemons: list[KbDaemon]
) -> None:
    _, config, store = daemon_setup
    first = _start(daemon_setup, db_url, daemons, "writer")
    wait_for(lambda: _in_sync(config, store), "the start-up reconciliation")
    before = len(store.documents.states("v"))
    burst = vault / "Burst"
    burst.mkdir()
    for i in range(3000):
        (burst / f"n{i:04d}.md").write_text(f"# Burst {i}\n\nword{i} burst\n")
    wait_for(lambda: len(store.documents.states("v")) > before + 100, "the burst to be under way")

    sent = time.monotonic()
    assert first.stop(signal.SIGTERM) == 0
    took = time.monotonic() - sent
    assert took < 10, f"SIGTERM took {took:.1f}s"
    log = first.log()
    assert "msg=stopping signal=SIGTERM" in log and "abandoned=False" in log
    assert len(store.documents.states("v")) < before + 3000, "the burst was not interrupted"

    second = _start(daemon_setup, db_url, daemons, "writer")
    wait_for(lambda: _in_sync(config, store), "a restarted daemon to converge", timeout=300)
    assert len(store.documents.states("v")) == before + 3000
    assert second.stop() == 0


def test_a_killed_daemon_looks_dead_at_once(
    tmp_path: Path, vault: Path, db_url: str, daemons: list[KbDaemon]
) -> None:
    # The default heartbeat: a stale heartbeat alone would take 15 s to tell.
    path = write_config(
        tmp_path / "kb.toml",
        vault,
        llm={"embed_model": "hash-8"},
        daemon={**FAST, "heartbeat": 5.0},
    )
    config = load_config(path, env={})
    with open_store(db_url) as store:
        writer = _start((path, config, store), db_url, daemons, "writer")
        writer.proc.kill()
        writer.proc.wait(30)
        killed = time.monotonic()
        wait_for(lambda: not store.daemons.listed()[0].alive, "the killed daemon to look dead", 10)
        assert time.monotonic() - killed < 3
        status = subprocess.run(
            [sys.executable, "-m", "kb", "--config", str(path), "status"],
            capture_output=True,
            text=True,
            env={**os.environ, "KB_DATABASE_URL": db_url},
            timeout=120,
        )
        assert "daemon       not running" in status.stdout
