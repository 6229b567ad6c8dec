"""The text index's B-tree over its postings (migration 010: a lexeme's postings best first),
dropped for a bulk load of notes and built again after it.

The rows of the text index (text_chunks, text_postings, text_lexemes, text_corpus) are kept
by triggers on `chunks`, never by kb's code; this module only drops and builds the one index
that a bulk load is better without: each new posting went into it at a random place, about
half of what the database spent on a new chunk, where one build sorts them all at once.
Without it a search reads every posting of its words: exact, only slower.
"""

from __future__ import annotations

from kb.store.pool import Pool

# The keys spell "kb", "tp": one builder at a time, the others wait for it.
_BUILDING = (27490, 29808)


class TextIndex:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def present(self) -> bool:
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT to_regclass('text_postings_order') IS NOT NULL AS ok"
            ).fetchone()
        return bool(row and row["ok"])

    def drop(self) -> None:
        with self.pool.connection() as conn:
            conn.execute("DROP INDEX IF EXISTS text_postings_order")

    def build(self) -> None:
        """Build the postings' index if it is missing, as migration 010 made it."""
        # The lock ends with the transaction: a build that fails (a full disk) leaves it
        # aborted, where an unlock would fail too and hide why.
        with self.pool.connection() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", _BUILDING)
            conn.execute(
                "CREATE INDEX IF NOT EXISTS text_postings_order"
                " ON text_postings (lexeme, impact DESC, chunk_id) INCLUDE (document_id)"
            )
