"""The embedding space: which model's vectors the index holds, and its HNSW indexes (the
chunks', and their passages': kb.store.passages). Rows still waiting for a vector are the
embedding queue's (kb.store.queue).

Vectors live in an untyped `vector` column. The active embedding model fixes
the dimension: the HNSW index is built on `embedding::vector(<dim>)`, partial
on `embed_model = <model>` (the predicate also keeps the index build away from
the old, dead row versions of another size). Changing model clears the old
vectors in the same transaction that rebuilds the index, and every search
names its model, so a search never mixes two models.
"""

from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg.rows import DictRow

from kb.store.pool import Pool
from kb.store.queue import queue_unembedded
from kb.store.state import read_state, write_state


class Vectors:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def space(self) -> tuple[str, int] | None:
        with self.pool.connection() as conn:
            value = read_state(conn, "embedding_space")
        return (value["model"], int(value["dimensions"])) if value else None

    def switch(self, model: str, dimensions: int) -> None:
        """Make `model` the active one: drop other vectors and rebuild the index for its size;
        the notes that lose a vector wait for one in the embedding queue."""
        with self.pool.connection() as conn, conn.transaction():
            for table, _ in _EMBEDDED:
                conn.execute(
                    sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(
                        sql.Identifier(table)
                    )
                )
            # Read under the locks: two workers that found no space make it once.
            if read_state(conn, "embedding_space") == {"model": model, "dimensions": dimensions}:
                return
            cleared = 0
            for table, index in _EMBEDDED:
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))
                cleared += conn.execute(
                    sql.SQL(
                        "UPDATE {} SET embedding = NULL, embed_model = NULL"
                        " WHERE embedding IS NOT NULL AND (embed_model IS DISTINCT FROM %s"
                        "    OR vector_dims(embedding) IS DISTINCT FROM %s)"
                    ).format(sql.Identifier(table)),
                    (model, dimensions),
                ).rowcount
            _create_indexes(conn, model, dimensions)
            # Kept vectors of another model are never looked up again.
            conn.execute("DELETE FROM kept_vectors WHERE embed_model <> %s", (model,))
            write_state(conn, "embedding_space", {"model": model, "dimensions": dimensions})
            if cleared:
                queue_unembedded(conn)

    def has_index(self) -> bool:
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT bool_and(to_regclass(i) IS NOT NULL) AS ok FROM unnest(%s::text[]) AS i",
                ([index for _, index in _EMBEDDED],),
            )
            found = row.fetchone()
        return bool(found and found["ok"])

    def drop_index(self) -> None:
        """Drop the vector indexes before a bulk load: building them once over all the rows
        costs a fraction of keeping them up to date row by row. Searches meanwhile scan
        every vector: exact, only slower."""
        with self.pool.connection() as conn:
            for _, index in _EMBEDDED:
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))

    def build_index(self, model: str, dimensions: int) -> None:
        """(Re)build the vector index of the active model, if it is missing; two builders
        at once build it once (the second waits for the first)."""
        with self.pool.connection() as conn:
            # The keys spell "kb", "ix".
            conn.execute("SELECT pg_advisory_lock(27490, 26968)")
            try:
                _create_indexes(conn, model, dimensions)
            finally:
                conn.execute("SELECT pg_advisory_unlock(27490, 26968)")

    def clear(self) -> None:
        """Drop every vector: each note waits for its vectors again (`kb reindex
        --embeddings-only`)."""
        with self.pool.connection() as conn, conn.transaction():
            for table, _ in _EMBEDDED:
                conn.execute(
                    sql.SQL("UPDATE {} SET embedding = NULL, embed_model = NULL").format(
                        sql.Identifier(table)
                    )
                )
            conn.execute("DELETE FROM kept_vectors")
            queue_unembedded(conn)


# What pgvector holds in memory per vector while it builds the graph, beyond the vector
# itself (its neighbour lists and bookkeeping): 64 MB held 36,895 vectors of 256 dimensions.
_GRAPH_BYTES = 1024
# The most a build is given: pgvector's own advice for large builds, and far below what a
# vault of notes needs (a million chunks of 384 dimensions take about 2.4 GB).
_BUILD_MEMORY_CAP = 1 << 30


# Every table whose rows carry a vector of the active model, and its HNSW index: the chunks,
# and their passages (kb.store.passages).
_EMBEDDED = (("chunks", "chunks_embedding_hnsw"), ("passages", "passages_embedding_hnsw"))


def _create_indexes(conn: psycopg.Connection[DictRow], model: str, dimensions: int) -> None:
    """Build the HNSW index of each table of vectors with room to build its graph in memory:
    once the graph outgrows maintenance_work_mem, pgvector goes on inserting on disk, three
    times slower (85k vectors of 256 dimensions: 69 s at the default 64 MB, 23 s with 256
    MB). The setting is raised for each build's transaction only, and never lowered."""
    for table, index in _EMBEDDED:
        with conn.transaction():
            conn.execute(
                sql.SQL(
                    "SELECT set_config('maintenance_work_mem', greatest("
                    "   pg_size_bytes(current_setting('maintenance_work_mem')),"
                    "   least(count(*) * %s, %s)) / 1024 || 'kB', true)"
                    "  FROM {} WHERE embed_model = %s"
                ).format(sql.Identifier(table)),
                (dimensions * 4 + _GRAPH_BYTES, _BUILD_MEMORY_CAP, model),
            )
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {index} ON {table} USING hnsw"
                    " ((embedding::vector({dim})) vector_cosine_ops)"
                    " WHERE embed_model = {model}"
                ).format(
                    index=sql.Identifier(index),
                    table=sql.Identifier(table),
                    dim=sql.Literal(dimensions),
                    model=sql.Literal(model),
                )
            )
