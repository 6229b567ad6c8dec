"""The daemons: the single-writer lock, heartbeats, and who is running."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import psycopg

from kb import db
from kb.errors import DatabaseError
from kb.store.heartbeats import Liveness, heard
from kb.store.pool import Pool

# A daemon's part: starting up, the one writer, waiting to take over, or cut off from its lock.
Role = Literal["starting", "writer", "standby", "lost"]


@dataclass(frozen=True)
class DaemonBeat:
    """One heartbeat of a running daemon, as `kb status` shows it."""

    id: str
    host: str
    pid: int
    role: Role
    activity: str
    queue_length: int
    heartbeat_interval: float
    last_error: str | None = None
    vaults: tuple[str, ...] = ()  # the vaults it watches (empty: not known, a daemon before 025)
    # Their folders, in the same order (empty: not known, a daemon before 029).
    folders: tuple[str, ...] = ()

    def serves(self, vaults: Sequence[str], folders: Sequence[str] = ()) -> bool:
        """Whether it watches any of `vaults` (a daemon that did not say: any vault), at
        `folders` (theirs in the same order) where both sides say: another configuration
        may give one of the names to another folder."""
        if not self.vaults or not vaults:
            return True
        if self.folders and folders:
            return not set(zip(self.vaults, self.folders, strict=True)).isdisjoint(
                zip(vaults, folders, strict=True)
            )
        return not set(self.vaults).isdisjoint(vaults)


@dataclass(frozen=True, kw_only=True)
class DaemonRow(Liveness, DaemonBeat):
    """A daemon as `kb status` lists it: its last heartbeat, how long ago that was, and
    whether it looks alive."""


# The writer lock's first key ("kb"); only the same constant matters.
_WRITER_LOCK = 0x6B62


def writer_key(vaults: Sequence[str]) -> tuple[int, int]:
    """The writer lock of a set of vaults: one writer per configuration's vaults, so that two
    configurations sharing a database each have their daemon ("daemon" for no vault set)."""
    if not vaults:
        return (_WRITER_LOCK, 0x6461)
    return (_WRITER_LOCK, zlib.crc32("\0".join(sorted(vaults)).encode()) & 0x7FFF_FFFF)


class Daemons:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def listed(self) -> list[DaemonRow]:
        """Every daemon that has a row, the writer first, with its heartbeat's age and
        whether it looks alive."""
        return heard(self.pool, "daemons", DaemonRow, "role DESC, started_at")


class WriterLock:
    """A daemon's own connection: the single-writer lock and the heartbeat.

    The lock is a session-level advisory lock, so it lives exactly as long as this
    connection: a daemon that dies, or whose connection drops, loses it, and a standby's
    next try_acquire() gets it. It is deliberately not a pooled connection.
    """

    def __init__(self, url: str, vaults: Sequence[str] = ()) -> None:
        self.url = url
        self.key = writer_key(vaults)
        self._conn: psycopg.Connection | None = None

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            try:
                # Keepalives notice a server that vanished without closing the socket.
                self._conn = psycopg.connect(
                    self.url,
                    autocommit=True,
                    connect_timeout=5,
                    keepalives=1,
                    keepalives_idle=10,
                    keepalives_interval=5,
                    keepalives_count=3,
                )
                # A hung server must not hang the heartbeat, nor a stop waiting behind it.
                self._conn.execute("SET statement_timeout = '10s'")
            except psycopg.Error as exc:
                message = f"cannot connect to the database: {db.first_line(exc)}"
                raise DatabaseError(message) from None
        return self._conn

    def _run(self, query: str, params: Sequence[Any] = ()) -> Any:
        try:
            cur = self._connection().execute(query, params)
            row = cur.fetchone() if cur.description else None
        except psycopg.Error as exc:
            self.close()
            raise DatabaseError(f"lost the database connection: {db.first_line(exc)}") from None
        return row[0] if row else None

    def try_acquire(self) -> bool:
        """Take the lock if no other daemon holds it; True when this daemon is the writer."""
        return bool(self._run("SELECT pg_try_advisory_lock(%s, %s)", self.key))

    def held(self) -> bool:
        """Whether this connection is alive and still holds the lock (never raises)."""
        try:
            return bool(
                self._run(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
                    " AND pid = pg_backend_pid() AND granted"
                    " AND classid = %s AND objid = %s AND objsubid = 2)",
                    self.key,
                )
            )
        except DatabaseError:
            return False

    def beat(self, beat: DaemonBeat) -> None:
        """Record that this daemon is alive, and what it is doing; drops long-dead rows."""
        self._run(
            "WITH gone AS (DELETE FROM daemons WHERE id <> %s"
            "   AND heartbeat_at < now() - make_interval(secs => heartbeat_interval * 20))"
            " INSERT INTO daemons (id, host, pid, role, activity, queue_length,"
            "   heartbeat_interval, last_error, vaults, folders, backend_pid)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, pg_backend_pid())"
            " ON CONFLICT (id) DO UPDATE SET role = EXCLUDED.role, activity = EXCLUDED.activity,"
            "   backend_pid = EXCLUDED.backend_pid,"
            "   queue_length = EXCLUDED.queue_length,"
            "   heartbeat_interval = EXCLUDED.heartbeat_interval,"
            "   last_error = EXCLUDED.last_error, vaults = EXCLUDED.vaults,"
            "   folders = EXCLUDED.folders, heartbeat_at = now()",
            (
                beat.id,
                beat.id,
                beat.host,
                beat.pid,
                beat.role,
                beat.activity,
                beat.queue_length,
                beat.heartbeat_interval,
                beat.last_error,
                list(beat.vaults),
                list(beat.folders),
            ),
        )

    def leave(self, daemon_id: str) -> None:
        """Remove this daemon's row and release the lock (a clean exit)."""
        # If the database is gone the row goes stale, and another daemon's heartbeat drops it.
        with contextlib.suppress(DatabaseError):
            self._run("DELETE FROM daemons WHERE id = %s", (daemon_id,))
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
