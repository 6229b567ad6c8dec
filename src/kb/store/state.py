"""Small key/value state (the embedding space, the last sync) and the report `kb status` prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from kb.store.pool import Pool, iso
from kb.store.vaults import DOCUMENT_IN_VAULTS, ROW_IN_VAULTS, vaults_param
from kb.vault.sync_plan import VaultFilter


@dataclass(frozen=True)
class LastSync:
    """The last whole sync of the vaults."""

    at: str
    files: int
    indexed: int
    failed: int
    llm_calls: int


@dataclass(frozen=True)
class Reconciliation:
    """The daemon's last reconciliation: why it ran, how long it took, what it did."""

    at: str
    reason: str
    seconds: float
    files: int
    indexed: int
    moved: int
    deleted: int
    failed: int
    # Folders that could not be read; records written before these were counted have none.
    unreadable: int
    llm_calls: int

    @classmethod
    def from_state(cls, value: dict[str, Any]) -> Reconciliation:
        return cls(**{"unreadable": 0, **value})


@dataclass(frozen=True)
class FailedFile:
    """A note that could not be indexed, and why."""

    vault: str
    path: str
    error: str
    failed_at: str


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
    last_sync: LastSync | None
    failures: list[FailedFile] = field(default_factory=list)
    # Outputs stored as structural context because the model's answer was rejected.
    fallbacks: dict[str, int] = field(default_factory=dict)


def read_state(conn: psycopg.Connection[DictRow], key: str, *, lock: bool = False) -> Any:
    """A value; with `lock`, its row is held from writers until the transaction ends."""
    if lock:
        row = conn.execute("SELECT value FROM state WHERE key = %s FOR SHARE", (key,)).fetchone()
    else:
        row = conn.execute("SELECT value FROM state WHERE key = %s", (key,)).fetchone()
    return row["value"] if row else None


def write_state(conn: psycopg.Connection[DictRow], key: str, value: Any) -> None:
    conn.execute(
        "INSERT INTO state (key, value) VALUES (%s, %s)"
        " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (key, Jsonb(value)),
    )


class State:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def get(self, key: str) -> Any:
        with self.pool.connection() as conn:
            return read_state(conn, key)

    def set(self, key: str, value: Any) -> None:
        with self.pool.connection() as conn:
            write_state(conn, key, value)

    def last_reconcile(self) -> Reconciliation | None:
        value = self.get("last_reconcile")
        return Reconciliation.from_state(value) if value else None

    def reconciled(self, record: Reconciliation) -> None:
        self.set("last_reconcile", asdict(record))

    def synced(self, record: LastSync) -> None:
        """The last whole sync, read back by `status` in the same shape."""
        self.set("last_sync", asdict(record))

    def status(self, vaults: VaultFilter = None) -> Status:
        """One pass over each table: the counts a large index would pay for many times; of
        `vaults` alone when given (see kb.vault.sync_plan.VaultFilter)."""
        with self.pool.connection() as conn:
            by_model = conn.execute(
                "SELECT chat_model, count(*) AS chunks,"
                "       count(*) FILTER (WHERE embedding IS NOT NULL) AS embedded,"
                # Full-text search reads the kept statements and questions after what is
                # embedded (see kb.context.layout.with_lines): only the part before them is
                # cut.
                "       count(*) FILTER (WHERE embed_text <> left(full_context,"
                "           length(full_context)"
                "           - CASE WHEN statements_fallback IS NULL AND statements <> ''"
                "                  THEN length(statements) + 2 ELSE 0 END"
                "           - CASE WHEN questions_fallback IS NULL AND questions <> ''"
                "                  THEN length(questions) + 2 ELSE 0 END)) AS cut,"
                "       count(*) FILTER (WHERE summary_fallback IS NOT NULL) AS chunk_summary,"
                "       count(*) FILTER (WHERE rewrite_fallback IS NOT NULL) AS rewrite"
                "  FROM chunks WHERE "
                + DOCUMENT_IN_VAULTS
                + " GROUP BY chat_model ORDER BY 2 DESC",
                {"vaults": vaults_param(vaults)},
            ).fetchall()
            docs = conn.execute(
                "SELECT count(*) AS documents,"
                "       count(*) FILTER (WHERE summary_fallback IS NOT NULL) AS file_summary"
                "  FROM documents WHERE " + ROW_IN_VAULTS,
                {"vaults": vaults_param(vaults)},
            ).fetchone()
            assert docs is not None
            failures = conn.execute(
                "SELECT vault, path, error, failed_at FROM failures WHERE "
                + ROW_IN_VAULTS
                + " ORDER BY vault, path",
                {"vaults": vaults_param(vaults)},
            ).fetchall()
            space = read_state(conn, "embedding_space")
            last_sync = read_state(conn, "last_sync")

        def total(column: str) -> int:
            return sum(r[column] for r in by_model)

        fallbacks = {
            "file_summary": docs["file_summary"],
            "chunk_summary": total("chunk_summary"),
            "rewrite": total("rewrite"),
        }
        return Status(
            documents=docs["documents"],
            chunks=total("chunks"),
            embedded=total("embedded"),
            cut=total("cut"),
            chat_models={r["chat_model"]: r["chunks"] for r in by_model},
            embed_model=space["model"] if space else None,
            dimensions=int(space["dimensions"]) if space else None,
            last_sync=LastSync(**last_sync) if last_sync else None,
            failures=[FailedFile(**{**f, "failed_at": iso(f["failed_at"])}) for f in failures],
            fallbacks={task: n for task, n in fallbacks.items() if n},
        )
