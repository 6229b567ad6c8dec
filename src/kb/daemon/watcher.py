"""Watching vaults: record which paths changed, and hand them out once they settle.

The watchdog handler (Recorder) only records vault-relative paths, a trailing "/"
marking a folder, and never raises: an exception would kill watchdog's dispatcher
thread and every later event would be lost. What a path's event *was* does not
matter: the worker re-reads the path and decides from what is on disk then.

The Debouncer holds those paths until they have been quiet for a while (an editor's
save is several events), but never longer than a maximum delay, and never more of
them than a bound: past it, it drops them all and asks for a full reconciliation.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from watchdog.events import (
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from kb.config import VaultConfig
from kb.vault import obsidian
from kb.vault.notes import is_note

log = logging.getLogger("kb.watcher")

# Where watchdog >= 7.1 reports a kernel queue overflow; a log record is its only signal.
OVERFLOW_LOGGER = "watchdog.observers.inotify_c"
# A polling observer stats every file each round: not too often on a large network share.
POLLING_INTERVAL = 5.0

# Opened, closed-without-write and attribute events (our own reads, `touch`) are not
# subscribed to; a folder's "modified" only says its listing changed, which the events
# of its files already say.
_EVENT_FILTER = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileClosedEvent,
    FileMovedEvent,
    FileDeletedEvent,
    DirCreatedEvent,
    DirMovedEvent,
    DirDeletedEvent,
]
_FILE_EVENTS = {
    EVENT_TYPE_CREATED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_MOVED,
    EVENT_TYPE_DELETED,
}
_FOLDER_EVENTS = {EVENT_TYPE_CREATED, EVENT_TYPE_MOVED, EVENT_TYPE_DELETED}


class Sink(Protocol):
    """Where a vault's changed paths go (the daemon's debouncer)."""

    def __call__(self, vault: str, *keys: str) -> None: ...


class Recorder(FileSystemEventHandler):
    """The watchdog handler of one vault: passes each changed note or folder to a sink."""

    def __init__(self, vault: VaultConfig, sink: Sink) -> None:
        self.vault = vault
        self.sink = sink
        # Some platforms (macOS FSEvents) report the resolved path of a symlinked vault.
        self._roots = {os.fspath(vault.path), os.path.realpath(vault.path)}

    def dispatch(self, event: FileSystemEvent) -> None:
        try:
            kinds = _FOLDER_EVENTS if event.is_directory else _FILE_EVENTS
            if event.event_type not in kinds:
                return
            # A move's two ends go in together, so they fall due together and the indexer
            # sees a move, never a delete and then a new note that must be embedded again.
            keys = [
                key
                for path in (event.src_path, event.dest_path)
                if path and (key := self._key(os.fsdecode(path), folder=event.is_directory))
            ]
            if keys:
                self.sink(self.vault.name, *keys)
        except Exception:
            with contextlib.suppress(Exception):
                log.exception("ignored an event that could not be recorded: %r", event)

    def _key(self, path: str, *, folder: bool) -> str | None:
        rel = self._relative(path)
        if not rel:
            return None  # outside the vault (a move's far end), or the root itself
        if not folder and obsidian.is_settings_file(rel):
            return rel  # the vault's Obsidian settings: the daemon reconciles the vault
        if folder:
            key = rel + "/"
            return None if self.vault.is_ignored(key) else key
        # Attachments, swap, backup and temporary files are not notes.
        return rel if is_note(self.vault, rel) else None

    def _relative(self, path: str) -> str | None:
        path = os.path.normpath(path)
        for root in self._roots:
            if path.startswith(root + os.sep):
                return path[len(root) + 1 :].replace(os.sep, "/")
        return None


class OverflowAlarm(logging.Handler):
    """Calls back when watchdog logs that the kernel dropped events."""

    def __init__(self, on_overflow: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self.on_overflow = on_overflow

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if "overflow" in record.getMessage().lower():
                self.on_overflow()
        except Exception:
            self.handleError(record)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        logger = logging.getLogger(OVERFLOW_LOGGER)
        if not logger.isEnabledFor(logging.WARNING):
            logger.setLevel(logging.WARNING)
        logger.addHandler(self)
        try:
            yield
        finally:
            logger.removeHandler(self)


@dataclass
class _Pending:
    first: float
    last: float


@dataclass(frozen=True)
class Due:
    vault: str
    key: str  # a note's path, or a folder's ending in "/"
    settled: bool  # quiet for the whole debounce; False when forced out by the maximum delay


class Debouncer:
    """Changed paths, each waiting for quiet (or the maximum delay) before it is due.

    A pending folder stands for everything under it, so a folder move or an rmtree is one
    entry, however many events its files produce.
    """

    def __init__(
        self,
        *,
        quiet: float,
        max_delay: float,
        max_pending: int,
        on_overflow: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet = quiet
        self.max_delay = max_delay
        self.max_pending = max_pending
        self.on_overflow = on_overflow
        self.clock = clock
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._in_hand = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Paths waiting, plus those handed out by take_due() and not yet done()."""
        with self._lock:
            return len(self._pending) + self._in_hand

    def add(self, vault: str, *keys: str) -> None:
        """Paths changed at one moment: under one clock reading, they fall due together."""
        with self._lock:
            now = self.clock()
            for key in keys:
                self._add(vault, key, now)

    def _add(self, vault: str, key: str, now: float) -> None:
        covering = self._covering_folder(vault, key)
        if covering is not None:
            covering.last = now
            return
        first = now
        if key.endswith("/"):
            under = [k for k in self._pending if k[0] == vault and k[1].startswith(key)]
            for k in under:
                first = min(first, self._pending.pop(k).first)
        elif (vault, key) in self._pending:
            self._pending[(vault, key)].last = now
            return
        if len(self._pending) >= self.max_pending:
            # Memory stays bounded; a full reconciliation finds whatever was dropped.
            self._pending.clear()
            self.on_overflow()
        self._pending[(vault, key)] = _Pending(first, now)

    def _covering_folder(self, vault: str, key: str) -> _Pending | None:
        """The pending entry of `key` itself if it is a folder, or of a folder above it."""
        parts = key.rstrip("/").split("/")
        for depth in range(1, len(parts) + (1 if key.endswith("/") else 0)):
            entry = self._pending.get((vault, "/".join(parts[:depth]) + "/"))
            if entry is not None:
                return entry
        return None

    def take_due(self, timeout: float) -> list[Due]:
        """Remove and return the paths that are due, waiting up to `timeout` for some.

        Adding never wakes this up: a new path is not due before a quiet period, and the
        caller's short timeout bounds the lateness, so a burst costs no wake-up per event.
        """
        # What is due reads `clock`; how long to wait reads the wall's: on a test's stepped
        # clock the caller still gets its answer within `timeout` seconds.
        end = time.monotonic() + timeout
        while True:
            with self._lock:
                now = self.clock()
                due = []
                next_due = math.inf
                for (vault, key), p in self._pending.items():
                    settled = now - p.last >= self.quiet
                    if settled or now - p.first >= self.max_delay:
                        due.append(Due(vault, key, settled))
                    else:
                        next_due = min(next_due, p.last + self.quiet, p.first + self.max_delay)
                for d in due:
                    del self._pending[(d.vault, d.key)]
                self._in_hand = len(due)
            left = end - time.monotonic()
            if due or left <= 0:
                return due
            time.sleep(min(left, max(0.0, next_due - now)))

    def done(self) -> None:
        """The paths last handed out are dealt with (indexed, or put back with add())."""
        with self._lock:
            self._in_hand = 0

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()


class Watcher:
    """One observer over every vault, and the checks that say it must be rebuilt."""

    def __init__(self, vaults: tuple[VaultConfig, ...], sink: Sink, *, polling: bool) -> None:
        self.vaults = vaults
        self.sink = sink
        self.polling = polling
        self.observer: BaseObserver | None = None
        self._roots: dict[str, tuple[int, int] | None] = {}

    def start(self) -> None:
        self._roots = {v.name: _identity(v) for v in self.vaults}
        try:
            self.observer = self._start(polling=self.polling)
        except OSError as exc:
            # Out of inotify watches or instances (ENOSPC, EMFILE): polling still works.
            log.error(
                "cannot watch with inotify (%s): polling instead; raise "
                "fs.inotify.max_user_watches / max_user_instances to fix it",
                exc.strerror or exc,
            )
            self.observer = self._start(polling=True)

    def _start(self, *, polling: bool) -> BaseObserver:
        observer = PollingObserver(timeout=POLLING_INTERVAL) if polling else Observer()
        for vault in self.vaults:
            if self._roots[vault.name] is not None:
                observer.schedule(
                    Recorder(vault, self.sink),
                    os.fspath(vault.path),
                    recursive=True,
                    event_filter=_EVENT_FILTER,
                )
        try:
            observer.start()
        except BaseException:
            observer.stop()
            raise
        return observer

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.stop()
            # join() can be slow (watchdog #857); the threads are daemons anyway.
            self.observer.join(timeout=2)
            self.observer = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def problem(self) -> str | None:
        """Why the observer must be rebuilt (and the vaults reconciled), if it must."""
        observer = self.observer
        if observer is None or not observer.is_alive():
            return "observer thread died"
        if not all(emitter.is_alive() for emitter in observer.emitters):
            return "watch thread died"
        for vault in self.vaults:
            if _identity(vault) != self._roots.get(vault.name):
                return f"vault '{vault.name}' folder replaced"
        return None


def _identity(vault: VaultConfig) -> tuple[int, int] | None:
    """The vault root's device and inode (None if missing): a change means a new folder."""
    try:
        st = os.stat(vault.path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if os.path.isdir(vault.path) else None
