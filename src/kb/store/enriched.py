"""The enrichment speed's reads and writes: a claimed note's rows as a worker needs them,
and its LLM context written back with its item taken off the queue (kb.store.queue), in one
transaction.

`finish` writes a note's context only if its item still has the claimed ticket and lease: a
result for an older version is dropped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kb.store import passages
from kb.store.chunks import ChunkRecord, VoiceRecord
from kb.store.pool import Pool
from kb.store.queue import Claim
from kb.vault.chunking import Chunk


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


class EnrichedNotes:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

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
                cur.execute(
                    "SELECT id, position FROM chunks WHERE document_id = %s",
                    (claim.document_id,),
                )
                ids = {r["position"]: r["id"] for r in cur.fetchall()}
                passages.write(
                    cur, [(ids[c.position], p) for c in enriched.chunks for p in c.passages]
                )
            # Every text of the note has its vector now: it waits for none.
            conn.execute(
                "DELETE FROM enrichment_queue WHERE document_id = %s", (claim.document_id,)
            )
            conn.execute("DELETE FROM embedding_queue WHERE document_id = %s", (claim.document_id,))
            conn.execute(
                "INSERT INTO enrichment_done (ticket, document_id, worker, claimed_at, llm_calls)"
                " VALUES (%s, %s, %s, %s, %s)",
                (claim.ticket, claim.document_id, owner, claim.claimed_at, enriched.llm_calls),
            )
        return True
