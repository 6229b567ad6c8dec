"""`kb daemon`: keep the index equal to the vaults while they change.

Four kinds of threads:

- watchdog's, where the Recorder only records changed paths in the Debouncer;
- the worker, the only one that writes notes: it syncs the Scope of the paths that are
  due, or runs a full reconciliation when one was asked for;
- the background worker (`kb.indexing.worker`): it embeds the texts of queued notes, then
  (unless `enrich.in_daemon` is off) writes their LLM context, beside any `kb worker`
  processes, whether this daemon writes or stands by;
- the main thread (`run`): the writer lock, the heartbeat, and the checks that ask for a
  reconciliation (the interval, a dead observer, a replaced vault folder). Signals only
  set the stop event.

Only the holder of the writer lock (a session advisory lock, see store.WriterLock) watches
and writes; another daemon on the same database waits as a standby and takes over when the
lock is freed. Losing the lock's connection stops all writing until it is taken again,
and taking it always starts with a full reconciliation, so nothing missed in between is
lost. Every write is one file's transaction, so stopping between two files (or abandoning
the one in hand) leaves the index consistent.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import random
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import psycopg

from kb import obsidian
from kb.config import Config
from kb.daemon.watcher import Debouncer, Due, OverflowAlarm, Watcher
from kb.db import first_line
from kb.errors import DatabaseError, Interrupted, LockLost
from kb.indexing.events import FileEvent, SyncReport
from kb.indexing.indexer import Indexer
from kb.indexing.worker import Worker
from kb.logfmt import event
from kb.notes import Scope
from kb.store import Reconciliation, Store
from kb.store.lock import DaemonBeat, Role, WriterLock
from kb.store.queue import Speed

log = logging.getLogger("kb.daemon")

# How often the main thread and the worker look around (seconds): bounds how late a stop,
# a due path or a lost lock is noticed.
TICK = 0.25
# The worker re-checks that it still holds the writer lock at most this often (seconds), so
# a daemon that lost it stops writing within about that long. A write that slips through in
# that window is harmless: each is one file's idempotent transaction.
LOCK_CHECK = 1.0
# Back-off after an error the worker cannot fix itself (a dead LLM server, say), seconds.
MIN_BACKOFF = 2.0
MAX_BACKOFF = 300.0
# A vault folder that cannot be read is reconciled again after this long (seconds), then
# twice as long each time, up to the reconciliation interval: a privacy prompt is answered
# within seconds, a folder made private may stay so for good.
UNREADABLE_RETRY = 5.0


class IndexerFactory(Protocol):
    """Builds the indexer the daemon writes with, its hooks bound to the daemon (which
    exists only once the indexer is asked for)."""

    def __call__(
        self, *, on_event: Callable[[FileEvent], None], checkpoint: Callable[[], None]
    ) -> Indexer: ...


class WorkerFactory(Protocol):
    """Builds the background worker of some speeds, stopped with the daemon."""

    def __call__(self, *, stop: threading.Event, speeds: Sequence[Speed]) -> Worker: ...


class Daemon:
    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        indexer: IndexerFactory,
        worker: WorkerFactory,
        stop: threading.Event | None = None,
        daemon_id: str | None = None,
    ) -> None:
        self.config = config
        self.settings = config.daemon
        self.store = store
        self.stop_event = stop or threading.Event()
        self.host = socket.gethostname()
        self.id = daemon_id or f"{self.host}:{os.getpid()}"
        self.role: Role = "starting"
        self.activity = "starting"
        self.last_error: str | None = None
        self.debouncer = Debouncer(
            quiet=self.settings.debounce,
            max_delay=self.settings.max_delay,
            max_pending=self.settings.max_pending,
            on_overflow=lambda: self.request_reconcile("too many pending changes"),
        )
        self.indexer = indexer(on_event=self._file_event, checkpoint=self._checkpoint)
        enrich = config.enrich
        # Vectors are embedded here always (a note is found by its meaning only then); the
        # LLM context unless workers elsewhere are to write it.
        enriching = enrich.enabled and enrich.in_daemon and self.indexer.enrich
        self.enrichment = worker(
            stop=self.stop_event, speeds=("embed", "enrich") if enriching else ("embed",)
        )
        self._enriching: threading.Thread | None = None
        self.lock = WriterLock(store.url, [v.name for v in config.vaults])
        self._writable = threading.Event()
        self._reasons: set[str] = set()
        self._reasons_lock = threading.Lock()
        self._reconciling = False
        self._worker: threading.Thread | None = None
        self.watcher: Watcher | None = None
        self._db_down = False
        self._turns = 0
        self._lock_checked = 0.0
        # (vault, folder) → why it cannot be read; kept by the worker, which also plans the
        # next look at them (the main thread asks for it when due).
        self._unreadable: dict[tuple[str, str], str] = {}
        self._seen_unreadable: set[tuple[str, str]] = set()
        self._retry_in = UNREADABLE_RETRY
        self._retry_at = math.inf

    # -- control -----------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the daemon to finish the file in hand and return from run()."""
        self.stop_event.set()

    def request_reconcile(self, reason: str) -> None:
        """Ask for a full reconciliation (safe from any thread, including watchdog's)."""
        with self._reasons_lock:
            self._reasons.add(reason)

    def _take_reasons(self) -> list[str]:
        with self._reasons_lock:
            reasons = sorted(self._reasons)
            self._reasons.clear()
            self._reconciling = bool(reasons)
        return reasons

    @property
    def idle(self) -> bool:
        """Nothing queued, in hand, or asked for: the index is as current as the events say."""
        with self._reasons_lock:
            if self._reasons or self._reconciling:
                return False
        return self._writable.is_set() and len(self.debouncer) == 0

    @property
    def abandoned(self) -> bool:
        """True when run() returned while a thread still had a file or a note in hand."""
        return any(t is not None and t.is_alive() for t in (self._worker, self._enriching))

    # -- the main thread ---------------------------------------------------------------------------

    def run(self) -> None:
        """Serve until stopped: as the writer when the lock is free, else as a standby."""
        event(
            log,
            "daemon started",
            id=self.id,
            vaults=",".join(v.name for v in self.config.vaults),
        )
        self._enriching = threading.Thread(target=self._enrich, name="kb-enrichment", daemon=True)
        self._enriching.start()
        try:
            while not self.stop_event.is_set():
                try:
                    if self._acquire():
                        self._serve()
                        continue
                except Exception as exc:
                    # The watcher or the database failing in a way not foreseen: stay alive.
                    self.last_error = first_line(exc)
                    event(
                        log,
                        "daemon error: retrying",
                        logging.ERROR,
                        error=f"{type(exc).__name__}: {self.last_error}",
                    )
                self.stop_event.wait(self.settings.heartbeat)
        finally:
            if self._enriching is not None:
                # The notes in hand may finish within the grace; past it, their leases run
                # out and another worker takes them.
                self._enriching.join(self.settings.shutdown_grace)
            if not self.abandoned:
                self.indexer.close()
            self.lock.leave(self.id)
            event(log, "daemon stopped", id=self.id, abandoned=self.abandoned)

    def _enrich(self) -> None:
        try:
            self.enrichment.run()
        except Exception as exc:
            # The worker catches what a note or a server throws at it; this is a bug.
            event(log, "enrichment stopped", logging.ERROR, error=f"{type(exc).__name__}: {exc}")

    def _acquire(self) -> bool:
        try:
            acquired = self.lock.try_acquire()
        except DatabaseError as exc:
            self._database_down(str(exc))
            return False
        self._database_up()
        if acquired:
            self.role = "writer"
            event(log, "writer lock acquired: watching and writing", id=self.id)
            return True
        if self.role != "standby":
            self.role = "standby"
            self.activity = "waiting for the writer lock"
            event(log, "standby: another daemon is the writer", id=self.id)
        self._beat()
        return False

    def _serve(self) -> None:
        """Watch and write until stopped or the lock is lost."""
        # The reconciliation below covers anything pending from an earlier turn.
        self.debouncer.clear()
        self.request_reconcile("lock taken again" if self._turns else "start-up")
        self._turns += 1
        self.watcher = watcher = Watcher(
            self.config.vaults, self.debouncer.add, polling=self.settings.polling
        )
        alarm = OverflowAlarm(lambda: self.request_reconcile("watcher overflow"))
        with alarm.installed():
            try:
                # Watching starts before the catch-up scan, so no change falls between the two.
                watcher.start()
                self._writable.set()
                self._worker = threading.Thread(target=self._work, name="kb-worker", daemon=True)
                self._worker.start()
                self._supervise(watcher)
            finally:
                self._writable.clear()
                watcher.stop()
                self._join_worker()

    def _supervise(self, watcher: Watcher) -> None:
        next_beat = 0.0
        next_reconcile = time.monotonic() + self._interval()
        while not self.stop_event.is_set():
            now = time.monotonic()
            # The worker may have found the lock gone first (it clears _writable).
            checked = now >= next_beat
            if not self._writable.is_set() or (checked and not self.lock.held()):
                event(
                    log,
                    "writer lock lost: writing stops until it is taken again",
                    logging.WARNING,
                    id=self.id,
                )
                self.role = "lost"
                return
            if checked:
                self._beat()
                next_beat = now + self.settings.heartbeat
            if problem := watcher.problem():
                event(log, "restarting the watcher", logging.WARNING, reason=problem)
                watcher.restart()
                self.request_reconcile(problem)
            if now >= next_reconcile:
                self.request_reconcile("interval")
                next_reconcile = now + self._interval()
            if now >= self._retry_at:
                self._retry_at = math.inf
                self.request_reconcile("unreadable folder")
            if self._worker is not None and not self._worker.is_alive():
                # The worker catches everything; this is the last line of defence.
                event(log, "worker thread died: restarting it", logging.ERROR)
                self.request_reconcile("worker restarted")
                self._worker = threading.Thread(target=self._work, name="kb-worker", daemon=True)
                self._worker.start()
            self.stop_event.wait(TICK)

    def _join_worker(self) -> None:
        """Wait for the worker to stop between two files; on shutdown, for shutdown_grace only."""
        worker = self._worker
        if worker is None:
            return
        grace_end: float | None = None
        while worker.is_alive():
            if self.stop_event.is_set():
                grace_end = grace_end or time.monotonic() + self.settings.shutdown_grace
                if time.monotonic() >= grace_end:
                    event(
                        log,
                        "abandoning the file in hand: its transaction is rolled back",
                        logging.WARNING,
                    )
                    return
            worker.join(TICK)

    def _interval(self) -> float:
        jitter = self.settings.reconcile_jitter
        return self.settings.reconcile_interval * (1 + random.uniform(-jitter, jitter))

    def _beat(self) -> None:
        try:
            self.lock.beat(
                DaemonBeat(
                    id=self.id,
                    host=self.host,
                    pid=os.getpid(),
                    role=self.role,
                    activity=self.activity,
                    queue_length=len(self.debouncer),
                    heartbeat_interval=self.settings.heartbeat,
                    last_error=self.last_error,
                )
            )
        except DatabaseError as exc:
            self._database_down(str(exc))

    def _database_down(self, message: str) -> None:
        if not self._db_down:
            self._db_down = True
            self.activity = "waiting for the database"
            event(log, "database unreachable: retrying", logging.ERROR, error=message)

    def _database_up(self) -> None:
        if self._db_down:
            self._db_down = False
            event(log, "database reachable again")

    # -- the worker --------------------------------------------------------------------------------

    def _checkpoint(self) -> None:
        if self.stop_event.is_set():
            raise Interrupted("shutting down")
        now = time.monotonic()
        if self._writable.is_set() and now - self._lock_checked >= LOCK_CHECK:
            self._lock_checked = now
            if not self.lock.held():
                self._writable.clear()  # the main thread notices at its next heartbeat
        if not self._writable.is_set():
            raise LockLost("writer lock lost")

    def _work(self) -> None:
        backoff = 0.0
        while True:
            due: list[Due] = []
            reasons: list[str] = []
            try:
                self._checkpoint()
                reasons = self._take_reasons()
                if reasons:
                    self._reconcile(reasons)
                else:
                    self.activity = "watching"
                    due = self.debouncer.take_due(TICK)
                    if not due:
                        continue
                    self._process(due)
                # Only work that went through clears an error.
                backoff = 0.0
                self.last_error = None
            except Interrupted:
                return
            except Exception as exc:
                # A dead LLM server, a lost database, or a bug: nothing is lost (the paths go
                # back in the queue, the reconciliation is asked for again) and we retry.
                self.last_error = first_line(exc)
                backoff = min(max(backoff * 2, MIN_BACKOFF), MAX_BACKOFF)
                event(
                    log,
                    "work failed: retrying",
                    logging.ERROR,
                    error=f"{type(exc).__name__}: {self.last_error}",
                    retry_in=backoff,
                )
                for reason in reasons:
                    self.request_reconcile(reason)
                for d in due:
                    self.debouncer.add(d.vault, d.key)
                if isinstance(exc, DatabaseError | psycopg.Error):
                    self.request_reconcile("database back")
                self.activity = "retrying after an error"
            finally:
                self.debouncer.done()
                with self._reasons_lock:
                    self._reconciling = False
            if backoff:
                try:
                    self._pause(backoff)
                except Interrupted:
                    return

    def _pause(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._checkpoint()
            time.sleep(min(TICK, end - time.monotonic()))

    def _process(self, due: Sequence[Due]) -> None:
        by_vault: dict[str, list[Due]] = defaultdict(list)
        for d in due:
            by_vault[d.vault].append(d)
        for vault in self.config.vaults:
            items = by_vault.get(vault.name)
            if not items or not vault.path.is_dir():
                continue  # a missing vault folder is the watcher's to report, never a delete
            files: set[str] = set()
            folders: set[str] = set()
            for d in items:
                if obsidian.is_settings_file(d.key):
                    # A settings change is a config change: the whole vault is looked at,
                    # and only the notes it shapes are rebuilt.
                    self.request_reconcile(f"{vault.name}: {d.key} changed")
                    continue
                if not d.settled and not os.path.lexists(os.path.join(vault.path, d.key)):
                    # Still changing and missing right now: an editor may be half-way
                    # through a save (vim moves the note away first). Wait for quiet.
                    self.debouncer.add(d.vault, d.key)
                    continue
                (folders if d.key.endswith("/") else files).add(d.key)
            if files or folders:
                self.activity = f"indexing {len(files) + len(folders)} changed paths"
                self.indexer.sync_scope(vault, Scope(frozenset(files), frozenset(folders)))
        if self._unreadable and self._retry_at == math.inf:
            self._retry_unreadable()

    def _reconcile(self, reasons: list[str]) -> None:
        reason = ", ".join(reasons)
        vaults = []
        for vault in self.config.vaults:
            if vault.path.is_dir():
                vaults.append(vault)
            else:
                event(
                    log,
                    "vault folder missing: its index is kept as it is",
                    logging.ERROR,
                    vault=vault.name,
                    path=str(vault.path),
                )
        self.activity = "reconciling"
        event(log, "reconciliation started", reason=reason)
        started = time.monotonic()
        self._seen_unreadable = set()
        report = self.indexer.sync(vaults=vaults)
        seconds = round(time.monotonic() - started, 3)
        self._readable_again({v.name for v in vaults})
        event(log, "reconciliation done", reason=reason, seconds=seconds, **_counts(report))
        self.store.state.reconciled(
            Reconciliation(
                at=dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
                reason=reason,
                seconds=seconds,
                **_counts(report),
            )
        )

    def _readable_again(self, reconciled: set[str]) -> None:
        """Forget the folders a reconciliation of their vault could read, and plan the next
        look at those it still cannot."""
        for key in readable_again(self._unreadable, self._seen_unreadable, reconciled):
            del self._unreadable[key]
            event(log, "folder readable again", vault=key[0], path=key[1])
        if self._unreadable:
            self._retry_unreadable()
        else:
            self._retry_in, self._retry_at = UNREADABLE_RETRY, math.inf

    def _retry_unreadable(self) -> None:
        self._retry_at = time.monotonic() + self._retry_in
        self._retry_in = min(self._retry_in * 2, self.settings.reconcile_interval)

    def _file_event(self, file: FileEvent) -> None:
        if file.action == "unchanged":
            return
        if file.action == "unlistable":
            key = (file.vault, file.path)
            self._seen_unreadable.add(key)
            if key not in self._unreadable:
                # Once, not at every look: it is retried until it can be read.
                event(
                    log,
                    "cannot read a folder: the notes indexed under it are kept",
                    logging.WARNING,
                    vault=file.vault,
                    path=file.path,
                    error=file.error,
                )
            self._unreadable[key] = file.error
            return
        fields: dict[str, Any] = {"vault": file.vault, "path": file.path}
        if file.action == "moved":
            fields["from"] = file.moved_from
        if file.action == "indexed":
            fields.update(chunks=file.chunks, llm_calls=file.llm_calls, embedded=file.embedded)
            if file.queued:
                fields["enrichment"] = "queued"
        if file.action == "failed":
            event(log, "failed", logging.WARNING, **fields, error=file.error)
        else:
            event(log, file.action, **fields)


def readable_again(
    unreadable: Iterable[tuple[str, str]], seen: set[tuple[str, str]], reconciled: set[str]
) -> list[tuple[str, str]]:
    """Of the (vault, folder) pairs once unreadable, those a reconciliation of the vaults
    `reconciled` read: not `seen` unreadable again, nor under a folder (or a vault's root,
    "") it could not read, where it never looked."""

    def looked_at(vault: str, path: str) -> bool:
        return not any(
            v == vault and p != path and (p == "" or p.endswith("/")) and path.startswith(p)
            for v, p in seen
        )

    return [k for k in unreadable if k[0] in reconciled and k not in seen and looked_at(*k)]


def _counts(report: SyncReport) -> dict[str, int]:
    return {
        "files": report.files,
        "indexed": report.indexed,
        "moved": report.moved,
        "deleted": report.deleted,
        "failed": report.failed,
        "unreadable": report.unlistable,
        "llm_calls": report.llm_calls,
    }
