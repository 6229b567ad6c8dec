"""All of kb's SQL: documents, chunks, cached outputs, vectors, search, state.

Vectors live in an untyped `vector` column. The active embedding model fixes
the dimension: the HNSW index is built on `embedding::vector(<dim>)`, partial
on `embed_model = <model>` (the predicate also keeps the index build away from
the old, dead row versions of another size). Changing model clears the old
vectors in the same transaction that rebuilds the index, and every search
names its model, so a search never mixes two models.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from kb import db
from kb.errors import DatabaseError
from kb.fusion import Ranked
from kb.outputs import Output

Vector = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class DocumentState:
    """What the index knows of a file, enough to decide whether to look closer."""

    id: int
    path: str
    content_hash: str
    size: int
    mtime_ns: int
    personal: bool
    context_build: str


# The columns of a DocumentState, for every query that returns one.
_DOCUMENT_STATE = (
    "SELECT id, path, content_hash, size, mtime_ns, personal, context_build FROM documents"
)


@dataclass(frozen=True)
class DocumentRecord:
    vault: str
    path: str
    content_hash: str
    size: int
    mtime_ns: int
    metadata: dict[str, Any]
    personal: bool
    summary: str
    summary_key: str
    context_build: str  # how the context was built, see Contextualizer.build_id
    summary_fallback: str | None = None  # the chat model whose summary was rejected


@dataclass(frozen=True)
class ChunkRecord:
    position: int
    header_path: tuple[str, ...]
    content: str
    content_hash: str
    start_line: int
    end_line: int
    summary: str
    summary_key: str
    rewrite: str | None
    rewrite_key: str | None
    full_context: str
    embed_text: str  # full_context fitted to the embedder's window
    context_hash: str
    chat_model: str
    embedding: Vector
    embed_model: str
    summary_fallback: str | None = None  # the chat model whose output was rejected
    rewrite_fallback: str | None = None


@dataclass(frozen=True)
class SearchHit:
    vault: str
    path: str
    header_path: list[str]
    content: str
    # What the mode ranks by: cosine similarity (vector), BM25 (text) or the fused score
    # (hybrid, see kb.fusion). Only comparable within one query.
    score: float
    similarity: float  # cosine similarity of chunk and query, whatever the mode
    start_line: int
    end_line: int
    # The chat model's 0-10 judgement when the hit was re-ranked; None otherwise, or when
    # its answer was unusable.
    relevance: int | None = None
    # Where each list put the chunk (1-based) and what it scored there; None when the
    # chunk was not among that list's candidates: why a note came first.
    vector_rank: int | None = None
    vector_score: float | None = None
    text_rank: int | None = None
    text_score: float | None = None


@dataclass(frozen=True)
class Candidate:
    """A chunk one of the search lists found, with its place in each."""

    id: int
    vault: str
    path: str
    header_path: list[str]
    content: str
    start_line: int
    end_line: int
    similarity: float
    vector_rank: int | None
    text_rank: int | None
    text_score: float | None


@dataclass(frozen=True)
class Candidates:
    """Both lists of one query: the chunks by id, and each list in its own order."""

    rows: dict[int, Candidate]
    vector: list[Ranked]
    text: list[Ranked]

    @classmethod
    def of(cls, rows: Sequence[Candidate]) -> Candidates:
        by_vector = sorted((r for r in rows if r.vector_rank), key=lambda r: r.vector_rank or 0)
        by_text = sorted((r for r in rows if r.text_rank), key=lambda r: r.text_rank or 0)
        return cls(
            rows={r.id: r for r in rows},
            vector=[Ranked(r.id, r.vector_rank or 0, r.similarity) for r in by_vector],
            text=[Ranked(r.id, r.text_rank or 0, r.text_score or 0.0) for r in by_text],
        )


# Okapi BM25's usual constants (term-frequency saturation, length normalisation). Text
# search ranks by BM25 rather than ts_rank_cd because ts_rank_cd has no inverse document
# frequency: where every note says "Claude" or "project", the common words of a question
# outweighed the one rare word that finds the answer.
BM25_K1 = 1.2
BM25_B = 0.75


# Text search reads, for each query word, only its best TEXT_POSTINGS_PER_WORD postings
# (migration 010 orders a word's postings by its BM25 weight in each chunk), adds them up
# into a first score, and scores the TEXT_RESCORED chunks with the best first score by BM25,
# exactly. Where every query word is in fewer chunks than that and fewer chunks than
# TEXT_RESCORED hold any of them, every matching chunk is scored: exact BM25. Beyond, a
# chunk can be missed when its common words' postings were cut off; bench/search_scale.py
# --exactness measures how often at 100k chunks. With a filter, a word's postings are read
# until TEXT_POSTINGS_PER_WORD of them lie in the notes it allows, at most
# TEXT_POSTINGS_WALKED of them.
TEXT_POSTINGS_PER_WORD = 1000
TEXT_RESCORED = 400
TEXT_POSTINGS_WALKED = 20 * TEXT_POSTINGS_PER_WORD


@dataclass(frozen=True)
class SearchFilter:
    """Which notes a search may return; every part is optional and they combine (AND)."""

    path_prefix: str | None = None
    tags: tuple[str, ...] = ()  # all of them; a tag also matches its nested tags (a/b)
    modified_after: dt.datetime | None = None
    modified_before: dt.datetime | None = None
    paths: tuple[str, ...] = ()  # only these notes (exact vault-relative paths)

    @property
    def active(self) -> bool:
        return bool(
            self.path_prefix
            or self.tags
            or self.modified_after
            or self.modified_before
            or self.paths
        )


NO_FILTER = SearchFilter()


# A note of `d` has every tag in %(tags)s (lower case), or a tag nested under it (a/b).
_HAS_TAGS = """
    cardinality(%(tags)s::text[]) = (
        SELECT count(*) FROM unnest(%(tags)s::text[]) AS want
         WHERE EXISTS (
             SELECT 1 FROM jsonb_array_elements_text(d.metadata -> 'tags') AS t
              WHERE lower(t) = want OR left(lower(t), length(want) + 1) = want || '/'))
"""


@dataclass(frozen=True)
class NoteInfo:
    """What the index knows of one note, for listing it or naming it as a source."""

    vault: str
    path: str
    personal: bool
    date: str | None  # the frontmatter's `date`, as written
    mtime_ns: int
    tags: list[str]
    chunks: int


@dataclass(frozen=True)
class NotePage:
    notes: list[NoteInfo]
    total: int  # every note that matches, not only this page


_NOTE_INFO = """
    SELECT d.vault, d.path, d.personal, d.metadata ->> 'date' AS date, d.mtime_ns,
           ARRAY(SELECT jsonb_array_elements_text(d.metadata -> 'tags')) AS tags,
           (SELECT count(*) FROM chunks c WHERE c.document_id = d.id) AS chunks
      FROM documents d
"""


@dataclass(frozen=True)
class Status:
    documents: int
    chunks: int
    embedded: int
    # Chunks whose full context is longer than the embedder reads: it embeds a cut.
    cut: int
    chat_models: dict[str, int]
    embed_model: str | None
    dimensions: int | None
    last_sync: dict[str, Any] | None
    failures: list[dict[str, Any]] = field(default_factory=list)
    # Outputs stored as structural context because the model's answer was rejected.
    fallbacks: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class DaemonBeat:
    """One heartbeat of a running daemon, as `kb status` shows it."""

    id: str
    host: str
    pid: int
    role: str  # "writer" or "standby"
    activity: str
    queue_length: int
    heartbeat_interval: float
    last_error: str | None = None


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)
    conn.commit()


class Store:
    def __init__(self, url: str, *, max_connections: int = 8) -> None:
        db.migrate(url)
        self.url = url
        try:
            self.pool = ConnectionPool(
                url,
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
            self.pool.wait(timeout=30)
        except psycopg.Error as exc:
            raise DatabaseError(f"cannot connect to the database: {exc}") from None

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents ---------------------------------------------------------------------------------

    def documents(self, vault: str) -> dict[str, DocumentState]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                _DOCUMENT_STATE + " WHERE vault = %s",
                (vault,),
            ).fetchall()
        return {r["path"]: DocumentState(**r) for r in rows}

    def documents_in(
        self, vault: str, paths: Iterable[str], folders: Iterable[str]
    ) -> dict[str, DocumentState]:
        """The rows of some files and of everything under some folders ("a/b/"; "" is the root)."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                _DOCUMENT_STATE + " WHERE vault = %s AND (path = ANY(%s) OR path LIKE ANY(%s))",
                (vault, list(paths), [_like_prefix(f) for f in folders]),
            ).fetchall()
        return {r["path"]: DocumentState(**r) for r in rows}

    def documents_with_hashes(self, vault: str, hashes: Iterable[str]) -> list[DocumentState]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                _DOCUMENT_STATE + " WHERE vault = %s AND content_hash = ANY(%s) ORDER BY path",
                (vault, list(set(hashes))),
            ).fetchall()
        return [DocumentState(**r) for r in rows]

    def save_document(self, doc: DocumentRecord, chunks: Sequence[ChunkRecord]) -> None:
        """Replace a document and all its chunks in one transaction."""
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(
                """
                INSERT INTO documents (vault, path, content_hash, size, mtime_ns, metadata,
                                       personal, summary, summary_key, summary_fallback,
                                       context_build, indexed_at)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())
                ON CONFLICT (vault, path) DO UPDATE SET
                    content_hash = EXCLUDED.content_hash, size = EXCLUDED.size,
                    mtime_ns = EXCLUDED.mtime_ns, metadata = EXCLUDED.metadata,
                    personal = EXCLUDED.personal, summary = EXCLUDED.summary,
                    summary_key = EXCLUDED.summary_key,
                    summary_fallback = EXCLUDED.summary_fallback,
                    context_build = EXCLUDED.context_build, indexed_at = now()
                RETURNING id
                """,
                (
                    doc.vault,
                    doc.path,
                    doc.content_hash,
                    doc.size,
                    doc.mtime_ns,
                    Jsonb(doc.metadata),
                    doc.personal,
                    doc.summary,
                    doc.summary_key,
                    doc.summary_fallback,
                    doc.context_build,
                ),
            ).fetchone()
            assert row is not None
            doc_id = row["id"]
            conn.execute("DELETE FROM chunks WHERE document_id = %s", (doc_id,))
            with conn.cursor() as cur:
                cur.executemany(
                    """
                    INSERT INTO chunks (document_id, position, header_path, content,
                        content_hash, start_line, end_line, summary, summary_key, rewrite,
                        rewrite_key, full_context, embed_text, context_hash, chat_model,
                        embedding, embed_model, summary_fallback, rewrite_fallback)
                    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
                            %s, %s, %s)
                    """,
                    [
                        (
                            doc_id,
                            c.position,
                            list(c.header_path),
                            c.content,
                            c.content_hash,
                            c.start_line,
                            c.end_line,
                            c.summary,
                            c.summary_key,
                            c.rewrite,
                            c.rewrite_key,
                            c.full_context,
                            c.embed_text,
                            c.context_hash,
                            c.chat_model,
                            np.asarray(c.embedding, dtype=np.float32),
                            c.embed_model,
                            c.summary_fallback,
                            c.rewrite_fallback,
                        )
                        for c in chunks
                    ],
                )
            conn.execute(
                "DELETE FROM failures WHERE vault = %s AND path = %s", (doc.vault, doc.path)
            )

    def update_stat(self, vault: str, path: str, size: int, mtime_ns: int) -> None:
        """Record a new size/mtime for a file whose content did not change."""
        with self.pool.connection() as conn:
            conn.execute(
                "UPDATE documents SET size = %s, mtime_ns = %s WHERE vault = %s AND path = %s",
                (size, mtime_ns, vault, path),
            )

    def move_document(
        self, vault: str, old_path: str, new_path: str, size: int, mtime_ns: int
    ) -> None:
        """Re-key a renamed or moved file; its chunks and vectors stay as they are."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("DELETE FROM documents WHERE vault = %s AND path = %s", (vault, new_path))
            conn.execute(
                "UPDATE documents SET path = %s, size = %s, mtime_ns = %s"
                " WHERE vault = %s AND path = %s",
                (new_path, size, mtime_ns, vault, old_path),
            )
            conn.execute(
                "DELETE FROM failures WHERE vault = %s AND path = ANY(%s)",
                (vault, [old_path, new_path]),
            )

    def delete_documents(self, vault: str, paths: Iterable[str]) -> int:
        paths = list(paths)
        if not paths:
            return 0
        with self.pool.connection() as conn, conn.transaction():
            cur = conn.execute(
                "DELETE FROM documents WHERE vault = %s AND path = ANY(%s)", (vault, paths)
            )
            conn.execute("DELETE FROM failures WHERE vault = %s AND path = ANY(%s)", (vault, paths))
            return cur.rowcount

    def delete_vaults_except(self, vaults: Sequence[str]) -> int:
        """Forget vaults that are no longer configured."""
        with self.pool.connection() as conn, conn.transaction():
            cur = conn.execute("DELETE FROM documents WHERE NOT (vault = ANY(%s))", (list(vaults),))
            conn.execute("DELETE FROM failures WHERE NOT (vault = ANY(%s))", (list(vaults),))
            return cur.rowcount

    # -- cached outputs ----------------------------------------------------------------------------

    def known_outputs(self, keys: Sequence[str], chat_model: str) -> dict[str, Output]:
        """LLM outputs already paid for, by cache key, wherever they are stored.

        A fallback counts as known only to the model that produced it: asking that model
        again would fail again, while another model deserves its chance.
        """
        if not keys:
            return {}
        keys = list(set(keys))
        with self.pool.connection() as conn:
            rows = conn.execute(
                """
                SELECT summary_key AS key, summary AS text, summary_fallback AS fallback
                  FROM documents
                 WHERE summary_key = ANY(%(k)s) AND summary IS NOT NULL
                UNION ALL
                SELECT summary_key, summary, summary_fallback FROM chunks
                 WHERE summary_key = ANY(%(k)s)
                UNION ALL
                SELECT rewrite_key, rewrite, rewrite_fallback FROM chunks
                 WHERE rewrite_key = ANY(%(k)s) AND rewrite IS NOT NULL
                """,
                {"k": keys},
            ).fetchall()
        known: dict[str, Output] = {}
        for r in rows:
            if r["fallback"] is None:
                known[r["key"]] = Output(r["text"])
            elif r["fallback"] == chat_model:
                known.setdefault(r["key"], Output(r["text"], fallback=True))
        return known

    def paths_with_fallbacks(self, vault: str, chat_model: str) -> set[str]:
        """Notes holding fallbacks of a model other than `chat_model`: worth another try."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                """
                SELECT d.path FROM documents d
                 WHERE d.vault = %(v)s
                   AND (d.summary_fallback <> %(m)s
                        OR EXISTS (SELECT 1 FROM chunks c
                                    WHERE c.document_id = d.id
                                      AND (c.summary_fallback <> %(m)s
                                           OR c.rewrite_fallback <> %(m)s)))
                """,
                {"v": vault, "m": chat_model},
            ).fetchall()
        return {r["path"] for r in rows}

    def known_embeddings(self, context_hashes: Sequence[str], model: str) -> dict[str, Vector]:
        if not context_hashes:
            return {}
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT ON (context_hash) context_hash, embedding FROM chunks"
                " WHERE context_hash = ANY(%s) AND embed_model = %s AND embedding IS NOT NULL",
                (list(set(context_hashes)), model),
            ).fetchall()
        return {r["context_hash"]: r["embedding"].to_numpy() for r in rows}

    # -- the embedding space -----------------------------------------------------------------------

    def embedding_space(self) -> tuple[str, int] | None:
        value = self.get_state("embedding_space")
        return (value["model"], int(value["dimensions"])) if value else None

    def switch_embedding_space(self, model: str, dimensions: int) -> None:
        """Make `model` the active one: drop other vectors and rebuild the index for its size."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("LOCK TABLE chunks IN SHARE ROW EXCLUSIVE MODE")
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
            conn.execute(
                "UPDATE chunks SET embedding = NULL, embed_model = NULL"
                " WHERE embed_model IS DISTINCT FROM %s"
                "    OR vector_dims(embedding) IS DISTINCT FROM %s",
                (model, dimensions),
            )
            conn.execute(
                sql.SQL(
                    "CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw"
                    " ((embedding::vector({dim})) vector_cosine_ops)"
                    " WHERE embed_model = {model}"
                ).format(dim=sql.Literal(dimensions), model=sql.Literal(model))
            )
            self._set_state(conn, "embedding_space", {"model": model, "dimensions": dimensions})

    def chunks_without_embedding(self, limit: int) -> list[tuple[int, str]]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, embed_text FROM chunks WHERE embedding IS NULL ORDER BY id LIMIT %s",
                (limit,),
            ).fetchall()
        return [(r["id"], r["embed_text"]) for r in rows]

    def set_embeddings(self, model: str, vectors: Sequence[tuple[int, Vector]]) -> None:
        with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                "UPDATE chunks SET embedding = %s, embed_model = %s WHERE id = %s",
                [(np.asarray(v, dtype=np.float32), model, i) for i, v in vectors],
            )

    def clear_embeddings(self) -> None:
        with self.pool.connection() as conn:
            conn.execute("UPDATE chunks SET embedding = NULL, embed_model = NULL")

    # -- search ------------------------------------------------------------------------------------

    def candidates(
        self,
        vector: Vector,
        text: str,
        *,
        model: str,
        dimensions: int,
        depth: int,
        lists: Literal["vector", "text", "both"] = "both",
        filters: SearchFilter = NO_FILTER,
    ) -> Candidates:
        """The top `depth` chunks of each list for a query, in one round trip.

        vector: nearest by cosine. text: full-text match on full_context (any of the
        query's words, ranked by BM25: see TEXT_POSTINGS_PER_WORD). How the two lists become
        one is `kb.fusion`'s job.
        """
        # Only the parts of the filter in use: the others would still be evaluated per row.
        parts = [sql.SQL("TRUE")]
        if filters.path_prefix:
            parts.append(sql.SQL("d.path LIKE %(like)s"))
        if filters.paths:
            parts.append(sql.SQL("d.path = ANY(%(paths)s::text[])"))
        if filters.modified_after:
            parts.append(sql.SQL("d.mtime_ns >= %(after)s"))
        if filters.modified_before:
            parts.append(sql.SQL("d.mtime_ns < %(before)s"))
        if filters.tags:
            parts.append(sql.SQL(_HAS_TAGS))
        documents = sql.SQL(" AND ").join(parts)
        where = sql.SQL("c.embed_model = {model} AND {documents}").format(
            model=sql.Literal(model), documents=documents
        )
        distance = sql.SQL("c.embedding::vector({dim}) <=> %(v)s::vector({dim})").format(
            dim=sql.Literal(dimensions)
        )
        # The sub-select inside an expression stays a hash of the allowed notes, built once,
        # where a plain IN would become a join the planner may read in another order.
        allowed = (
            sql.SQL(
                "WHERE (p.document_id IN (SELECT d.id FROM documents d WHERE {documents})) IS TRUE"
            ).format(documents=documents)
            if filters.active
            else sql.SQL("")
        )
        query = sql.SQL(
            r"""
            WITH v AS (
                SELECT c.id, row_number() OVER (ORDER BY {distance}, c.id) AS rank
                  FROM chunks c JOIN documents d ON d.id = c.document_id
                 WHERE {where}
                 ORDER BY {distance} LIMIT %(nv)s
            ), words AS MATERIALIZED (
                -- The query's lexemes with their inverse document frequency, from the
                -- statistics the triggers keep; nothing when only vectors are asked for.
                SELECT q.lexeme,
                       ln(1 + (n.chunks - l.chunks + 0.5) / (l.chunks + 0.5))::float8 AS idf,
                       n.lexemes::float8 / n.chunks AS avg_length
                  FROM text_corpus n,
                       unnest(tsvector_to_array(to_tsvector('english', %(q)s))) AS q (lexeme)
                       JOIN text_lexemes l ON l.lexeme = q.lexeme COLLATE "C"
                 WHERE %(nt)s > 0 AND l.chunks > 0
            ), found AS MATERIALIZED (
                -- Each word's best postings, summed into a first score by their stored impact.
                SELECT p.chunk_id, sum(words.idf * p.impact) AS first
                  FROM words, LATERAL (
                      SELECT p.chunk_id, p.impact FROM (
                          SELECT p.chunk_id, p.impact, p.document_id FROM text_postings p
                           WHERE p.lexeme = words.lexeme COLLATE "C"
                           ORDER BY p.impact DESC LIMIT %(walked)s
                      ) AS p {allowed} LIMIT %(per_word)s
                  ) AS p
                 GROUP BY p.chunk_id
                 ORDER BY first DESC LIMIT %(rescored)s
            ), bm25 AS (
                -- Okapi BM25 of the best of them, from their full-text vectors: only the
                -- query's lexemes are kept (weighted A, then filtered) before unnesting.
                SELECT x.chunk_id AS id, sum(words.idf * cardinality(w.positions) * ({k1} + 1)
                           / (cardinality(w.positions) + {k1} * (1 - {b}
                              + {b} * x.length / words.avg_length))) AS score
                  FROM found JOIN chunks c ON c.id = found.chunk_id
                       JOIN text_chunks x ON x.chunk_id = found.chunk_id,
                       unnest(ts_filter(
                           setweight(x.terms, 'A', ARRAY(SELECT lexeme FROM words)), '{{a}}'
                       )) AS w
                       JOIN words ON words.lexeme = w.lexeme
                 WHERE c.embed_model = {model}
                 GROUP BY x.chunk_id
            ), t AS (
                SELECT id, score, row_number() OVER (ORDER BY score DESC, id) AS rank
                  FROM bm25 ORDER BY rank LIMIT %(nt)s
            )
            SELECT c.id, d.vault, d.path, c.header_path, c.content, c.start_line, c.end_line,
                   1 - ({distance}) AS similarity, v.rank AS vector_rank,
                   t.rank AS text_rank, t.score::float8 AS text_score
              FROM v FULL OUTER JOIN t ON v.id = t.id
              JOIN chunks c ON c.id = coalesce(v.id, t.id) JOIN documents d ON d.id = c.document_id
            """
        ).format(
            distance=distance,
            where=where,
            allowed=allowed,
            model=sql.Literal(model),
            k1=sql.Literal(BM25_K1),
            b=sql.Literal(BM25_B),
        )
        to_ns = _epoch_ns
        params: dict[str, Any] = {
            "v": np.asarray(vector, dtype=np.float32),
            "q": text,
            "like": _like_prefix(filters.path_prefix) if filters.path_prefix else None,
            "after": to_ns(filters.modified_after) if filters.modified_after else None,
            "before": to_ns(filters.modified_before) if filters.modified_before else None,
            "tags": [t.lower().lstrip("#") for t in filters.tags],
            "paths": list(filters.paths),
            "nv": 0 if lists == "text" else depth,
            "nt": 0 if lists == "vector" else depth,
            "per_word": TEXT_POSTINGS_PER_WORD,
            "walked": TEXT_POSTINGS_WALKED if filters.active else TEXT_POSTINGS_PER_WORD,
            "rescored": max(depth, TEXT_RESCORED),
        }
        with self.pool.connection() as conn, conn.transaction():
            if filters.active:
                # A filtered HNSW scan must keep going until it has enough rows (pgvector >= 0.8).
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = conn.execute(query, params).fetchall()
        return Candidates.of([Candidate(**r) for r in rows])

    # -- notes -------------------------------------------------------------------------------------

    def note_info(self, notes: Iterable[tuple[str, str]]) -> dict[tuple[str, str], NoteInfo]:
        """The index's facts about some notes, by (vault, path); unknown notes are left out."""
        keys = set(notes)
        with self.pool.connection() as conn:
            rows = conn.execute(
                _NOTE_INFO + " WHERE (d.vault, d.path) IN (SELECT * FROM unnest(%s::text[],"
                " %s::text[]))",
                ([v for v, _ in keys], [p for _, p in keys]),
            ).fetchall()
        return {(r["vault"], r["path"]): NoteInfo(**r) for r in rows}

    def list_notes(
        self,
        *,
        vault: str | None = None,
        folder: str | None = None,
        tags: Sequence[str] = (),
        offset: int = 0,
        limit: int = 50,
    ) -> NotePage:
        """Indexed notes in path order, optionally of one vault, under a folder, with tags."""
        params = {
            "vault": vault,
            "like": _like_prefix(folder) if folder else None,
            "tags": [t.lower().lstrip("#") for t in tags],
            "offset": offset,
            "limit": limit,
        }
        where = (
            """ WHERE (%(vault)s::text IS NULL OR d.vault = %(vault)s)
                  AND (%(like)s::text IS NULL OR d.path LIKE %(like)s)
                  AND """
            + _HAS_TAGS
        )
        with self.pool.connection() as conn, conn.transaction():
            counted = conn.execute("SELECT count(*) AS n FROM documents d" + where, params)
            total = counted.fetchone()["n"]
            rows = conn.execute(
                _NOTE_INFO + where + " ORDER BY d.vault, d.path OFFSET %(offset)s LIMIT %(limit)s",
                params,
            ).fetchall()
        return NotePage([NoteInfo(**r) for r in rows], total)

    # -- re-ranking judgements ---------------------------------------------------------------------

    def known_relevance(self, keys: Sequence[str]) -> dict[str, int | None]:
        """Judgements already paid for, by cache key (None: the model's answer was unusable)."""
        if not keys:
            return {}
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT key, score FROM relevance WHERE key = ANY(%s)", (list(set(keys)),)
            ).fetchall()
        return {r["key"]: r["score"] for r in rows}

    def save_relevance(self, chat_model: str, scores: Mapping[str, int | None]) -> None:
        if not scores:
            return
        with self.pool.connection() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO relevance (key, score, chat_model) VALUES (%s, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET score = EXCLUDED.score,"
                "   chat_model = EXCLUDED.chat_model, judged_at = now()",
                [(key, score, chat_model) for key, score in scores.items()],
            )

    # -- failures and state ------------------------------------------------------------------------

    def record_failure(self, vault: str, path: str, error: str) -> None:
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO failures (vault, path, error) VALUES (%s, %s, %s)"
                " ON CONFLICT (vault, path) DO UPDATE"
                " SET error = EXCLUDED.error, failed_at = now()",
                (vault, path, error),
            )

    def failures(self, vault: str) -> dict[str, str]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT path, error FROM failures WHERE vault = %s", (vault,)
            ).fetchall()
        return {r["path"]: r["error"] for r in rows}

    def vault_row_counts(self) -> dict[str, int]:
        with self.pool.connection() as conn:
            rows = conn.execute("SELECT vault, count(*) AS n FROM documents GROUP BY vault")
            return {r["vault"]: r["n"] for r in rows}

    def row_problems(self) -> dict[str, int]:
        """Rows that would mean a write was half done or done twice (all 0 when healthy)."""
        with self.pool.connection() as conn:
            row = conn.execute(
                """
                SELECT
                  (SELECT count(*) FROM (SELECT 1 FROM documents GROUP BY vault, path
                                          HAVING count(*) > 1) d) AS duplicate_documents,
                  (SELECT count(*) FROM chunks c WHERE NOT EXISTS
                     (SELECT 1 FROM documents d WHERE d.id = c.document_id)) AS orphan_chunks,
                  (SELECT count(*) FROM (SELECT 1 FROM chunks GROUP BY document_id
                     HAVING count(*) <> max(position) + 1
                         OR count(DISTINCT position) <> count(*)) g) AS broken_chunk_lists
                """
            ).fetchone()
        assert row is not None
        return dict(row)

    def documents_without_vectors(self, model: str) -> list[tuple[str, str]]:
        """(vault, path) of documents with a chunk that lacks a vector from `model`."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT d.vault, d.path FROM chunks c JOIN documents d"
                " ON d.id = c.document_id"
                " WHERE c.embedding IS NULL OR c.embed_model IS DISTINCT FROM %s",
                (model,),
            ).fetchall()
        return [(r["vault"], r["path"]) for r in rows]

    def keep_failures(self, vault: str, paths: Iterable[str]) -> None:
        """Forget the failures of a vault's files that are no longer there."""
        with self.pool.connection() as conn:
            conn.execute(
                "DELETE FROM failures WHERE vault = %s AND NOT (path = ANY(%s))",
                (vault, list(paths)),
            )

    def get_state(self, key: str) -> Any:
        with self.pool.connection() as conn:
            row = conn.execute("SELECT value FROM state WHERE key = %s", (key,)).fetchone()
        return row["value"] if row else None

    def set_state(self, key: str, value: Any) -> None:
        with self.pool.connection() as conn:
            self._set_state(conn, key, value)

    @staticmethod
    def _set_state(conn: psycopg.Connection, key: str, value: Any) -> None:
        conn.execute(
            "INSERT INTO state (key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (key, Jsonb(value)),
        )

    def daemons(self) -> list[dict[str, Any]]:
        """Every daemon that has a row, with its heartbeat's age and whether it looks alive."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, host, pid, role, activity, queue_length, heartbeat_interval,"
                "       last_error, started_at, heartbeat_at,"
                "       extract(epoch FROM now() - heartbeat_at)::float AS heartbeat_age,"
                "       (backend_pid IS NULL OR EXISTS (SELECT 1 FROM pg_stat_activity a"
                "                                        WHERE a.pid = backend_pid)) AS connected"
                "  FROM daemons ORDER BY role DESC, started_at"
            ).fetchall()
        return [
            {
                **{k: v for k, v in r.items() if k != "connected"},
                # A daemon that died dropped its connection at once: no waiting for its
                # heartbeat to go stale.
                "alive": r["connected"]
                and r["heartbeat_age"] < _STALE_BEATS * r["heartbeat_interval"],
                "started_at": _iso(r["started_at"]),
                "heartbeat_at": _iso(r["heartbeat_at"]),
            }
            for r in rows
        ]

    def status(self) -> Status:
        with self.pool.connection() as conn:
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM documents) AS documents,"
                "       (SELECT count(*) FROM chunks) AS chunks,"
                "       (SELECT count(*) FROM chunks WHERE embedding IS NOT NULL) AS embedded,"
                "       (SELECT count(*) FROM chunks WHERE embed_text <> full_context) AS cut"
            ).fetchone()
            assert counts is not None
            chat_models = {
                r["chat_model"]: r["n"]
                for r in conn.execute(
                    "SELECT chat_model, count(*) AS n FROM chunks"
                    " GROUP BY chat_model ORDER BY 2 DESC"
                )
            }
            failures = conn.execute(
                "SELECT vault, path, error, failed_at FROM failures ORDER BY vault, path"
            ).fetchall()
            fallbacks = conn.execute(
                """
                SELECT (SELECT count(*) FROM documents WHERE summary_fallback IS NOT NULL)
                           AS file_summary,
                       (SELECT count(*) FROM chunks WHERE summary_fallback IS NOT NULL)
                           AS chunk_summary,
                       (SELECT count(*) FROM chunks WHERE rewrite_fallback IS NOT NULL)
                           AS rewrite
                """
            ).fetchone()
            assert fallbacks is not None
        space = self.embedding_space()
        return Status(
            documents=counts["documents"],
            chunks=counts["chunks"],
            embedded=counts["embedded"],
            cut=counts["cut"],
            chat_models=chat_models,
            embed_model=space[0] if space else None,
            dimensions=space[1] if space else None,
            last_sync=self.get_state("last_sync"),
            failures=[{**f, "failed_at": _iso(f["failed_at"])} for f in failures],
            fallbacks={task: n for task, n in fallbacks.items() if n},
        )


# A daemon that missed this many heartbeats is taken for dead.
_STALE_BEATS = 3
# The writer lock's two keys ("kb", "daemon"); only the same constants matter.
_WRITER_LOCK = (0x6B62, 0x6461)


class WriterLock:
    """A daemon's own connection: the single-writer lock and the heartbeat.

    The lock is a session-level advisory lock, so it lives exactly as long as this
    connection: a daemon that dies, or whose connection drops, loses it, and a standby's
    next try_acquire() gets it. It is deliberately not a pooled connection.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: psycopg.Connection | None = None

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            try:
                # Keepalives notice a server that vanished without closing the socket.
                self._conn = psycopg.connect(
                    self.url,
                    autocommit=True,
                    connect_timeout=5,
                    keepalives=1,
                    keepalives_idle=10,
                    keepalives_interval=5,
                    keepalives_count=3,
                )
                # A hung server must not hang the heartbeat, nor a stop waiting behind it.
                self._conn.execute("SET statement_timeout = '10s'")
            except psycopg.Error as exc:
                message = f"cannot connect to the database: {db.first_line(exc)}"
                raise DatabaseError(message) from None
        return self._conn

    def _run(self, query: str, params: Sequence[Any] = ()) -> Any:
        try:
            cur = self._connection().execute(query, params)
            row = cur.fetchone() if cur.description else None
        except psycopg.Error as exc:
            self.close()
            raise DatabaseError(f"lost the database connection: {db.first_line(exc)}") from None
        return row[0] if row else None

    def try_acquire(self) -> bool:
        """Take the lock if no other daemon holds it; True when this daemon is the writer."""
        return bool(self._run("SELECT pg_try_advisory_lock(%s, %s)", _WRITER_LOCK))

    def held(self) -> bool:
        """Whether this connection is alive and still holds the lock (never raises)."""
        try:
            return bool(
                self._run(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
                    " AND pid = pg_backend_pid() AND granted"
                    " AND classid = %s AND objid = %s AND objsubid = 2)",
                    _WRITER_LOCK,
                )
            )
        except DatabaseError:
            return False

    def beat(self, beat: DaemonBeat) -> None:
        """Record that this daemon is alive, and what it is doing; drops long-dead rows."""
        self._run(
            "WITH gone AS (DELETE FROM daemons WHERE id <> %s"
            "   AND heartbeat_at < now() - make_interval(secs => heartbeat_interval * 20))"
            " INSERT INTO daemons (id, host, pid, role, activity, queue_length,"
            "   heartbeat_interval, last_error, backend_pid)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, pg_backend_pid())"
            " ON CONFLICT (id) DO UPDATE SET role = EXCLUDED.role, activity = EXCLUDED.activity,"
            "   backend_pid = EXCLUDED.backend_pid,"
            "   queue_length = EXCLUDED.queue_length,"
            "   heartbeat_interval = EXCLUDED.heartbeat_interval,"
            "   last_error = EXCLUDED.last_error, heartbeat_at = now()",
            (
                beat.id,
                beat.id,
                beat.host,
                beat.pid,
                beat.role,
                beat.activity,
                beat.queue_length,
                beat.heartbeat_interval,
                beat.last_error,
            ),
        )

    def leave(self, daemon_id: str) -> None:
        """Remove this daemon's row and release the lock (a clean exit)."""
        # If the database is gone the row goes stale, and another daemon's heartbeat drops it.
        with contextlib.suppress(DatabaseError):
            self._run("DELETE FROM daemons WHERE id = %s", (daemon_id,))
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def _epoch_ns(value: dt.datetime) -> int:
    if value.tzinfo is None:
        try:
            value = value.astimezone()  # a naive date or time is local, as the user means it
        except (OverflowError, ValueError):
            value = value.replace(tzinfo=dt.UTC)  # year 1 or 9999: the offset cannot matter
    # mtime_ns is a bigint: dates past 2262 (or before 1677) are clamped to its range.
    return max(-(2**63), min(2**63 - 1, int(value.timestamp()) * 1_000_000_000))


def _iso(value: dt.datetime) -> str:
    return value.isoformat(timespec="seconds")
