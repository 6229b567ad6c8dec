"""The daemon's writing thread: the only one that writes notes.

It syncs the paths the watcher's debouncer says are due, or runs a full reconciliation when
one was asked for, as long as the daemon holds the writer lock; an error it cannot fix puts
the work back and pauses it (kb.daemon.schedule.backoff). Which paths it syncs and which
wait is `sort_due`, a pure decision over the due paths.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

from kb.config import VaultConfig
from kb.daemon.schedule import UnreadableFolders, backoff
from kb.daemon.watcher import Debouncer, Due
from kb.db import first_line
from kb.errors import DatabaseError, Interrupted, LockLost
from kb.indexing.indexer import Indexer
from kb.logfmt import event
from kb.note_writing.events import FileEvent, SyncReport
from kb.store import Reconciliation
from kb.store.lock import WriterLock
from kb.store.state import State
from kb.vault import obsidian
from kb.vault.notes import Scope

log = logging.getLogger("kb.daemon")

# How often the writer looks around (seconds): bounds how late a stop, a due path or a lost
# lock is noticed.
TICK = 0.25
# The writer re-checks that the daemon still holds the writer lock at most this often
# (seconds), so a daemon that lost it stops writing within about that long. A write that
# slips through in that window is harmless: each is one file's idempotent transaction.
LOCK_CHECK = 1.0


@dataclass
class Activity:
    """What the daemon is doing and its last error, as its heartbeat reports them; set by
    the thread doing it (a string assignment, read whole by the other)."""

    doing: str = "starting"
    last_error: str | None = None


class Reconciliations:
    """Why a full reconciliation is asked for (from any thread, watchdog's too), and whether
    one is in hand."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reasons: set[str] = set()
        self._in_hand = False

    def ask(self, reason: str) -> None:
        with self._lock:
            self._reasons.add(reason)

    def take(self) -> list[str]:
        """The reasons asked for since the last take, sorted; a reconciliation is in hand
        until `done` when there are any."""
        with self._lock:
            reasons = sorted(self._reasons)
            self._reasons.clear()
            self._in_hand = bool(reasons)
        return reasons

    def done(self) -> None:
        with self._lock:
            self._in_hand = False

    @property
    def pending(self) -> bool:
        """Asked for, or in hand."""
        with self._lock:
            return bool(self._reasons) or self._in_hand


@dataclass(frozen=True)
class Sorted:
    """The due paths of one vault: what to sync now, what waits, and the settings files
    whose change asks for a reconciliation."""

    files: frozenset[str] = frozenset()
    folders: frozenset[str] = frozenset()
    waiting: tuple[Due, ...] = ()
    settings: tuple[str, ...] = ()


def sort_due(due: Sequence[Due], exists: Callable[[str], bool]) -> Sorted:
    """Sort one vault's due paths; `exists` says whether a path is there right now."""
    files: set[str] = set()
    folders: set[str] = set()
    waiting: list[Due] = []
    settings: list[str] = []
    for d in due:
        if obsidian.is_settings_file(d.key):
            # A settings change is a config change: the whole vault is looked at, and only
            # the notes it shapes are rebuilt.
            settings.append(d.key)
        elif not d.settled and not exists(d.key):
            # Still changing and missing right now: an editor may be half-way through a
            # save (vim moves the note away first). Wait for quiet.
            waiting.append(d)
        else:
            (folders if d.key.endswith("/") else files).add(d.key)
    return Sorted(frozenset(files), frozenset(folders), tuple(waiting), tuple(settings))


@dataclass
class Writer:
    """The writing thread's loop (`run`) and the checkpoint the indexer calls between
    files. `writable` is set while the daemon holds the writer lock; the writer clears it
    when it finds the lock gone."""

    vaults: Sequence[VaultConfig]
    debouncer: Debouncer
    reconciliations: Reconciliations
    unreadable: UnreadableFolders
    activity: Activity
    state: State
    lock: WriterLock
    writable: threading.Event
    stop: threading.Event
    clock: Callable[[], float]
    indexer: Indexer
    _lock_checked: float = field(default=0.0, init=False)

    def checkpoint(self) -> None:
        """Raise Interrupted on a stop and LockLost once the writer lock is gone."""
        if self.stop.is_set():
            raise Interrupted("shutting down")
        now = self.clock()
        if self.writable.is_set() and now - self._lock_checked >= LOCK_CHECK:
            self._lock_checked = now
            if not self.lock.held():
                self.writable.clear()  # the main thread notices at its next heartbeat
        if not self.writable.is_set():
            raise LockLost("writer lock lost")

    def run(self) -> None:
        pause = 0.0
        while True:
            due: list[Due] = []
            reasons: list[str] = []
            try:
                self.checkpoint()
                reasons = self.reconciliations.take()
                if reasons:
                    self._reconcile(reasons)
                else:
                    self.activity.doing = "watching"
                    due = self.debouncer.take_due(TICK)
                    if not due:
                        continue
                    self._process(due)
                # Only work that went through clears an error.
                pause = 0.0
                self.activity.last_error = None
            except Interrupted:
                return
            except Exception as exc:
                # A dead LLM server, a lost database, or a bug: nothing is lost (the paths go
                # back in the queue, the reconciliation is asked for again) and we retry.
                self.activity.last_error = first_line(exc)
                pause = backoff(pause)
                event(
                    log,
                    "work failed: retrying",
                    logging.ERROR,
                    error=f"{type(exc).__name__}: {self.activity.last_error}",
                    retry_in=pause,
                )
                for reason in reasons:
                    self.reconciliations.ask(reason)
                for d in due:
                    self.debouncer.add(d.vault, d.key)
                if isinstance(exc, DatabaseError | psycopg.Error):
                    self.reconciliations.ask("database back")
                self.activity.doing = "retrying after an error"
            finally:
                self.debouncer.done()
                self.reconciliations.done()
            if pause:
                try:
                    self._pause(pause)
                except Interrupted:
                    return

    def _pause(self, seconds: float) -> None:
        end = self.clock() + seconds
        while (left := end - self.clock()) > 0:
            self.checkpoint()
            self.stop.wait(min(TICK, left))

    def _process(self, due: Sequence[Due]) -> None:
        by_vault: dict[str, list[Due]] = defaultdict(list)
        for d in due:
            by_vault[d.vault].append(d)
        for vault in self.vaults:
            items = by_vault.get(vault.name)
            if not items or not vault.path.is_dir():
                continue  # a missing vault folder is the watcher's to report, never a delete
            paths = sort_due(items, partial(_exists, vault.path))
            for key in paths.settings:
                self.reconciliations.ask(f"{vault.name}: {key} changed")
            for d in paths.waiting:
                self.debouncer.add(d.vault, d.key)
            if paths.files or paths.folders:
                self.activity.doing = (
                    f"indexing {len(paths.files) + len(paths.folders)} changed paths"
                )
                self.indexer.sync_scope(vault, Scope(paths.files, paths.folders))
        self.unreadable.scoped(self.clock())

    def _reconcile(self, reasons: list[str]) -> None:
        reason = ", ".join(reasons)
        vaults = []
        for vault in self.vaults:
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
        self.activity.doing = "reconciling"
        event(log, "reconciliation started", reason=reason)
        started = self.clock()
        self.unreadable.reconciling()
        report = self.indexer.sync(vaults=vaults)
        seconds = round(self.clock() - started, 3)
        for vault_name, path in self.unreadable.reconciled({v.name for v in vaults}, self.clock()):
            event(log, "folder readable again", vault=vault_name, path=path)
        event(log, "reconciliation done", reason=reason, seconds=seconds, **_counts(report))
        self.state.reconciled(
            Reconciliation(
                at=dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
                reason=reason,
                seconds=seconds,
                **_counts(report),
            )
        )

    def file_event(self, file: FileEvent) -> None:
        """What the indexer did with a file, logged (an unreadable folder once, until it can
        be read again)."""
        if file.action == "unchanged":
            return
        if file.action == "unlistable":
            if self.unreadable.met((file.vault, file.path)):
                event(
                    log,
                    "cannot read a folder: the notes indexed under it are kept",
                    logging.WARNING,
                    vault=file.vault,
                    path=file.path,
                    error=file.error,
                )
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


def _exists(root: Path, key: str) -> bool:
    return os.path.lexists(os.path.join(root, key))


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
