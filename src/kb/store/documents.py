"""Notes and their chunks as rows: written whole, re-keyed on a move, deleted; and the notes
that failed to index."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, LiteralString

from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from kb.dates import DateSource, file_day
from kb.store import passages
from kb.store.chunks import ChunkRecord, VoiceRecord
from kb.store.links import LINKS_VERSION, rename_note, write_links
from kb.store.pool import Pool, like_prefix
from kb.store.queue import Pending, queue_notes
from kb.store.vaults import ROW_IN_VAULTS, keep_paid_for, vaults_param
from kb.vault.link_rules import Link
from kb.vault.notes import OnDisk
from kb.vault.sync_plan import Stored, VaultFilter

# The columns of a Stored note, for every query that returns one.
_STORED = "SELECT path, content_hash, size, mtime_ns, personal, context_build FROM documents"

_COPY_CHUNKS = """
    COPY chunks (id, document_id, position, header_path, content, content_hash, start_line,
                 end_line, summary, summary_key, rewrite, rewrite_key, full_context,
                 embed_text, context_hash, chat_model, embedding, embed_model,
                 summary_fallback, rewrite_fallback, summaries_at, statements,
                 statements_key, statements_fallback, questions, questions_key,
                 questions_fallback) FROM STDIN
"""


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
    context_build: str  # how the context was built, see ContextBuild.id
    summary_fallback: str | None = None  # the chat model whose summary was rejected
    voice: VoiceRecord | None = None  # the writer the chat model named (kb.context.voices)
    note_date: dt.date | None = None  # the note's date (kb.dates.note_date)
    date_source: DateSource | None = None  # where it was read
    date_unread: str | None = None  # a date property that names no day, passed over


@dataclass(frozen=True)
class Undated:
    """A note whose date property was passed over, and how it was dated instead."""

    vault: str
    path: str
    property: str  # as written: "date: soon"
    dated_by: DateSource


@dataclass(frozen=True)
class NoteRows:
    """A note ready to be written: its row, its chunks' rows, how it is queued for its
    LLM context (`pending`) and for the vectors its rows lack (`vectors`), and its links."""

    doc: DocumentRecord
    chunks: Sequence[ChunkRecord]
    pending: Pending | None = None
    vectors: Pending | None = None
    links: Sequence[Link] = ()


_UPSERT_DOCUMENT = """
    INSERT INTO documents (vault, path, content_hash, size, mtime_ns, metadata, personal,
                           summary, summary_key, summary_fallback, context_build,
                           voice, voice_key, voice_fallback, note_date, date_source,
                           date_unread, links_version, indexed_at)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())
    ON CONFLICT (vault, path) DO UPDATE SET
        content_hash = EXCLUDED.content_hash, size = EXCLUDED.size,
        mtime_ns = EXCLUDED.mtime_ns, metadata = EXCLUDED.metadata,
        personal = EXCLUDED.personal, summary = EXCLUDED.summary,
        summary_key = EXCLUDED.summary_key, summary_fallback = EXCLUDED.summary_fallback,
        context_build = EXCLUDED.context_build, voice = EXCLUDED.voice,
        voice_key = EXCLUDED.voice_key, voice_fallback = EXCLUDED.voice_fallback,
        note_date = EXCLUDED.note_date, date_source = EXCLUDED.date_source,
        date_unread = EXCLUDED.date_unread, links_version = EXCLUDED.links_version,
        indexed_at = now()
    RETURNING id
"""


def _document_params(doc: DocumentRecord) -> tuple[object, ...]:
    return (
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
        *(doc.voice.params() if doc.voice else (None, None, None)),
        doc.note_date,
        doc.date_source,
        doc.date_unread,
        LINKS_VERSION,  # its links are written with it
    )


@dataclass(frozen=True)
class Authorship:
    """Who wrote a note and when, as an answer's passages say it (kb.search.reading)."""

    writer: str | None  # the writer the chat model named (kb.context.voices), where it named one
    day: dt.date | None  # the note's own date; None where it has only its file's time


class Documents:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def states(self, vault: str) -> dict[str, Stored]:
        return {s.path: s for s in self._stored(_STORED + " WHERE vault = %s", (vault,))}

    @contextmanager
    def each_state(self, vault: str) -> Iterator[Iterator[Stored]]:
        """A vault's rows in path order (code point order, as `plan.pair` walks them), read
        a thousand at a time: a sync of a large vault holds a few of them, not all."""
        with (
            self.pool.connection() as conn,
            conn.cursor("states", row_factory=class_row(Stored)) as cur,
        ):
            cur.itersize = 1000
            cur.execute(_STORED + ' WHERE vault = %s ORDER BY path COLLATE "C"', (vault,))
            yield iter(cur)

    def states_in(
        self, vault: str, paths: Iterable[str], folders: Iterable[str]
    ) -> dict[str, Stored]:
        """The rows of some files and of everything under some folders ("a/b/"; "" is the root)."""
        rows = self._stored(
            _STORED + " WHERE vault = %s AND (path = ANY(%s) OR path LIKE ANY(%s))",
            (vault, list(paths), [like_prefix(f) for f in folders]),
        )
        return {s.path: s for s in rows}

    def states_with_hashes(self, vault: str, hashes: Iterable[str]) -> list[Stored]:
        return self._stored(
            _STORED + " WHERE vault = %s AND content_hash = ANY(%s) ORDER BY path",
            (vault, list(set(hashes))),
        )

    def _stored(self, query: LiteralString, params: tuple[object, ...]) -> list[Stored]:
        """Each row made a Stored as it is read: a sync of a large vault holds one record a
        note, not a dict a note beside it."""
        with self.pool.connection() as conn, conn.cursor(row_factory=class_row(Stored)) as cur:
            return cur.execute(query, params).fetchall()

    def save(self, notes: Sequence[NoteRows]) -> None:
        """Replace some documents and all their chunks in one transaction; each queued for
        its vectors and its LLM context as it says, else taken off those queues.

        Many notes to a transaction is what makes a large vault quick to load: the triggers
        that keep the text index (migration 010) run once per statement, and update the
        statistics of a word once for all the notes that use it.
        """
        if not notes:
            return
        with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                _UPSERT_DOCUMENT, [_document_params(n.doc) for n in notes], returning=True
            )
            ids: list[int] = []
            while True:
                row = cur.fetchone()
                assert row is not None
                ids.append(row["id"])
                if not cur.nextset():
                    break
            cur.execute("DELETE FROM chunks WHERE document_id = ANY(%s)", (ids,))
            pairs = list(zip(ids, notes, strict=True))
            write_links(
                cur, [(i, n.doc.path, n.doc.metadata.get("aliases", []), n.links) for i, n in pairs]
            )
            queue_notes(cur, "embed", [(i, n.doc.content_hash, n.vectors) for i, n in pairs])
            queue_notes(cur, "enrich", [(i, n.doc.content_hash, n.pending) for i, n in pairs])
            cur.execute(
                "DELETE FROM failures f USING unnest(%s::text[], %s::text[]) AS n(vault, path)"
                " WHERE f.vault = n.vault AND f.path = n.path",
                ([n.doc.vault for n in notes], [n.doc.path for n in notes]),
            )
            # The chunks' ids taken first: their passages are written without reading back
            # the rows just written.
            cur.execute(
                "SELECT nextval(pg_get_serial_sequence('chunks', 'id')) AS id"
                "  FROM generate_series(1, %s)",
                (sum(len(n.chunks) for n in notes),),
            )
            chunk_ids = iter([r["id"] for r in cur.fetchall()])
            chunks = [(next(chunk_ids), doc_id, c) for doc_id, n in pairs for c in n.chunks]
            # Last, so the text index's lock (taken by its trigger) is held only until commit.
            with cur.copy(_COPY_CHUNKS) as copy:
                for chunk_id, doc_id, c in chunks:
                    copy.write_row(
                        (
                            chunk_id,
                            doc_id,
                            c.position,
                            list(c.header_path),
                            c.content,
                            c.content_hash,
                            c.start_line,
                            c.end_line,
                            *c.context_params(),
                        )
                    )
            passages.write(cur, [(chunk_id, p) for chunk_id, _, c in chunks for p in c.passages])

    def touch(self, vault: str, files: Sequence[OnDisk]) -> None:
        """Record new sizes and mtimes of notes whose content did not change, in one statement
        (a sync tool that touches every note must not cost a commit per note)."""
        if not files:
            return
        with self.pool.connection() as conn:
            # A note dated by its file's time takes the new one's day.
            conn.execute(
                "UPDATE documents d SET size = f.size, mtime_ns = f.mtime_ns,"
                "       note_date = CASE WHEN d.date_source = 'file time' THEN f.day"
                "                   ELSE d.note_date END"
                "  FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::date[])"
                "    AS f(path, size, mtime_ns, day)"
                " WHERE d.vault = %s AND d.path = f.path",
                (
                    [f.path for f in files],
                    [f.size for f in files],
                    [f.mtime_ns for f in files],
                    [file_day(f.mtime_ns) for f in files],
                    vault,
                ),
            )

    def move(self, vault: str, old_path: str, new_path: str, size: int, mtime_ns: int) -> None:
        """Re-key a renamed or moved file; its chunks, vectors and links stay as they are."""
        with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute("DELETE FROM documents WHERE vault = %s AND path = %s", (vault, new_path))
            cur.execute(
                "UPDATE documents SET path = %s, size = %s, mtime_ns = %s,"
                " note_date = CASE WHEN date_source = 'file time' THEN %s ELSE note_date END"
                " WHERE vault = %s AND path = %s",
                (new_path, size, mtime_ns, file_day(mtime_ns), vault, old_path),
            )
            rename_note(cur, vault, old_path, new_path)
            cur.execute(
                "DELETE FROM failures WHERE vault = %s AND path = ANY(%s)",
                (vault, [old_path, new_path]),
            )

    def delete(self, vault: str, paths: Iterable[str]) -> int:
        paths = list(paths)
        if not paths:
            return 0
        with self.pool.connection() as conn, conn.transaction():
            # A note put back (a deletion undone, a sync tool's round trip) costs nothing.
            keep_paid_for(
                conn,
                "d.vault = %(vault)s AND d.path = ANY(%(paths)s)",
                {"vault": vault, "paths": paths},
            )
            cur = conn.execute(
                "DELETE FROM documents WHERE vault = %s AND path = ANY(%s)", (vault, paths)
            )
            conn.execute("DELETE FROM failures WHERE vault = %s AND path = ANY(%s)", (vault, paths))
            return cur.rowcount

    def record_failure(self, vault: str, path: str, error: str) -> None:
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO failures (vault, path, error) VALUES (%s, %s, %s)"
                " ON CONFLICT (vault, path) DO UPDATE"
                " SET error = EXCLUDED.error, failed_at = now()",
                (vault, path, error),
            )

    def authorship(self, notes: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Authorship]:
        """The writer and own date of each of these (vault, path) notes."""
        if not notes:
            return {}
        vaults, paths = zip(*set(notes), strict=True)
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT d.vault, d.path,"
                "       CASE WHEN d.voice <> '' AND d.voice_fallback IS NULL"
                "            THEN d.voice END AS writer,"
                "       CASE WHEN d.date_source <> 'file time' THEN d.note_date END AS day"
                "  FROM documents d"
                "  JOIN unnest(%s::text[], %s::text[]) AS n(vault, path)"
                "    ON d.vault = n.vault AND d.path = n.path",
                (list(vaults), list(paths)),
            ).fetchall()
        return {(r["vault"], r["path"]): Authorship(r["writer"], r["day"]) for r in rows}

    def folder_names(self, vaults: Sequence[str]) -> set[str]:
        """The names of the folders that hold these vaults' notes, at any depth."""
        if not vaults:
            return set()
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT folder FROM documents d,"
                "       unnest(trim_array(string_to_array(d.path, '/'), 1)) AS folder"
                " WHERE d.vault = ANY(%s)",
                (list(vaults),),
            ).fetchall()
        return {r["folder"] for r in rows}

    def undated(self, vaults: VaultFilter = None) -> list[Undated]:
        """Notes of `vaults` (None: every vault) whose date property names no day ("date:
        soon"), dated another way."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT vault, path, date_unread AS property, date_source AS dated_by"
                " FROM documents WHERE date_unread IS NOT NULL AND "
                + ROW_IN_VAULTS
                + " ORDER BY vault, path",
                {"vaults": vaults_param(vaults)},
            ).fetchall()
        return [Undated(**r) for r in rows]

    def failures(self, vault: str) -> dict[str, str]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT path, error FROM failures WHERE vault = %s", (vault,)
            ).fetchall()
        return {r["path"]: r["error"] for r in rows}

    def keep_failures(self, vault: str, there: Callable[[str], bool]) -> None:
        """Forget the failures of a vault's files that are no longer `there`. The few failed
        paths are checked here, rather than every path of the vault going to the database."""
        with self.pool.connection() as conn, conn.transaction():
            failed = conn.execute("SELECT path FROM failures WHERE vault = %s", (vault,))
            gone = [r["path"] for r in failed if not there(r["path"])]
            if gone:
                conn.execute(
                    "DELETE FROM failures WHERE vault = %s AND path = ANY(%s)", (vault, gone)
                )

    def row_counts(self) -> dict[str, int]:
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

    def without_vectors(self, model: str) -> list[tuple[str, str]]:
        """(vault, path) of documents with a chunk that lacks a vector from `model` and that
        do not wait for it in the embedding queue."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT d.vault, d.path FROM chunks c JOIN documents d"
                " ON d.id = c.document_id"
                " WHERE (c.embedding IS NULL OR c.embed_model IS DISTINCT FROM %s)"
                "   AND NOT EXISTS (SELECT 1 FROM embedding_queue q WHERE q.document_id = d.id)",
                (model,),
            ).fetchall()
        return [(r["vault"], r["path"]) for r in rows]
