"""The workers that drain the queues (kb.store.queue): each one's heartbeat, for `kb
status` and for the waits that count the workers alive."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kb.store.pool import Pool, iso

# A worker that missed this many heartbeats is taken for dead (as a daemon is).
_STALE_BEATS = 3


@dataclass(frozen=True)
class WorkerBeat:
    """One heartbeat of a running worker."""

    id: str
    host: str
    pid: int
    concurrency: int
    in_hand: int
    heartbeat_interval: float
    last_error: str | None = None
    vaults: tuple[str, ...] = ()  # the vaults whose notes it claims (empty: every vault)

    def serves(self, vaults: Sequence[str]) -> bool:
        """Whether it claims notes of any of `vaults` (empty: of any vault)."""
        return not self.vaults or not vaults or not set(self.vaults).isdisjoint(vaults)


@dataclass(frozen=True, kw_only=True)
class WorkerRow(WorkerBeat):
    """A worker as `kb status` lists it: its last heartbeat, how long ago that was, and
    whether it looks alive."""

    started_at: str
    heartbeat_at: str
    heartbeat_age: float  # seconds
    alive: bool


class Workers:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def beat(self, worker: WorkerBeat) -> None:
        """Record that a worker is alive; drops long-dead workers."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(
                "DELETE FROM workers WHERE id <> %s"
                "   AND heartbeat_at < now() - make_interval(secs => heartbeat_interval * 20)",
                (worker.id,),
            )
            conn.execute(
                "INSERT INTO workers (id, host, pid, concurrency, in_hand, heartbeat_interval,"
                "   last_error, vaults)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET in_hand = EXCLUDED.in_hand,"
                "   last_error = EXCLUDED.last_error, heartbeat_at = now()",
                (
                    worker.id,
                    worker.host,
                    worker.pid,
                    worker.concurrency,
                    worker.in_hand,
                    worker.heartbeat_interval,
                    worker.last_error,
                    list(worker.vaults),
                ),
            )

    def leave(self, worker_id: str) -> None:
        with self.pool.connection() as conn:
            conn.execute("DELETE FROM workers WHERE id = %s", (worker_id,))

    def listed(self) -> list[WorkerRow]:
        """Every worker with a row, with its heartbeat's age and whether it looks alive."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, host, pid, concurrency, in_hand, heartbeat_interval, last_error,"
                "       vaults, started_at, heartbeat_at,"
                "       extract(epoch FROM now() - heartbeat_at)::float AS heartbeat_age"
                "  FROM workers ORDER BY started_at"
            ).fetchall()
        return [
            WorkerRow(
                id=r["id"],
                host=r["host"],
                pid=r["pid"],
                concurrency=r["concurrency"],
                in_hand=r["in_hand"],
                heartbeat_interval=r["heartbeat_interval"],
                last_error=r["last_error"],
                vaults=tuple(r["vaults"]),
                started_at=iso(r["started_at"]),
                heartbeat_at=iso(r["heartbeat_at"]),
                heartbeat_age=r["heartbeat_age"],
                alive=r["heartbeat_age"] < _STALE_BEATS * r["heartbeat_interval"],
            )
            for r in rows
        ]
