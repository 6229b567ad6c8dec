"""A small vault of linked notes, for the tests of related notes."""

from __future__ import annotations

from pathlib import Path

NOTES = {
    "Postgres.md": "# Postgres\n\nThe database kb keeps its index in. See [[pgvector]].\n",
    "pgvector.md": "# pgvector\n\nVector search inside Postgres: HNSW indexes, cosine distance.\n"
    "Back to [[Postgres]].\n",
    "Indexing.md": "# Indexing\n\nHow notes become chunks and vectors. It writes to Postgres\n"
    "and uses [[HNSW indexes]] through pgvector.\n\n## Later\n\nNothing about databases.\n",
    "HNSW indexes.md": "---\naliases: [HNSW]\n---\n# HNSW indexes\n\nA graph of vectors that"
    " pgvector builds for nearest-neighbour search. See [[pgvector]].\n",
    "Journal/2024-05-01.md": "# 1 May\n\nRead about [[pgvector]] and cosine distance.\n",
    "Journal/2024-05-02.md": "# 2 May\n\nTried [[pgvector]] HNSW indexes on my notes.\n",
    "Cooking.md": "# Cooking\n\nA recipe for bread: flour, water, salt, time.\n",
}


def write_linked_vault(root: Path) -> Path:
    """The notes written under `root`; `root` returned."""
    for path, text in NOTES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root
