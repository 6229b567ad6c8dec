"""Model outputs already paid for, found by content-hash key: summaries, rewrites, voices, a
chunk's lines (statements, questions), vectors, re-ranking judgements and cross-encoder
scores. Nothing unchanged is sent to a model twice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from kb.prompting.outputs import Output
from kb.store.chunks import VoiceRecord
from kb.store.pool import Pool, Vector


@dataclass(frozen=True)
class _ScoreTable:
    """A table of scores a model gave, by cache key: its name, and its columns for the
    model and the time."""

    name: str
    model: str
    at: str


# The chat model's 0-10 judgements, and a cross-encoder's real-valued scores.
_RELEVANCE = _ScoreTable("relevance", "chat_model", "judged_at")
_RERANK_SCORES = _ScoreTable("rerank_scores", "model", "scored_at")


class Caches:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

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
                UNION ALL
                SELECT statements_key, statements, statements_fallback FROM chunks
                 WHERE statements_key = ANY(%(k)s) AND statements IS NOT NULL
                UNION ALL
                SELECT questions_key, questions, questions_fallback FROM chunks
                 WHERE questions_key = ANY(%(k)s) AND questions IS NOT NULL
                UNION ALL
                SELECT voice_key, voice, voice_fallback FROM documents
                 WHERE voice_key = ANY(%(k)s) AND voice IS NOT NULL
                UNION ALL
                SELECT key, text, fallback FROM kept_outputs WHERE key = ANY(%(k)s)
                """,
                {"k": keys},
                # Planned at each run, never prepared: a plan PostgreSQL keeps for a
                # prepared statement is made for the tables as they were, and a first index
                # runs this lookup while they are nearly empty: it then scanned every row of
                # `chunks` at each note, half of the database's work on a 2,000-note vault.
                prepare=False,
            ).fetchall()
        known: dict[str, Output] = {}
        for r in rows:
            if r["fallback"] is None:
                known[r["key"]] = Output(r["text"])
            elif r["fallback"] == chat_model:
                known.setdefault(r["key"], Output(r["text"], fallback=True))
        return known

    def holds_outputs(self) -> bool:
        """Whether the index holds any LLM output by its key: none before a first index."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM documents WHERE summary_key IS NOT NULL)"
                "    OR EXISTS (SELECT 1 FROM documents WHERE voice_key IS NOT NULL)"
                "    OR EXISTS (SELECT 1 FROM chunks WHERE summary_key IS NOT NULL)"
                "    OR EXISTS (SELECT 1 FROM chunks WHERE rewrite_key IS NOT NULL)"
                "    OR EXISTS (SELECT 1 FROM chunks WHERE statements_key IS NOT NULL)"
                "    OR EXISTS (SELECT 1 FROM chunks WHERE questions_key IS NOT NULL)"
                "    OR EXISTS (SELECT 1 FROM kept_outputs) AS any"
            ).fetchone()
        return bool(row and row["any"])

    def stored_voice(self, vault: str, path: str) -> VoiceRecord | None:
        """The voice a note is stored with, if the model was asked for one."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT voice, voice_key, voice_fallback FROM documents"
                " WHERE vault = %s AND path = %s AND voice IS NOT NULL AND voice_key IS NOT NULL",
                (vault, path),
            ).fetchone()
        return VoiceRecord(row["voice"], row["voice_key"], row["voice_fallback"]) if row else None

    def paths_with_fallbacks(self, vault: str, chat_model: str) -> set[str]:
        """Notes holding fallbacks of a model other than `chat_model`: worth another try."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                """
                SELECT d.path FROM documents d
                 WHERE d.vault = %(v)s
                   AND (d.summary_fallback <> %(m)s OR d.voice_fallback <> %(m)s
                        OR EXISTS (SELECT 1 FROM chunks c
                                    WHERE c.document_id = d.id
                                      AND (c.summary_fallback <> %(m)s
                                           OR c.rewrite_fallback <> %(m)s
                                           OR c.statements_fallback <> %(m)s
                                           OR c.questions_fallback <> %(m)s)))
                """,
                {"v": vault, "m": chat_model},
            ).fetchall()
        return {r["path"] for r in rows}

    def known_embeddings(self, context_hashes: Sequence[str], model: str) -> dict[str, Vector]:
        if not context_hashes:
            return {}
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT ON (context_hash) context_hash, embedding FROM ("
                "  SELECT context_hash, embedding FROM chunks"
                "   WHERE context_hash = ANY(%(h)s) AND embed_model = %(m)s"
                "     AND embedding IS NOT NULL"
                "  UNION ALL"  # the vectors of notes deleted (kb.store.vaults.keep_paid_for)
                "  SELECT text_hash, embedding FROM kept_vectors"
                "   WHERE text_hash = ANY(%(h)s) AND embed_model = %(m)s) AS known",
                {"h": list(set(context_hashes)), "m": model},
            ).fetchall()
        return {r["context_hash"]: r["embedding"].to_list() for r in rows}

    def known_relevance(self, keys: Sequence[str]) -> dict[str, int | None]:
        """Judgements already paid for, by cache key (None: the model's answer was unusable)."""
        return self._known_scores(_RELEVANCE, keys)

    def save_relevance(self, chat_model: str, scores: Mapping[str, int | None]) -> None:
        self._save_scores(_RELEVANCE, chat_model, scores)

    def known_rerank_scores(self, keys: Sequence[str]) -> dict[str, float]:
        """A cross-encoder's scores already paid for, by cache key."""
        return self._known_scores(_RERANK_SCORES, keys)

    def save_rerank_scores(self, model: str, scores: Mapping[str, float]) -> None:
        self._save_scores(_RERANK_SCORES, model, scores)

    def _known_scores(self, table: _ScoreTable, keys: Sequence[str]) -> dict[str, Any]:
        if not keys:
            return {}
        query = sql.SQL("SELECT key, score FROM {} WHERE key = ANY(%s)").format(
            sql.Identifier(table.name)
        )
        with self.pool.connection() as conn:
            rows = conn.execute(query, (list(set(keys)),)).fetchall()
        return {r["key"]: r["score"] for r in rows}

    def _save_scores(self, table: _ScoreTable, model: str, scores: Mapping[str, Any]) -> None:
        if not scores:
            return
        query = sql.SQL(
            "INSERT INTO {table} (key, score, {model}) VALUES (%s, %s, %s)"
            " ON CONFLICT (key) DO UPDATE SET score = EXCLUDED.score,"
            "   {model} = EXCLUDED.{model}, {at} = now()"
        ).format(
            table=sql.Identifier(table.name),
            model=sql.Identifier(table.model),
            at=sql.Identifier(table.at),
        )
        with self.pool.connection() as conn, conn.cursor() as cur:
            cur.executemany(query, [(key, score, model) for key, score in scores.items()])
