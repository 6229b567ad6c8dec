"""The vaults the index holds: the folder, config and settings each was last synced with, a
vault re-keyed when its config renames it, and a vault removed with its notes when the user
says so, what the models made of them kept."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, LiteralString

import psycopg
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from kb.store.pool import Pool
from kb.vault.presence import Held
from kb.vault.sync_plan import StoredVault, VaultFilter

# Several configurations may share one index: a read of one is kept to its vaults, given in
# %(vaults)s by `vaults_param` (NULL: every vault, where the index holds no other; an empty
# list: no vault; kb.vault.sync_plan.VaultFilter).
# A row of a table with a `vault` column (documents, failures):
ROW_IN_VAULTS = "(%(vaults)s::text[] IS NULL OR vault = ANY(%(vaults)s::text[]))"
# A row of a table with a `document_id` column (chunks, enrichment_queue):
DOCUMENT_IN_VAULTS = """(%(vaults)s::text[] IS NULL OR document_id IN
    (SELECT id FROM documents WHERE vault = ANY(%(vaults)s::text[])))"""


def vaults_param(vaults: VaultFilter) -> list[str] | None:
    """A vault filter as the %(vaults)s of ROW_IN_VAULTS and DOCUMENT_IN_VAULTS."""
    return None if vaults is None else list(vaults)


class VaultRows:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def stored(self) -> list[StoredVault]:
        """Every vault the index holds rows of, by name."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT v.name, v.folder, v.config, v.settings,"
                "       (SELECT count(*) FROM documents d WHERE d.vault = v.name) AS notes"
                "  FROM vaults v ORDER BY v.name"
            ).fetchall()
        return [StoredVault(**r) for r in rows]

    def holders(self) -> dict[str, tuple[str | None, str | None]]:
        """Each stored vault's folder and the config file that last synced it (None: not
        known)."""
        with self.pool.connection() as conn:
            rows = conn.execute("SELECT name, folder, config FROM vaults").fetchall()
        return {r["name"]: (r["folder"], r["config"]) for r in rows}

    def names(self) -> set[str]:
        with self.pool.connection() as conn:
            return {r["name"] for r in conn.execute("SELECT name FROM vaults").fetchall()}

    def record(
        self,
        name: str,
        folder: str,
        config: str | None = None,
        settings: Mapping[str, str] | None = None,
        device: int | None = None,
    ) -> None:
        """Vault `name` is synced from `folder` now, by the config file `config` (None: a
        config read from no file) with these settings, its folder on `device` (st_dev)."""
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO vaults (name, folder, config, settings, device, synced_at)"
                " VALUES (%s, %s, %s, %s, %s, now())"
                " ON CONFLICT (name) DO UPDATE SET folder = EXCLUDED.folder,"
                "   config = EXCLUDED.config, settings = EXCLUDED.settings,"
                "   device = EXCLUDED.device, synced_at = now()",
                (
                    name,
                    folder,
                    config,
                    None if settings is None else Jsonb(dict(settings)),
                    device,
                ),
            )

    def rename(self, old: str, new: str) -> int:
        """Re-key vault `old`'s rows as `new`'s (which holds none); the notes moved."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("UPDATE vaults SET name = %s WHERE name = %s", (new, old))
            moved = conn.execute("UPDATE documents SET vault = %s WHERE vault = %s", (new, old))
            conn.execute("UPDATE failures SET vault = %s WHERE vault = %s", (new, old))
            return moved.rowcount

    def forget(self, name: str) -> int:
        """Remove vault `name` and its notes; their model outputs and vectors are kept
        (`keep_paid_for`). Returns how many notes went."""
        with self.pool.connection() as conn, conn.transaction():
            keep_paid_for(conn, "d.vault = %(vault)s", {"vault": name})
            gone = conn.execute("DELETE FROM documents WHERE vault = %s", (name,))
            conn.execute("DELETE FROM failures WHERE vault = %s", (name,))
            conn.execute("DELETE FROM vaults WHERE name = %s", (name,))
            return gone.rowcount

    def held(self, name: str) -> Held:
        """Whether the index holds notes of vault `name`, and the device its folder was on
        at its last sync."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM documents WHERE vault = %(v)s) AS notes,"
                "       (SELECT device FROM vaults WHERE name = %(v)s) AS device",
                {"v": name},
            ).fetchone()
        assert row is not None
        return Held(**row)


def keep_paid_for(conn: psycopg.Connection[DictRow], where: LiteralString, params: Any) -> None:
    """Keep what the models made of the notes `where` picks (a condition on documents `d`)
    before they are deleted: their outputs by cache key and their vectors by text hash, so
    that content enriched and embedded once is never sent to a model again, whichever vault
    or path it comes back at. A fallback (structural context where the model's answer was
    rejected) is kept with the model that failed, as in the rows."""
    conn.execute(
        """
        INSERT INTO kept_outputs (key, text, fallback)
        SELECT DISTINCT ON (key) key, text, fallback FROM (
            SELECT d.summary_key AS key, d.summary AS text, d.summary_fallback AS fallback
              FROM documents d WHERE """
        + where
        + """
            UNION ALL
            SELECT d.voice_key, d.voice, d.voice_fallback FROM documents d WHERE """
        + where
        + """
            UNION ALL
            SELECT unnest(ARRAY[c.summary_key, c.rewrite_key, c.statements_key,
                                c.questions_key]),
                   unnest(ARRAY[c.summary, c.rewrite, c.statements, c.questions]),
                   unnest(ARRAY[c.summary_fallback, c.rewrite_fallback,
                                c.statements_fallback, c.questions_fallback])
              FROM chunks c JOIN documents d ON d.id = c.document_id
             WHERE """
        + where
        + """
        ) AS outputs
         WHERE key IS NOT NULL AND text IS NOT NULL
         -- An answer the model gave beats a fallback under the same key.
         ORDER BY key, fallback IS NOT NULL
        ON CONFLICT (key) DO UPDATE SET text = EXCLUDED.text, fallback = NULL
         WHERE kept_outputs.fallback IS NOT NULL AND EXCLUDED.fallback IS NULL
        """,
        params,
    )
    conn.execute(
        """
        INSERT INTO kept_vectors (text_hash, embed_model, embedding)
        SELECT c.context_hash, c.embed_model, c.embedding
          FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.embedding IS NOT NULL AND """
        + where
        + """
        UNION ALL
        SELECT p.text_hash, p.embed_model, p.embedding
          FROM passages p JOIN chunks c ON c.id = p.chunk_id
          JOIN documents d ON d.id = c.document_id
         WHERE p.embedding IS NOT NULL AND """
        + where
        + """
        ON CONFLICT DO NOTHING
        """,
        params,
    )
