"""The passages table: a chunk's extra texts (kb.context.passage_texts), each with a vector of
its own.

Written with their note's chunks (`write`, in `Documents.save`'s transaction), deleted with
them (ON DELETE CASCADE), re-keyed with them on a move (they hang off the chunk). Their
vectors live as the chunks' do, and kb.store.vectors keeps both tables' HNSW indexes and
model switches; vectors are found again by the hash of the text embedded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import psycopg
from psycopg.rows import DictRow

from kb.store.pool import Pool, Vector, vector_param

# What a passage is (kb.context.passage_texts): a paragraph of its chunk in its writer's voice,
# or a statement or a question the chat model wrote of it (kb.context.chunk_writes).
PassageKind = Literal["paragraph", "statement", "question"]


@dataclass(frozen=True)
class PassageRecord:
    position: int
    kind: PassageKind
    text: str  # what was embedded
    text_hash: str
    embedding: Vector | None  # None: waiting for its vector (the embedding queue)
    embed_model: str | None


@dataclass(frozen=True)
class ChunkPassages:
    """One chunk's passages of a kind, as embedded, with the chunk they were made from."""

    path: str
    content: str
    texts: tuple[str, ...]


_COPY = """
    COPY passages (chunk_id, position, kind, text, text_hash, embedding, embed_model)
    FROM STDIN
"""


def write(cur: psycopg.Cursor[DictRow], rows: Sequence[tuple[int, PassageRecord]]) -> None:
    """Store passages of chunks, each given as (its chunk's id, the passage)."""
    if not rows:
        return
    with cur.copy(_COPY) as copy:
        for chunk_id, p in rows:
            copy.write_row(
                (
                    chunk_id,
                    p.position,
                    p.kind,
                    p.text,
                    p.text_hash,
                    vector_param(p.embedding),
                    p.embed_model,
                )
            )


class Passages:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def known_embeddings(self, text_hashes: Sequence[str], model: str) -> dict[str, Vector]:
        """Vectors of texts this model embedded before, by the hash of the text."""
        if not text_hashes:
            return {}
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT ON (text_hash) text_hash, embedding FROM ("
                "  SELECT text_hash, embedding FROM passages"
                "   WHERE text_hash = ANY(%(h)s) AND embed_model = %(m)s"
                "     AND embedding IS NOT NULL"
                "  UNION ALL"  # the vectors of notes deleted (kb.store.vaults.keep_paid_for)
                "  SELECT text_hash, embedding FROM kept_vectors"
                "   WHERE text_hash = ANY(%(h)s) AND embed_model = %(m)s) AS known",
                {"h": list(set(text_hashes)), "m": model},
            ).fetchall()
        return {r["text_hash"]: r["embedding"].to_list() for r in rows}

    def of_kind(self, kind: PassageKind) -> list[ChunkPassages]:
        """Every chunk that has passages of `kind`, with them in order: what a model wrote,
        read back to judge it."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT d.path, c.content, array_agg(p.text ORDER BY p.position) AS texts"
                "  FROM passages p JOIN chunks c ON c.id = p.chunk_id"
                "  JOIN documents d ON d.id = c.document_id"
                " WHERE p.kind = %s GROUP BY d.path, c.id ORDER BY d.path, c.position",
                (kind,),
            ).fetchall()
        return [ChunkPassages(r["path"], r["content"], tuple(r["texts"])) for r in rows]

    def count(self) -> int:
        with self.pool.connection() as conn:
            row = conn.execute("SELECT count(*) AS n FROM passages").fetchone()
        return int(row["n"]) if row else 0
