"""kb's PostgreSQL store: one repository per group of tables, over one connection pool.

- `documents`: notes and their chunks as rows (a chunk's row is `chunks.ChunkRecord`),
  moves, deletes, failed notes;
- `caches`: model outputs already paid for (summaries, rewrites, vectors, judgements);
- `vectors`: the embedding space and chunks waiting for a vector;
- `passages`: a chunk's extra texts with vectors of their own, and those waiting for one;
- `candidates`: a query's candidates, and the notes a search may name
  (`candidates.CandidateReads`);
- `state`: small key/value state and `kb status`'s report;
- `daemons`: who is running (the writer lock itself is `lock.WriterLock`);
- `queue`: notes waiting for their vectors and their LLM context;
- `workers`: the workers draining the queues, by their heartbeats;
- `texts`: the texts waiting for a vector, and their vectors written back;
- `enriched`: a queued note's rows for its LLM context, and that context written back;
- `links`: notes' links, where each leads, and the notes that link to a note;
- `vaults`: the vaults the index holds, the folder each was synced from;
- `text_index`: the text index's postings B-tree, dropped for a bulk load of notes;
- `related`: what related notes read of a note and of the notes near it.

The schema is migrated once at start-up (`kb.store.schema.migrate`, called by the composition
root), never here.
"""

from __future__ import annotations

from kb.results import SearchHit
from kb.store.caches import Caches
from kb.store.candidates import (
    NO_FILTER,
    Candidate,
    CandidateReads,
    Candidates,
    NoteInfo,
    NotePage,
    SearchFilter,
)
from kb.store.chunks import ChunkRecord, LinesRecord
from kb.store.documents import Authorship, DocumentRecord, Documents, NoteRows, Undated
from kb.store.enriched import Enriched, EnrichedNotes, QueuedNote
from kb.store.links import LinkCounts, LinkRow, Links, StoredNote
from kb.store.lock import DaemonBeat, DaemonRow, Daemons, Role, WriterLock
from kb.store.nearby import Related
from kb.store.passages import PassageRecord, Passages
from kb.store.pool import Vector, open_pool
from kb.store.queue import Claim, Pending, Queue, QueueStatus
from kb.store.state import FailedFile, LastSync, Reconciliation, State, Status
from kb.store.text_index import TextIndex
from kb.store.texts import Texts
from kb.store.vaults import VaultRows
from kb.store.vectors import Vectors
from kb.store.workers import WorkerBeat, WorkerRow, Workers

__all__ = [
    "NO_FILTER",
    "Authorship",
    "Candidate",
    "Candidates",
    "ChunkRecord",
    "Claim",
    "DaemonBeat",
    "DaemonRow",
    "DocumentRecord",
    "Enriched",
    "FailedFile",
    "LastSync",
    "LinesRecord",
    "LinkCounts",
    "LinkRow",
    "NoteInfo",
    "NotePage",
    "NoteRows",
    "PassageRecord",
    "Pending",
    "QueueStatus",
    "QueuedNote",
    "Reconciliation",
    "Role",
    "SearchFilter",
    "SearchHit",
    "Status",
    "Store",
    "StoredNote",
    "Undated",
    "Vector",
    "WorkerBeat",
    "WorkerRow",
    "WriterLock",
]


class Store:
    """The repositories of one database, sharing one pool."""

    def __init__(self, url: str, *, max_connections: int = 8) -> None:
        self.url = url
        self.pool = open_pool(url, max_connections=max_connections)
        self.documents = Documents(self.pool)
        self.caches = Caches(self.pool)
        self.vectors = Vectors(self.pool)
        self.passages = Passages(self.pool)
        self.candidates = CandidateReads(self.pool)
        self.state = State(self.pool)
        self.daemons = Daemons(self.pool)
        self.queue = Queue(self.pool)
        self.enriched = EnrichedNotes(self.pool)
        self.workers = Workers(self.pool)
        self.texts = Texts(self.pool)
        self.vaults = VaultRows(self.pool)
        self.text_index = TextIndex(self.pool)
        self.links = Links(self.pool)
        self.related = Related(self.pool)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
