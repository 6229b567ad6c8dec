"""The two queues of the later speeds: notes waiting for their vectors (`embed`) and for
their LLM context (`enrich`): items queued, claimed, leased, given back and counted. The
workers that drain both keep their heartbeats in kb.store.workers.

A note saved without all of its vectors, or without its LLM context, gets one item in that
speed's queue (`queue_notes`, in the transaction that saves its rows); saving it again
replaces the item with a new ticket, so an edit made before its turn is done once, for the
latest content. Workers claim items newest first with `FOR UPDATE SKIP LOCKED` (any number
of them, on any machine, never the same item at once), each under a lease they renew while
they work; an item whose lease ran out (its worker died) is claimed again. What the speeds
write back, and the items they take off, go through kb.store.texts (vectors) and
kb.store.enriched (LLM context), each written only while the item still has the claimed
ticket and lease: a result for an older version is dropped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import psycopg
from psycopg import sql
from psycopg.rows import DictRow

from kb.store.pool import Pool
from kb.store.vaults import DOCUMENT_IN_VAULTS, ROW_IN_VAULTS, vaults_param
from kb.vault.sync_plan import VaultFilter

# The later speeds, each a queue: a note's vectors, then its LLM context.
Speed = Literal["embed", "enrich"]
SPEEDS: tuple[Speed, ...] = ("embed", "enrich")
# Each speed's queue and its log of finished items.
_TABLES: dict[Speed, tuple[str, str]] = {
    "embed": ("embedding_queue", "embedding_done"),
    "enrich": ("enrichment_queue", "enrichment_done"),
}


# What an item waits for besides its back-off and a lease: a note's LLM context comes after
# its vectors (the enricher would otherwise embed texts the embedding queue embeds too).
_AFTER: dict[Speed, sql.SQL] = {
    "embed": sql.SQL("true"),
    "enrich": sql.SQL("document_id NOT IN (SELECT document_id FROM embedding_queue)"),
}


def _tables(speed: Speed) -> dict[str, sql.Composable]:
    queue, done = _TABLES[speed]
    return {"queue": sql.Identifier(queue), "done": sql.Identifier(done), "after": _AFTER[speed]}


# Finished items kept for the rate and the ETA, and the window the rate is measured over.
_DONE_KEPT = "1 day"
_RATE_WINDOW = "10 minutes"
# Failing items listed by `kb status`, the most recent first.
_FAILING_SHOWN = 20


@dataclass(frozen=True)
class Pending:
    """How a note saved without its vectors or its LLM context is queued."""

    priority: int  # the note's mtime_ns: the newest notes come first
    fresh: bool = False  # ignore every cached output and vector (`kb reindex`)


@dataclass(frozen=True)
class Claim:
    """An item a worker holds under its lease."""

    speed: Speed
    document_id: int
    ticket: int
    content_hash: str
    fresh: bool
    attempts: int  # this claim included
    claimed_at: dt.datetime


@dataclass(frozen=True)
class Failing:
    vault: str
    path: str
    error: str
    attempts: int


@dataclass(frozen=True)
class QueueStatus:
    """A speed's queue as `kb status` shows it."""

    items: int  # notes waiting, in progress included
    in_progress: int  # held by a worker's lease now
    failing: int  # whose last attempt failed (retried after a back-off)
    done_last_hour: int
    done_last_day: int
    # Notes finished per second over the last minutes, None when none was finished lately.
    rate: float | None
    eta_seconds: float | None
    failures: list[Failing] = field(default_factory=list)


def queue_notes(
    cur: psycopg.Cursor[DictRow], speed: Speed, notes: Sequence[tuple[int, str, Pending | None]]
) -> None:
    """Queue notes just saved, each given as (id, content hash, how it is queued): replacing
    their items; or, None, take them off that speed's queue."""
    done = [doc_id for doc_id, _, pending in notes if pending is None]
    if done:
        cur.execute(
            sql.SQL("DELETE FROM {queue} WHERE document_id = ANY(%s)").format(**_tables(speed)),
            (done,),
        )
    waiting = [(doc_id, h, pending) for doc_id, h, pending in notes if pending is not None]
    if not waiting:
        return
    cur.execute(
        sql.SQL(
            """
            INSERT INTO {queue} (document_id, content_hash, priority, fresh)
            SELECT * FROM unnest(%s::bigint[], %s::text[], %s::bigint[], %s::boolean[])
            ON CONFLICT (document_id) DO UPDATE SET
                ticket = EXCLUDED.ticket, content_hash = EXCLUDED.content_hash,
                priority = EXCLUDED.priority, fresh = {queue}.fresh OR EXCLUDED.fresh,
                queued_at = now(), attempts = 0, last_error = NULL, not_before = now(),
                lease_owner = NULL, lease_until = NULL
            """
        ).format(**_tables(speed)),
        (
            [doc_id for doc_id, _, _ in waiting],
            [h for _, h, _ in waiting],
            [p.priority for _, _, p in waiting],
            [p.fresh for _, _, p in waiting],
        ),
    )


def queue_unembedded(conn: psycopg.Connection[DictRow]) -> None:
    """Every note with a chunk or a passage left without a vector (their vectors cleared by
    a model change) waits for them again, under a new ticket."""
    conn.execute(
        """
        INSERT INTO embedding_queue (document_id, content_hash, priority)
        SELECT d.id, d.content_hash, d.mtime_ns FROM documents d
         WHERE d.id IN (SELECT document_id FROM chunks WHERE embedding IS NULL)
            OR d.id IN (SELECT c.document_id FROM passages p JOIN chunks c ON c.id = p.chunk_id
                         WHERE p.embedding IS NULL)
        ON CONFLICT (document_id) DO UPDATE SET
            ticket = EXCLUDED.ticket, queued_at = now(), attempts = 0, last_error = NULL,
            not_before = now(), lease_owner = NULL, lease_until = NULL
        """
    )


class Queue:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def claim(
        self,
        owner: str,
        *,
        lease: float,
        limit: int = 1,
        vaults: VaultFilter = None,
        speed: Speed = "enrich",
    ) -> list[Claim]:
        """Up to `limit` items of `speed`'s queue and of `vaults` (None: any), newest note
        first, that no live lease holds and whose back-off is over; each now leased to
        `owner` for `lease` seconds."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                sql.SQL(
                    """
                WITH next AS (
                    SELECT document_id FROM {queue}
                     WHERE not_before <= now() AND (lease_until IS NULL OR lease_until < now())
                       AND {after} AND """
                    + DOCUMENT_IN_VAULTS
                    + """
                     ORDER BY priority DESC, document_id
                     LIMIT %(n)s
                       FOR UPDATE SKIP LOCKED
                )
                UPDATE {queue} q
                   SET lease_owner = %(owner)s,
                       lease_until = now() + make_interval(secs => %(lease)s),
                       attempts = q.attempts + 1
                  FROM next WHERE q.document_id = next.document_id
                RETURNING q.document_id, q.ticket, q.content_hash, q.fresh, q.attempts,
                          now() AS claimed_at
                """
                ).format(**_tables(speed)),
                {"n": limit, "owner": owner, "lease": lease, "vaults": vaults_param(vaults)},
            ).fetchall()
        return [Claim(speed=speed, **r) for r in rows]

    def renew(
        self, owner: str, document_ids: Sequence[int], *, lease: float, speed: Speed = "enrich"
    ) -> None:
        """Extend the leases `owner` still holds on items of `speed`'s queue."""
        if not document_ids:
            return
        with self.pool.connection() as conn:
            conn.execute(
                sql.SQL(
                    "UPDATE {queue} SET lease_until = now() + make_interval(secs => %s)"
                    " WHERE document_id = ANY(%s) AND lease_owner = %s"
                ).format(**_tables(speed)),
                (lease, list(document_ids), owner),
            )

    def release(self, claim: Claim, owner: str, *, error: str, retry_in: float) -> None:
        """Give an item back after a failed attempt: tried again after `retry_in` seconds."""
        with self.pool.connection() as conn:
            conn.execute(
                sql.SQL(
                    "UPDATE {queue} SET lease_owner = NULL, lease_until = NULL,"
                    "   last_error = %s, not_before = now() + make_interval(secs => %s)"
                    " WHERE document_id = %s AND ticket = %s AND lease_owner = %s"
                ).format(**_tables(claim.speed)),
                (error, retry_in, claim.document_id, claim.ticket, owner),
            )

    def waiting(self, vaults: VaultFilter = None, speed: Speed = "enrich") -> int:
        """Items of `speed`'s queue and of `vaults` (None: any) a worker could claim now."""
        with self.pool.connection() as conn:
            row = conn.execute(
                sql.SQL(
                    "SELECT count(*) AS n FROM {queue}"
                    " WHERE not_before <= now() AND (lease_until IS NULL OR lease_until < now())"
                    " AND {after} AND " + DOCUMENT_IN_VAULTS
                ).format(**_tables(speed)),
                {"vaults": vaults_param(vaults)},
            ).fetchone()
        assert row is not None
        return int(row["n"])

    def backlog(self) -> tuple[int, int]:
        """How many notes of the whole index wait for their vectors, and how many it holds."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM embedding_queue) AS waiting,"
                "       (SELECT count(*) FROM documents) AS notes"
            ).fetchone()
        assert row is not None
        return int(row["waiting"]), int(row["notes"])

    def vectors_awaited(self) -> bool:
        """Whether any note of the whole index waits for its vectors."""
        with self.pool.connection() as conn:
            row = conn.execute("SELECT EXISTS (SELECT 1 FROM embedding_queue) AS any").fetchone()
        return bool(row and row["any"])

    def unembedded_notes(self, vaults: VaultFilter = None) -> int:
        """Notes of `vaults` (None: any) with a text still waiting for its vector: not yet
        wholly in the vector list."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) AS n FROM embedding_queue WHERE " + DOCUMENT_IN_VAULTS,
                {"vaults": vaults_param(vaults)},
            ).fetchone()
        assert row is not None
        return int(row["n"])

    def paths(self, vault: str) -> set[str]:
        """The queued notes of a vault."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT d.path FROM enrichment_queue q JOIN documents d ON d.id = q.document_id"
                " WHERE d.vault = %s",
                (vault,),
            ).fetchall()
        return {r["path"] for r in rows}

    def status(self, vaults: VaultFilter = None, speed: Speed = "enrich") -> QueueStatus:
        """The backlog of `speed` and of `vaults` (None: every vault), and the rate its
        items were done at."""
        with self.pool.connection() as conn:
            tables = _tables(speed)
            queue = conn.execute(
                sql.SQL(
                    "SELECT count(*) AS items,"
                    "       count(*) FILTER (WHERE lease_until >= now()) AS in_progress,"
                    "       count(*) FILTER (WHERE last_error IS NOT NULL) AS failing"
                    "  FROM {queue} WHERE " + DOCUMENT_IN_VAULTS
                ).format(**tables),
                {"vaults": vaults_param(vaults)},
            ).fetchone()
            done = conn.execute(
                sql.SQL(
                    "SELECT count(*) FILTER (WHERE done_at > now() - interval '1 hour') AS hour,"
                    "       count(*) AS day,"
                    "       count(*) FILTER (WHERE done_at > now() - %(w)s::interval) AS recent,"
                    "       extract(epoch FROM now() - min(claimed_at)"
                    "           FILTER (WHERE done_at > now() - %(w)s::interval))::float AS span"
                    "  FROM {done} WHERE done_at > now() - %(kept)s::interval AND "
                    + DOCUMENT_IN_VAULTS
                ).format(**tables),
                {"w": _RATE_WINDOW, "kept": _DONE_KEPT, "vaults": vaults_param(vaults)},
            ).fetchone()
            failing = conn.execute(
                sql.SQL(
                    "SELECT d.vault, d.path, q.last_error AS error, q.attempts"
                    "  FROM {queue} q JOIN documents d ON d.id = q.document_id"
                    " WHERE q.last_error IS NOT NULL AND "
                    + ROW_IN_VAULTS
                    + " ORDER BY q.not_before DESC LIMIT %(n)s"
                ).format(**tables),
                {"vaults": vaults_param(vaults), "n": _FAILING_SHOWN},
            ).fetchall()
        assert queue is not None and done is not None
        # Over the time since the first of the recent items was claimed: a run that began a
        # minute ago is not diluted by the idle minutes before it.
        rate = done["recent"] / done["span"] if done["recent"] and done["span"] else None
        return QueueStatus(
            items=queue["items"],
            in_progress=queue["in_progress"],
            failing=queue["failing"],
            done_last_hour=done["hour"],
            done_last_day=done["day"],
            rate=rate,
            eta_seconds=queue["items"] / rate if rate and queue["items"] else None,
            failures=[Failing(**f) for f in failing],
        )

    def prune(self) -> None:
        """Drop the finished items older than the rate and the ETA look at."""
        with self.pool.connection() as conn, conn.transaction():
            for _, done in _TABLES.values():
                conn.execute(
                    sql.SQL("DELETE FROM {} WHERE done_at < now() - %s::interval").format(
                        sql.Identifier(done)
                    ),
                    (_DONE_KEPT,),
                )
