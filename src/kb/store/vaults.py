"""The vaults the index holds: the folder each was last synced from, a vault re-keyed when
its config renames it, and a vault removed with its notes when the user says so."""

from __future__ import annotations

from kb.store.pool import Pool
from kb.vault.presence import Held
from kb.vault.sync_plan import StoredVault

# Several configurations may share one index: a read of one is kept to its vaults, given in
# %(vaults)s (an empty list: every vault, where the index holds no other;
# kb.vault.sync_plan.vault_filter).
# A row of a table with a `vault` column (documents, failures):
ROW_IN_VAULTS = "(cardinality(%(vaults)s::text[]) = 0 OR vault = ANY(%(vaults)s::text[]))"
# A row of a table with a `document_id` column (chunks, enrichment_queue):
DOCUMENT_IN_VAULTS = """(cardinality(%(vaults)s::text[]) = 0 OR document_id IN
    (SELECT id FROM documents WHERE vault = ANY(%(vaults)s::text[])))"""


class VaultRows:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def stored(self) -> list[StoredVault]:
        """Every vault the index holds rows of, by name."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT v.name, v.folder,"
                "       (SELECT count(*) FROM documents d WHERE d.vault = v.name) AS notes"
                "  FROM vaults v ORDER BY v.name"
            ).fetchall()
        return [StoredVault(**r) for r in rows]

    def names(self) -> set[str]:
        with self.pool.connection() as conn:
            return {r["name"] for r in conn.execute("SELECT name FROM vaults").fetchall()}

    def record(self, name: str, folder: str) -> None:
        """Vault `name` is synced from `folder` now."""
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO vaults (name, folder, synced_at) VALUES (%s, %s, now())"
                " ON CONFLICT (name) DO UPDATE SET folder = EXCLUDED.folder, synced_at = now()",
                (name, folder),
            )

    def rename(self, old: str, new: str) -> int:
        """Re-key vault `old`'s rows as `new`'s (which holds none); the notes moved."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("UPDATE vaults SET name = %s WHERE name = %s", (new, old))
            moved = conn.execute("UPDATE documents SET vault = %s WHERE vault = %s", (new, old))
            conn.execute("UPDATE failures SET vault = %s WHERE vault = %s", (new, old))
            return moved.rowcount

    def forget(self, name: str) -> int:
        """Remove vault `name` and its notes; their model outputs are kept by cache key.
        Returns how many notes went."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(
                """
                INSERT INTO kept_outputs (key, text, fallback)
                SELECT DISTINCT ON (key) key, text, fallback FROM (
                    SELECT summary_key AS key, summary AS text, summary_fallback AS fallback
                      FROM documents WHERE vault = %(v)s
                    UNION ALL
                    SELECT voice_key, voice, voice_fallback FROM documents WHERE vault = %(v)s
                    UNION ALL
                    SELECT unnest(ARRAY[c.summary_key, c.rewrite_key, c.statements_key,
                                        c.questions_key]),
                           unnest(ARRAY[c.summary, c.rewrite, c.statements, c.questions]),
                           unnest(ARRAY[c.summary_fallback, c.rewrite_fallback,
                                        c.statements_fallback, c.questions_fallback])
                      FROM chunks c JOIN documents d ON d.id = c.document_id
                     WHERE d.vault = %(v)s
                ) AS outputs
                 WHERE key IS NOT NULL AND text IS NOT NULL
                 -- An answer the model gave beats a fallback under the same key.
                 ORDER BY key, fallback IS NOT NULL
                ON CONFLICT (key) DO UPDATE SET text = EXCLUDED.text, fallback = NULL
                 WHERE kept_outputs.fallback IS NOT NULL AND EXCLUDED.fallback IS NULL
                """,
                {"v": name},
            )
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

    def record_device(self, name: str, device: int) -> None:
        """Vault `name`'s folder was synced on `device`."""
        with self.pool.connection() as conn:
            conn.execute("UPDATE vaults SET device = %s WHERE name = %s", (device, name))
