"""`kb daemon`: keep the index equal to the vaults while they change.

Four kinds of threads:

- watchdog's, where the Recorder only records changed paths in the Debouncer;
- the writer (`kb.daemon.writer`), the only one that writes notes: it syncs the Scope of
  the paths that are due, or runs a full reconciliation when one was asked for;
- the background worker (`kb.indexing.worker`): it embeds the texts of queued notes, then
  (unless `enrich.in_daemon` is off) writes their LLM context, beside any `kb worker`
  processes, whether this daemon writes or stands by;
- the main thread (`run`): the writer lock, the heartbeat, and the checks that ask for a
  reconciliation (the interval, a dead observer, a replaced vault folder), when the
  schedule (`kb.daemon.schedule`) says they are due. Signals only set the stop event.

Only the holder of the writer lock (a session advisory lock, see store.WriterLock) watches
and writes; another daemon on the same database waits as a standby and takes over when the
lock is freed. Losing the lock's connection stops all writing until it is taken again,
and taking it always starts with a full reconciliation, so nothing missed in between is
lost. Every write is one file's transaction, so stopping between two files (or abandoning
the one in hand) leaves the index consistent.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from kb.config import DaemonConfig, VaultConfig
from kb.daemon.schedule import Schedule, UnreadableFolders
from kb.daemon.watcher import Debouncer, OverflowAlarm, Watcher
from kb.daemon.writer import TICK, Activity, Reconciliations, Writer
from kb.db import first_line
from kb.errors import DatabaseError
from kb.indexing.indexer import Indexer
from kb.indexing.worker import Worker
from kb.logfmt import event
from kb.note_writing.events import FileEvent
from kb.store.lock import DaemonBeat, Role, WriterLock
from kb.store.queue import Speed
from kb.store.state import State

log = logging.getLogger("kb.daemon")


class IndexerFactory(Protocol):
    """Builds the indexer the daemon writes with, its hooks bound to the daemon (which
    exists only once the indexer is asked for)."""

    def __call__(
        self, *, on_event: Callable[[FileEvent], None], checkpoint: Callable[[], None]
    ) -> Indexer: ...


def writer_vaults(vaults: Sequence[VaultConfig]) -> list[str]:
    """What a daemon's writer lock is keyed by: each vault's name with its folder. Two
    configurations giving one name to two folders are two sets of vaults, each with its own
    writer: keyed by names alone, the one whose sync is refused would hold the lock, and
    the other's daemon would stand by for good."""
    return [f"{v.name}\0{v.folder}" for v in vaults]


class WorkerFactory(Protocol):
    """Builds the background worker of some speeds, stopped with the daemon."""

    def __call__(self, *, stop: threading.Event, speeds: Sequence[Speed]) -> Worker: ...


class Daemon:
    """The daemon's main thread and the threads it starts; `clock` (seconds, monotonic) is
    what its schedule, the writer's pauses and its lock checks read. Of the config it is
    handed its own section, the vaults it watches and whether the LLM context is written
    here (`enrich_here`: enrichment on and not left to workers elsewhere); of the store,
    `state`, where its syncs are recorded, and the database's URL, on which its writer
    lock holds a session of its own."""

    def __init__(
        self,
        settings: DaemonConfig,
        *,
        vaults: Sequence[VaultConfig],
        enrich_here: bool,
        state: State,
        database_url: str,
        indexer: IndexerFactory,
        worker: WorkerFactory,
        stop: threading.Event | None = None,
        daemon_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.vaults = tuple(vaults)
        self.stop_event = stop or threading.Event()
        self.host = socket.gethostname()
        self.id = daemon_id or f"{self.host}:{os.getpid()}"
        self.role: Role = "starting"
        self.activity = Activity()
        self.reconciliations = Reconciliations()
        self.debouncer = Debouncer(
            quiet=self.settings.debounce,
            max_delay=self.settings.max_delay,
            max_pending=self.settings.max_pending,
            on_overflow=lambda: self.request_reconcile("too many pending changes"),
            clock=clock,
        )
        # The indexer's hooks are the writer's, which is made with the indexer.
        self.indexer = indexer(
            on_event=lambda file: self.writer.file_event(file),
            checkpoint=lambda: self.writer.checkpoint(),
        )
        # Vectors are embedded here always (a note is found by its meaning only then); the
        # LLM context unless workers elsewhere are to write it.
        enriching = enrich_here and self.indexer.enrich
        self.enrichment = worker(
            stop=self.stop_event, speeds=("embed", "enrich") if enriching else ("embed",)
        )
        self._enriching: threading.Thread | None = None
        self.lock = WriterLock(database_url, writer_vaults(self.vaults))
        self._writable = threading.Event()
        self._worker: threading.Thread | None = None
        self.watcher: Watcher | None = None
        self._db_down = False
        self._turns = 0
        # Every timer reads this clock: the schedule (kb.daemon.schedule) decides on its
        # readings alone.
        self.clock = clock
        self.unreadable = UnreadableFolders(ceiling=self.settings.reconcile_interval)
        self.writer = Writer(
            vaults=self.vaults,
            debouncer=self.debouncer,
            reconciliations=self.reconciliations,
            unreadable=self.unreadable,
            activity=self.activity,
            state=state,
            lock=self.lock,
            writable=self._writable,
            stop=self.stop_event,
            clock=clock,
            indexer=self.indexer,
        )

    # -- control -----------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the daemon to finish the file in hand and return from run()."""
        self.stop_event.set()

    def request_reconcile(self, reason: str) -> None:
        """Ask for a full reconciliation (safe from any thread, including watchdog's)."""
        self.reconciliations.ask(reason)

    @property
    def idle(self) -> bool:
        """Nothing queued, in hand, or asked for: the index is as current as the events say."""
        if self.reconciliations.pending:
            return False
        return self._writable.is_set() and len(self.debouncer) == 0

    @property
    def last_error(self) -> str | None:
        return self.activity.last_error

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
            vaults=",".join(v.name for v in self.vaults),
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
                    self.activity.last_error = first_line(exc)
                    event(
                        log,
                        "daemon error: retrying",
                        logging.ERROR,
                        error=f"{type(exc).__name__}: {self.activity.last_error}",
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
            self.activity.doing = "waiting for the writer lock"
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
            self.vaults, self.debouncer.add, polling=self.settings.polling
        )
        alarm = OverflowAlarm(lambda: self.request_reconcile("watcher overflow"))
        with alarm.installed():
            try:
                # Watching starts before the catch-up scan, so no change falls between the two.
                watcher.start()
                self._writable.set()
                self._start_writer()
                self._supervise(watcher)
            finally:
                self._writable.clear()
                watcher.stop()
                self._join_worker()

    def _supervise(self, watcher: Watcher) -> None:
        schedule = Schedule.starting(self.settings, self.clock(), _draw())
        while not self.stop_event.is_set():
            now = self.clock()
            schedule, due = schedule.due(now, _draw())
            # The worker may have found the lock gone first (it clears _writable).
            checked = "beat" in due
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
            if problem := watcher.problem():
                event(log, "restarting the watcher", logging.WARNING, reason=problem)
                watcher.restart()
                self.request_reconcile(problem)
            if "reconcile" in due:
                self.request_reconcile("interval")
            if self.unreadable.due(now):
                self.request_reconcile("unreadable folder")
            if self._worker is not None and not self._worker.is_alive():
                # The worker catches everything; this is the last line of defence.
                event(log, "worker thread died: restarting it", logging.ERROR)
                self.request_reconcile("worker restarted")
                self._start_writer()
            self.stop_event.wait(TICK)

    def _start_writer(self) -> None:
        self._worker = threading.Thread(target=self.writer.run, name="kb-worker", daemon=True)
        self._worker.start()

    def _join_worker(self) -> None:
        """Wait for the worker to stop between two files; on shutdown, for shutdown_grace only."""
        worker = self._worker
        if worker is None:
            return
        grace_end: float | None = None
        while worker.is_alive():
            if self.stop_event.is_set():
                grace_end = grace_end or self.clock() + self.settings.shutdown_grace
                if self.clock() >= grace_end:
                    event(
                        log,
                        "abandoning the file in hand: its transaction is rolled back",
                        logging.WARNING,
                    )
                    return
            worker.join(TICK)

    def _beat(self) -> None:
        try:
            self.lock.beat(
                DaemonBeat(
                    id=self.id,
                    host=self.host,
                    pid=os.getpid(),
                    role=self.role,
                    activity=self.activity.doing,
                    queue_length=len(self.debouncer),
                    heartbeat_interval=self.settings.heartbeat,
                    last_error=self.activity.last_error,
                    vaults=tuple(v.name for v in self.vaults),
                    folders=tuple(v.folder for v in self.vaults),
                )
            )
        except DatabaseError as exc:
            self._database_down(str(exc))

    def _database_down(self, message: str) -> None:
        if not self._db_down:
            self._db_down = True
            self.activity.doing = "waiting for the database"
            event(log, "database unreachable: retrying", logging.ERROR, error=message)

    def _database_up(self) -> None:
        if self._db_down:
            self._db_down = False
            event(log, "database reachable again")


def _draw() -> float:
    """The jitter of a reconciliation interval: uniform in [-1, 1]."""
    return random.uniform(-1, 1)
