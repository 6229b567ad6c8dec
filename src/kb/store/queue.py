"""The enrichment queue: notes waiting for their LLM context, the workers that drain it, and
writing an enriched note back.

A note saved without its LLM context gets one item (`queue_note`, in the transaction that
saves its rows); saving it again replaces the item with a new ticket, so an edit made before
its turn is enriched once, for the latest content. Workers claim items newest first with
`FOR UPDATE SKIP LOCKED` (any number of them, on any machine, never the same item at
once), each under a lease they renew while they work; an item whose lease ran out (its
worker died) is claimed again. `finish` writes a note's context only if its item still
has the claimed ticket and lease: a result for an older version is dropped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import DictRow

from kb.chunking import Chunk
from kb.store import passages
from kb.store.chunks import ChunkRecord, VoiceRecord
from kb.store.pool import Pool, iso
from kb.store.vaults import DOCUMENT_IN_VAULTS, ROW_IN_VAULTS

# Finished items kept for the rate and the ETA, and the window the rate is measured over.
_DONE_KEPT = "1 day"
_RATE_WINDOW = "10 minutes"
# A worker that missed this many heartbeats is taken for dead (as a daemon is).
_STALE_BEATS = 3
# Failing items listed by `kb status`, the most recent first.
_FAILING_SHOWN = 20


@dataclass(frozen=True)
class Pending:
    """How a note saved without its LLM context is queued."""

    priority: int  # the note's mtime_ns: the newest notes are enriched first
    fresh: bool = False  # ignore every cached output and vector (`kb reindex`)


@dataclass(frozen=True)
class Claim:
    """An item a worker holds under its lease."""

    document_id: int
    ticket: int
    content_hash: str
    fresh: bool
    attempts: int  # this claim included
    claimed_at: dt.datetime


@dataclass(frozen=True)
class QueuedNote:
    """A queued note as its rows hold it: all a worker needs, without the vault."""

    vault: str
    path: str
    personal: bool
    metadata: dict[str, Any]
    context_build: str
    chunks: list[Chunk]
    note_date: dt.date | None = None  # the note's own date, None if only its file's time


@dataclass(frozen=True)
class Enriched:
    """A note's LLM context, ready to replace what its rows hold."""

    summary: str
    summary_key: str
    summary_fallback: str | None
    chunks: Sequence[ChunkRecord]
    llm_calls: int
    voice: VoiceRecord | None = None


@dataclass(frozen=True)
class Failing:
    vault: str
    path: str
    error: str
    attempts: int


@dataclass(frozen=True)
class QueueStatus:
    """The queue as `kb status` shows it."""

    items: int  # notes waiting for their LLM context, in progress included
    in_progress: int  # held by a worker's lease now
    failing: int  # whose last attempt failed (retried after a back-off)
    done_last_hour: int
    done_last_day: int
    # Notes finished per second over the last minutes, None when none was finished lately.
    rate: float | None
    eta_seconds: float | None
    failures: list[Failing] = field(default_factory=list)


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


def queue_note(
    conn: psycopg.Connection[DictRow], document_id: int, content_hash: str, pending: Pending | None
) -> None:
    """Queue a note just saved (replacing its item), or, saved whole, take it off the queue."""
    if pending is None:
        conn.execute("DELETE FROM enrichment_queue WHERE document_id = %s", (document_id,))
        return
    conn.execute(
        """
        INSERT INTO enrichment_queue (document_id, content_hash, priority, fresh)
        VALUES (%s, %s, %s, %s)
        ON CONFLICT (document_id) DO UPDATE SET
            ticket = EXCLUDED.ticket, content_hash = EXCLUDED.content_hash,
            priority = EXCLUDED.priority,
            fresh = enrichment_queue.fresh OR EXCLUDED.fresh,
            queued_at = now(), attempts = 0, last_error = NULL, not_before = now(),
            lease_owner = NULL, lease_until = NULL
        """,
        (document_id, content_hash, pending.priority, pending.fresh),
    )


class Queue:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def claim(
        self, owner: str, *, lease: float, limit: int = 1, vaults: Sequence[str] = ()
    ) -> list[Claim]:
        """Up to `limit` items of `vaults` (empty: any), newest note first, that no live
        lease holds and whose back-off is over; each now leased to `owner` for `lease`
        seconds."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                """
                WITH next AS (
                    SELECT document_id FROM enrichment_queue
                     WHERE not_before <= now() AND (lease_until IS NULL OR lease_until < now())
                       AND """
                + DOCUMENT_IN_VAULTS
                + """
                     ORDER BY priority DESC, document_id
                     LIMIT %(n)s
                       FOR UPDATE SKIP LOCKED
                )
                UPDATE enrichment_queue q
                   SET lease_owner = %(owner)s,
                       lease_until = now() + make_interval(secs => %(lease)s),
                       attempts = q.attempts + 1
                  FROM next WHERE q.document_id = next.document_id
                RETURNING q.document_id, q.ticket, q.content_hash, q.fresh, q.attempts,
                          now() AS claimed_at
                """,
                {"n": limit, "owner": owner, "lease": lease, "vaults": list(vaults)},
            ).fetchall()
        return [Claim(**r) for r in rows]

    def note(self, document_id: int) -> QueuedNote | None:
        """The rows of a queued note (None if it was deleted meanwhile)."""
        with self.pool.connection() as conn, conn.transaction():
            doc = conn.execute(
                "SELECT vault, path, personal, metadata, context_build,"
                " CASE WHEN date_source = 'file time' THEN NULL ELSE note_date END AS note_date"
                " FROM documents WHERE id = %s",
                (document_id,),
            ).fetchone()
            if doc is None:
                return None
            rows = conn.execute(
                "SELECT position, header_path, content, start_line, end_line FROM chunks"
                " WHERE document_id = %s ORDER BY position",
                (document_id,),
            ).fetchall()
        chunks = [Chunk(**{**r, "header_path": tuple(r["header_path"])}) for r in rows]
        return QueuedNote(**doc, chunks=chunks)

    def renew(self, owner: str, document_ids: Sequence[int], *, lease: float) -> None:
        """Extend the leases `owner` still holds."""
        if not document_ids:
            return
        with self.pool.connection() as conn:
            conn.execute(
                "UPDATE enrichment_queue SET lease_until = now() + make_interval(secs => %s)"
                " WHERE document_id = ANY(%s) AND lease_owner = %s",
                (lease, list(document_ids), owner),
            )

    def finish(self, claim: Claim, owner: str, enriched: Enriched) -> bool:
        """Write a note's LLM context and take its item off the queue, in one transaction;
        False (nothing written) when the note was queued again, deleted, or claimed by
        another worker since."""
        with self.pool.connection() as conn, conn.transaction():
            # The document first, as a save locks it first: the two never deadlock.
            doc = conn.execute(
                "SELECT id FROM documents WHERE id = %s FOR UPDATE", (claim.document_id,)
            ).fetchone()
            held = conn.execute(
                "SELECT 1 FROM enrichment_queue"
                " WHERE document_id = %s AND ticket = %s AND lease_owner = %s",
                (claim.document_id, claim.ticket, owner),
            ).fetchone()
            if doc is None or held is None:
                return False
            conn.execute(
                "UPDATE documents SET summary = %s, summary_key = %s, summary_fallback = %s,"
                "   voice = %s, voice_key = %s, voice_fallback = %s"
                " WHERE id = %s",
                (
                    enriched.summary,
                    enriched.summary_key,
                    enriched.summary_fallback,
                    *(enriched.voice.params() if enriched.voice else (None, None, None)),
                    claim.document_id,
                ),
            )
            with conn.cursor() as cur:
                cur.executemany(
                    """
                    UPDATE chunks SET summary = %s, summary_key = %s, rewrite = %s,
                        rewrite_key = %s, full_context = %s, embed_text = %s,
                        context_hash = %s, chat_model = %s, embedding = %s, embed_model = %s,
                        summary_fallback = %s, rewrite_fallback = %s, summaries_at = %s,
                        statements = %s, statements_key = %s, statements_fallback = %s,
                        questions = %s, questions_key = %s, questions_fallback = %s
                     WHERE document_id = %s AND position = %s AND content_hash = %s
                    """,
                    [
                        (
                            *c.context_params(),
                            claim.document_id,
                            c.position,
                            c.content_hash,
                        )
                        for c in enriched.chunks
                    ],
                )
                # Passages speak in the note's voice, which only now may be the model's.
                cur.execute(
                    "DELETE FROM passages p USING chunks c"
                    " WHERE p.chunk_id = c.id AND c.document_id = %s",
                    (claim.document_id,),
                )
                passages.write(
                    cur,
                    [
                        (claim.document_id, c.position, p)
                        for c in enriched.chunks
                        for p in c.passages
                    ],
                )
            conn.execute(
                "DELETE FROM enrichment_queue WHERE document_id = %s", (claim.document_id,)
            )
            conn.execute(
                "INSERT INTO enrichment_done (ticket, document_id, worker, claimed_at, llm_calls)"
                " VALUES (%s, %s, %s, %s, %s)",
                (claim.ticket, claim.document_id, owner, claim.claimed_at, enriched.llm_calls),
            )
        return True

    def release(self, claim: Claim, owner: str, *, error: str, retry_in: float) -> None:
        """Give an item back after a failed attempt: tried again after `retry_in` seconds."""
        with self.pool.connection() as conn:
            conn.execute(
                "UPDATE enrichment_queue SET lease_owner = NULL, lease_until = NULL,"
                "   last_error = %s, not_before = now() + make_interval(secs => %s)"
                " WHERE document_id = %s AND ticket = %s AND lease_owner = %s",
                (error, retry_in, claim.document_id, claim.ticket, owner),
            )

    def waiting(self, vaults: Sequence[str] = ()) -> int:
        """Items of `vaults` (empty: any) a worker could claim now."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) AS n FROM enrichment_queue"
                " WHERE not_before <= now() AND (lease_until IS NULL OR lease_until < now())"
                " AND " + DOCUMENT_IN_VAULTS,
                {"vaults": list(vaults)},
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

    def status(self, vaults: Sequence[str] = ()) -> QueueStatus:
        """The backlog of `vaults` (empty: every vault); the rate is every worker's."""
        with self.pool.connection() as conn:
            queue = conn.execute(
                "SELECT count(*) AS items,"
                "       count(*) FILTER (WHERE lease_until >= now()) AS in_progress,"
                "       count(*) FILTER (WHERE last_error IS NOT NULL) AS failing"
                "  FROM enrichment_queue WHERE " + DOCUMENT_IN_VAULTS,
                {"vaults": list(vaults)},
            ).fetchone()
            done = conn.execute(
                "SELECT count(*) FILTER (WHERE done_at > now() - interval '1 hour') AS hour,"
                "       count(*) AS day,"
                "       count(*) FILTER (WHERE done_at > now() - %(w)s::interval) AS recent,"
                "       extract(epoch FROM now() - min(claimed_at)"
                "           FILTER (WHERE done_at > now() - %(w)s::interval))::float AS span"
                "  FROM enrichment_done WHERE done_at > now() - %(kept)s::interval",
                {"w": _RATE_WINDOW, "kept": _DONE_KEPT},
            ).fetchone()
            failing = conn.execute(
                "SELECT d.vault, d.path, q.last_error AS error, q.attempts"
                "  FROM enrichment_queue q JOIN documents d ON d.id = q.document_id"
                " WHERE q.last_error IS NOT NULL AND "
                + ROW_IN_VAULTS
                + " ORDER BY q.not_before DESC LIMIT %(n)s",
                {"vaults": list(vaults), "n": _FAILING_SHOWN},
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

    # -- workers -----------------------------------------------------------------------------------

    def beat(self, worker: WorkerBeat) -> None:
        """Record that a worker is alive; drops long-dead workers and old finished items."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(
                "DELETE FROM workers WHERE id <> %s"
                "   AND heartbeat_at < now() - make_interval(secs => heartbeat_interval * 20)",
                (worker.id,),
            )
            conn.execute(
                "DELETE FROM enrichment_done WHERE done_at < now() - %s::interval", (_DONE_KEPT,)
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

    def workers(self) -> list[WorkerRow]:
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
