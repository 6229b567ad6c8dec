"""The connection pool every repository shares, and small helpers for their SQL parameters."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pgvector
import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from kb.errors import DatabaseError

Vector = Sequence[float]


def vector_param(vector: Vector | None) -> pgvector.Vector | None:
    """A vector as a query parameter (None: a row that waits for one): pgvector's type, sent
    in binary (a plain list would be sent as a float8[]). No numpy: kb does no arithmetic on
    vectors, and not importing it takes a tenth of a second off every command."""
    if vector is None:
        return None
    return pgvector.Vector(vector if isinstance(vector, list) else list(vector))


def _configure(conn: psycopg.Connection[DictRow]) -> None:
    register_vector(conn)
    conn.commit()


# Every repository reads rows as dicts.
Pool = ConnectionPool[psycopg.Connection[DictRow]]


def open_pool(url: str, *, max_connections: int = 8) -> Pool:
    """A pool on a migrated database; DatabaseError when it cannot be reached."""
    try:
        pool = Pool(
            url,
            connection_class=psycopg.Connection[DictRow],
            min_size=1,
            max_size=max_connections,
            configure=_configure,
            kwargs={"row_factory": dict_row},
            # A connection that died while idle (a database restart) is replaced, not
            # handed out: long-running users (the daemon) then just carry on.
            check=ConnectionPool.check_connection,
            open=True,
            timeout=30,
        )
        pool.wait(timeout=30)
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to the database: {exc}") from None
    return pool


def like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def epoch_ns(value: dt.datetime) -> int:
    if value.tzinfo is None:
        try:
            value = value.astimezone()  # a naive date or time is local, as the user means it
        except (OverflowError, ValueError):
            value = value.replace(tzinfo=dt.UTC)  # year 1 or 9999: the offset cannot matter
    # mtime_ns is a bigint: dates past 2262 (or before 1677) are clamped to its range.
    return max(-(2**63), min(2**63 - 1, int(value.timestamp()) * 1_000_000_000))


def iso(value: dt.datetime) -> str:
    return value.isoformat(timespec="seconds")
