"""Heartbeats read back: the rows of either table that holds them (`daemons`, `workers`), by
one query, each with how long ago it beat and whether it looks alive."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal, LiteralString, TypeVar

from psycopg import sql

from kb.store.pool import Pool, iso

# The tables whose rows are heartbeats.
Table = Literal["daemons", "workers"]

# A daemon or a worker that missed this many heartbeats is taken for dead.
_STALE_BEATS = 3


@dataclass(frozen=True, kw_only=True)
class Liveness:
    """When a daemon or a worker started, when it last beat, how long ago that was, and
    whether it looks alive."""

    started_at: str
    heartbeat_at: str
    heartbeat_age: float  # seconds
    alive: bool


Row = TypeVar("Row", bound=Liveness)

_LIVENESS = frozenset(f.name for f in fields(Liveness))


def _connected(table: Table) -> sql.Composable:
    """Whether a row's connection is still there: a daemon records its own (`backend_pid`),
    and one that died dropped it at once, with no wait for its heartbeat to go stale; a
    worker records none."""
    if table == "daemons":
        return sql.SQL(
            "(backend_pid IS NULL OR EXISTS (SELECT 1 FROM pg_stat_activity a"
            "                                 WHERE a.pid = backend_pid))"
        )
    return sql.SQL("TRUE")


def heard(pool: Pool, table: Table, row: type[Row], order: LiteralString) -> list[Row]:
    """Every row of `table`, in `order`, as a `row`: the columns its beat's fields name,
    with its heartbeat's age and whether it looks alive."""
    columns = [f.name for f in fields(row) if f.name not in _LIVENESS]
    query = sql.SQL(
        "SELECT {columns}, started_at, heartbeat_at,"
        "       extract(epoch FROM now() - heartbeat_at)::float AS heartbeat_age,"
        "       {connected} AS connected"
        "  FROM {table} ORDER BY {order}"
    ).format(
        columns=sql.SQL(", ").join(map(sql.Identifier, columns)),
        connected=_connected(table),
        table=sql.Identifier(table),
        order=sql.SQL(order),
    )
    with pool.connection() as conn:
        rows = conn.execute(query).fetchall()
    return [
        row(
            **{c: _value(r[c]) for c in columns},
            started_at=iso(r["started_at"]),
            heartbeat_at=iso(r["heartbeat_at"]),
            heartbeat_age=r["heartbeat_age"],
            alive=r["connected"] and r["heartbeat_age"] < _STALE_BEATS * r["heartbeat_interval"],
        )
        for r in rows
    ]


def _value(column: Any) -> Any:
    """A column as its record holds it: an array (the vaults, their folders) as a tuple."""
    return tuple(column) if isinstance(column, list) else column
