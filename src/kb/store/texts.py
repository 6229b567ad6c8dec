"""The embedding speed's writes: the texts of claimed notes that wait for a vector, and
their vectors written back with the notes' items taken off the embedding queue
(kb.store.queue), in one transaction.

A vector is written only into a row that still holds the text embedded and has none yet,
so a late result is harmless either way; nothing is written when the index has changed
model since (its vectors would not compare).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import sql

from kb.store.pool import Pool, Vector, vector_param
from kb.store.queue import Claim
from kb.store.state import read_state


@dataclass(frozen=True)
class Unembedded:
    """A text of a claimed note waiting for a vector: a chunk's (`passage` False) or a
    passage's, by its row id, with its note and the hash its vector is cached under."""

    passage: bool
    id: int
    document_id: int
    text: str
    text_hash: str


@dataclass(frozen=True)
class VectorsDone:
    """A claimed note's item finished by the embedding speed, and what it cost."""

    claim: Claim
    embedded: int  # texts sent to the embedder for it


class Texts:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def unembedded(self, document_ids: Sequence[int]) -> list[Unembedded]:
        """The texts of some notes that wait for a vector: their chunks' first, then their
        passages', each note's in order."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT false AS passage, id, embed_text AS text, context_hash AS text_hash,"
                "       document_id, position, 0 AS at"
                "  FROM chunks WHERE document_id = ANY(%(ids)s) AND embedding IS NULL"
                " UNION ALL"
                " SELECT true, p.id, p.text, p.text_hash, c.document_id, c.position, p.position"
                "  FROM passages p JOIN chunks c ON c.id = p.chunk_id"
                " WHERE c.document_id = ANY(%(ids)s) AND p.embedding IS NULL"
                " ORDER BY passage, document_id, position, at",
                {"ids": list(document_ids)},
            ).fetchall()
        return [
            Unembedded(r["passage"], r["id"], r["document_id"], r["text"], r["text_hash"])
            for r in rows
        ]

    def finish_vectors(
        self,
        owner: str,
        model: str,
        vectors: Sequence[tuple[Unembedded, Vector]],
        done: Sequence[VectorsDone],
    ) -> list[int]:
        """Write vectors of `model` into the rows that still hold the text embedded and have
        none yet, and take the items `done` off the queue where they still have the ticket
        claimed and the lease; the notes whose items were taken off. Nothing is written when
        the index has changed model since (its vectors would not compare)."""
        with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            # Locks the space's row: a model switch waits for this write, or this for it.
            space = read_state(conn, "embedding_space", lock=True)
            if space is None or space["model"] != model:
                return []
            for passage, table, hash_column in (
                (False, "chunks", "context_hash"),
                (True, "passages", "text_hash"),
            ):
                rows = [(u, v) for u, v in vectors if u.passage is passage]
                if not rows:
                    continue
                cur.execute(
                    sql.SQL(
                        "UPDATE {table} t SET embedding = u.embedding, embed_model = %s"
                        "  FROM unnest(%s::bigint[], %s::text[], %s::vector[])"
                        "    AS u(id, text_hash, embedding)"
                        " WHERE t.id = u.id AND t.{hash} = u.text_hash AND t.embedding IS NULL"
                    ).format(table=sql.Identifier(table), hash=sql.Identifier(hash_column)),
                    (
                        model,
                        [u.id for u, _ in rows],
                        [u.text_hash for u, _ in rows],
                        [vector_param(v) for _, v in rows],
                    ),
                )
            if not done:
                return []
            cur.execute(
                """
                WITH held AS (
                    SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::timestamptz[],
                                         %s::integer[]) AS h(document_id, ticket, claimed_at,
                                                             embedded)
                ), finished AS (
                    DELETE FROM embedding_queue q USING held h
                     WHERE q.document_id = h.document_id AND q.ticket = h.ticket
                       AND q.lease_owner = %s
                    RETURNING q.ticket
                )
                INSERT INTO embedding_done (ticket, document_id, worker, claimed_at, embedded)
                SELECT h.ticket, h.document_id, %s, h.claimed_at, h.embedded
                  FROM held h JOIN finished f ON f.ticket = h.ticket
                RETURNING document_id
                """,
                (
                    [d.claim.document_id for d in done],
                    [d.claim.ticket for d in done],
                    [d.claim.claimed_at for d in done],
                    [d.embedded for d in done],
                    owner,
                    owner,
                ),
            )
            return [r["document_id"] for r in cur.fetchall()]
