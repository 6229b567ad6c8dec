"""Upgrading an index that holds data: each migration keeps what was stored, against a real
PostgreSQL."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from kb import db


def _migrate_to(url: str, last: int) -> None:
    """The database as a kb whose newest migration is `last` left it."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for m in db.migrations():
            if m.version <= last:
                conn.execute(m.sql.encode())
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (m.version, m.name),
                )


def test_search_text_keeps_what_full_text_search_read(db_url: str) -> None:
    _migrate_to(db_url, 12)
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        doc = conn.execute(
            "INSERT INTO documents (vault, path, content_hash, size, mtime_ns, metadata,"
            " personal, summary, summary_key, context_build, indexed_at)"
            " VALUES ('v', 'a.md', 'h', 1, 1, '{}', false, 's', 'k', 'old', now()) RETURNING id"
        ).fetchone()
        assert doc is not None
        for position, (full, embedded) in enumerate(
            [("zeppelin flights over the bay", "zeppelin flights over the bay"),
             ("airship hangars and a long summary", "airship hangars")]
        ):  # fmt: skip
            conn.execute(
                "INSERT INTO chunks (document_id, position, header_path, content, content_hash,"
                " start_line, end_line, summary, summary_key, full_context, embed_text,"
                " context_hash, chat_model, embed_model)"
                " VALUES (%s, %s, '{}', %s, %s, 1, 1, '', '', %s, %s, %s, 'chat', 'embed')",
                (doc["id"], position, full, f"c{position}", full, embedded, f"x{position}"),
            )

    assert db.migrate(db_url) == [m.version for m in db.migrations() if m.version > 12]

    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        chunks = conn.execute(
            "SELECT search_text, embed_cut FROM chunks ORDER BY position"
        ).fetchall()
        assert chunks == [
            {"search_text": "zeppelin flights over the bay", "embed_cut": False},
            {"search_text": "airship hangars and a long summary", "embed_cut": True},
        ]
        # The postings follow the renamed column: a new text replaces the old one's words.
        conn.execute("UPDATE chunks SET search_text = 'balloon rides' WHERE position = 0")
        lexemes = {
            r["lexeme"]
            for r in conn.execute(
                "SELECT p.lexeme FROM text_postings p JOIN chunks c ON c.id = p.chunk_id"
                " WHERE c.position = 0"
            )
        }
        assert lexemes == {"balloon", "ride"}
        counted = conn.execute("SELECT chunks FROM text_lexemes WHERE lexeme = 'zeppelin'")
        assert counted.fetchone() == {"chunks": 0}
