"""The notes a sync indexes: read, prepared (kb.note_writing.preparing) and written in groups
by a pool of file threads, their events reported in the files' order, as the sync's write
plan says (kb.note_writing.write_plan: how each note is built, how many to a transaction).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psycopg

from kb import db
from kb.config import VaultConfig
from kb.db import first_line
from kb.errors import DatabaseError, Interrupted, KbError, LockLost, NoteError
from kb.note_writing.building import BuildMode
from kb.note_writing.events import Emit, FileEvent
from kb.note_writing.preparing import NotePreparer
from kb.note_writing.write_plan import WritePlan
from kb.store import NoteRows
from kb.store.documents import Documents
from kb.vault import sync_plan
from kb.vault.notes import OnDisk, read_note

log = logging.getLogger("kb.indexer")


class NoteWriter:
    """Indexes the notes a sync decided on, on its own pool of file threads."""

    def __init__(
        self,
        preparer: NotePreparer,
        documents: Documents,
        *,
        threads: int,
        checkpoint: Callable[[], None],
        database: tuple[str, Path],
    ) -> None:
        self.preparer = preparer
        self.documents = documents
        self.threads = threads
        # Called before each file and each write; it raises Interrupted to stop there.
        self.checkpoint = checkpoint
        self.database = database  # its URL and kb's data directory: what a full disk names
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="kb-file")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def index(
        self,
        vault: VaultConfig,
        files: Sequence[OnDisk],
        emit: Emit,
        plan: WritePlan,
    ) -> None:
        """Index `files` as `plan` says, in groups written by the file threads."""
        # A few groups ahead of the one reported: a large vault's events are let go of as
        # they are reported, not held to the end.
        ahead: deque[Future[list[FileEvent]]] = deque()
        try:
            for group in sync_plan.groups(files, plan.group, self.threads):
                ahead.append(self._pool.submit(self._index_group, vault, group, plan.mode))
                if len(ahead) > 2 * self.threads:
                    for event in ahead.popleft().result():
                        emit(event)
            while ahead:
                for event in ahead.popleft().result():
                    emit(event)
        except BaseException:
            for future in ahead:
                future.cancel()
            raise

    def _index_group(
        self, vault: VaultConfig, files: Sequence[OnDisk], mode: BuildMode
    ) -> list[FileEvent]:
        """Index some files, written together; their events in the files' order."""
        outcomes: list[tuple[FileEvent, NoteRows | None]] = []
        root = vault.folder
        try:
            for f in files:
                outcomes.append(self._prepare_guarded(vault, root, f, mode))
        finally:
            # The notes done before a stop or a dead model server are written all the same,
            # unless the writer lock is lost: another writer may own the index now.
            ready = [rows for _, rows in outcomes if rows is not None]
            if ready:
                try:
                    self.checkpoint()
                except LockLost:
                    raise
                except Interrupted:
                    pass  # a stop finishes the notes in hand
                with connection_needed(*self.database):
                    self.documents.save(ready)
        return [event for event, _ in outcomes]

    def _prepare_guarded(
        self, vault: VaultConfig, root: str, f: OnDisk, mode: BuildMode
    ) -> tuple[FileEvent, NoteRows | None]:
        try:
            self.checkpoint()
            data = read_note(vault, f.path, root=root)
            with connection_needed(*self.database):
                return self.preparer.prepare(
                    vault, f.path, data, size=len(data), mtime_ns=f.mtime_ns, mode=mode
                )
        except FileNotFoundError:
            # Deleted since it was listed (an editor's save dance, or a real delete).
            self.documents.delete(vault.name, [f.path])
            return FileEvent(vault.name, f.path, "deleted"), None
        except NoteError as exc:
            return failed(self.documents, vault, f.path, exc), None
        except (KbError, Interrupted):
            raise  # a dead LLM server or database, or a stop: no point trying the next file
        except Exception as exc:
            # A bug triggered by one note must not stop the others; it is recorded.
            log.debug("%s/%s failed", vault.name, f.path, exc_info=True)
            error = NoteError(f"{type(exc).__name__}: {exc}")
            return failed(self.documents, vault, f.path, error), None


def failed(documents: Documents, vault: VaultConfig, path: str, exc: Exception) -> FileEvent:
    """A note that cannot be indexed, recorded as failed (`kb status` lists it)."""
    message = str(exc)
    # Reported to the user through on_event (the CLI's summary, the daemon's log).
    log.debug("%s/%s: %s", vault.name, path, message)
    documents.record_failure(vault.name, path, message)
    return FileEvent(vault.name, path, "failed", error=message)


@contextmanager
def connection_needed(url: str, data_dir: Path) -> Iterator[None]:
    """A lost database connection, or a full disk under it, stops the run as a DatabaseError:
    it is no note's fault, and the next note would fail the same way."""
    try:
        yield
    except psycopg.OperationalError as exc:
        lost = DatabaseError(f"lost the database connection: {first_line(exc)}")
        raise db.disk_full(exc, url, data_dir) or lost from None
