"""The workers that drain the queues (kb.store.queue): each one's heartbeat, for `kb
status` and for the waits that count the workers alive."""

from __future__ import annotations

from dataclasses import dataclass

from kb.store.heartbeats import Liveness, heard
from kb.store.pool import Pool
from kb.vault.sync_plan import VaultFilter


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

    def serves(self, vaults: VaultFilter) -> bool:
        """Whether it claims notes of any of `vaults` (None: of any vault)."""
        return vaults is None or not self.vaults or not set(self.vaults).isdisjoint(vaults)


@dataclass(frozen=True, kw_only=True)
class WorkerRow(Liveness, WorkerBeat):
    """A worker as `kb status` lists it: its last heartbeat, how long ago that was, and
    whether it looks alive."""


class Workers:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def beat(self, worker: WorkerBeat) -> None:
        """Record that a worker is alive, and the vaults it claims now (a `kb forget` may
        change them); drops long-dead workers."""
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
                "   last_error = EXCLUDED.last_error, vaults = EXCLUDED.vaults,"
                "   heartbeat_at = now()",
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
        return heard(self.pool, "workers", WorkerRow, "started_at")
