"""Notes' links as rows (migration 026): written with their note, re-resolved when the notes
they name come, go or move, and read for the faces and for related notes.

Where a link leads is decided by `kb.vault.link_rules.resolve`; re-resolution reads only the
links whose name may now lead elsewhere and the few notes of that name (both by index),
decides in Python, and writes the answers back a thousand to a statement: never a query
per note.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, LiteralString

from psycopg import Cursor

from kb.store.pool import Pool
from kb.store.vaults import DOCUMENT_IN_VAULTS, vaults_param
from kb.vault.link_rules import Link, LinkKind, NoteName, link_key, note_keys, resolve
from kb.vault.sync_plan import VaultFilter

# The extraction of links the rows of a note written now hold (documents.links_version); a
# note with an older one has its links written again by the next sync (migration 026).
LINKS_VERSION = 1

# Links resolved to a statement.
_BATCH = 1000

_COPY_LINKS = """
    COPY links (document_id, position, chunk, line, kind, target, anchor, display, target_key)
    FROM STDIN
"""


@dataclass(frozen=True)
class LinkRow:
    """A link as a face shows it: the note at its other end (for an unresolved link, none:
    `path` is None and `title` the target as written), and where it is written."""

    vault: str
    path: str | None  # the other note's vault-relative path
    title: str  # its frontmatter title, else its file name (as Obsidian names it)
    line: int  # in the linking note
    kind: LinkKind
    target: str  # as written
    anchor: str
    display: str
    document_id: int | None  # the other note's


@dataclass(frozen=True)
class StoredNote:
    """An indexed note as a NOTE argument finds it."""

    document_id: int
    vault: str
    path: str
    aliases: tuple[str, ...]  # as folded keys (kb.vault.link_rules.note_keys)


@dataclass(frozen=True)
class LinkCounts:
    links: int
    unresolved: int


def write_links(
    cur: Cursor[Any], notes: Sequence[tuple[int, str, Sequence[str], Sequence[Link]]]
) -> None:
    """Replace the links and names of some notes being written, in their transaction: each
    (document id, path, aliases, links). Their links are left unresolved: `Links.resolve`
    follows once the sync's notes are written. The caller records LINKS_VERSION in their
    rows (a note's upsert sets it with the rest of its row: no second row version)."""
    if not notes:
        return
    ids = [doc_id for doc_id, _, _, _ in notes]
    cur.execute("DELETE FROM links WHERE document_id = ANY(%s)", (ids,))
    cur.execute("DELETE FROM note_names WHERE document_id = ANY(%s)", (ids,))
    names = [
        (doc_id, key)
        for doc_id, path, aliases, _ in notes
        for key in note_keys(NoteName(path, tuple(aliases)))
    ]
    cur.execute(
        "INSERT INTO note_names (document_id, key) SELECT * FROM unnest(%s::bigint[], %s::text[])",
        ([i for i, _ in names], [k for _, k in names]),
    )
    with cur.copy(_COPY_LINKS) as copy:
        for doc_id, _, _, links in notes:
            for position, link in enumerate(links):
                copy.write_row(
                    (
                        doc_id,
                        position,
                        link.chunk,
                        link.line,
                        link.kind,
                        link.target,
                        link.anchor,
                        link.display,
                        link.key,
                    )
                )


def rename_note(cur: Cursor[Any], vault: str, old_path: str, new_path: str) -> None:
    """A moved note's file name as links find it (its aliases stay)."""
    cur.execute(
        "UPDATE note_names n SET key = %s FROM documents d"
        " WHERE d.id = n.document_id AND d.vault = %s AND d.path = %s AND n.key = %s"
        "   AND NOT EXISTS (SELECT 1 FROM note_names o"
        "                    WHERE o.document_id = n.document_id AND o.key = %s)",
        (link_key(new_path), vault, new_path, link_key(old_path), link_key(new_path)),
    )


def _aliases(path: str, keys: Iterable[str]) -> tuple[str, ...]:
    """A note's aliases, from the names links find it by: those that are not its file's."""
    own = link_key(path)
    return tuple(k for k in keys if k != own)


def _row(r: dict[str, Any]) -> LinkRow:
    path = r["path"]
    title = (r["title"] or "").strip() or (PurePosixPath(path).stem if path else r["target"])
    return LinkRow(
        vault=r["vault"],
        path=path,
        title=title,
        line=r["line"],
        kind=r["kind"],
        target=r["target"],
        anchor=r["anchor"],
        display=r["display"],
        document_id=r["other_id"],
    )


class Links:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def out_links(self, document_id: int) -> list[LinkRow]:
        """The notes a note links to, one row a link, in the order they are written."""
        return self._read(
            "SELECT t.vault, t.path, t.metadata ->> 'title' AS title, t.id AS other_id,"
            "       l.line, l.kind, l.target, l.anchor, l.display"
            "  FROM links l JOIN documents t ON t.id = l.target_id"
            " WHERE l.document_id = %s ORDER BY l.position",
            document_id,
        )

    def backlinks(self, document_id: int) -> list[LinkRow]:
        """The notes that link to a note (one row a link; `line` is in the linking note)."""
        return self._read(
            "SELECT s.vault, s.path, s.metadata ->> 'title' AS title, s.id AS other_id,"
            "       l.line, l.kind, l.target, l.anchor, l.display"
            "  FROM links l JOIN documents s ON s.id = l.document_id"
            ' WHERE l.target_id = %s ORDER BY s.path COLLATE "C", l.position',
            document_id,
        )

    def unresolved(self, document_id: int) -> list[LinkRow]:
        """A note's links that lead to no indexed note."""
        return self._read(
            "SELECT s.vault, NULL AS path, NULL AS title, NULL::bigint AS other_id,"
            "       l.line, l.kind, l.target, l.anchor, l.display"
            "  FROM links l JOIN documents s ON s.id = l.document_id"
            " WHERE l.document_id = %s AND l.target_id IS NULL ORDER BY l.position",
            document_id,
        )

    def _read(self, query: LiteralString, document_id: int) -> list[LinkRow]:
        with self.pool.connection() as conn:
            return [_row(r) for r in conn.execute(query, (document_id,)).fetchall()]

    def edges(self, vaults: VaultFilter) -> list[tuple[int, int]]:
        """Every resolved link between two notes of `vaults` (kb.store.vaults' filter: None
        is every vault) as (source, target) document ids, once per pair, no note to itself."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT document_id AS source, target_id AS target FROM links"
                " WHERE target_id IS NOT NULL AND target_id <> document_id"
                "   AND " + DOCUMENT_IN_VAULTS,
                {"vaults": vaults_param(vaults)},
            ).fetchall()
        return [(r["source"], r["target"]) for r in rows]

    def counts(self, vaults: VaultFilter) -> LinkCounts:
        """How many links the notes of `vaults` hold, and how many lead to no note."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) AS links, count(*) FILTER (WHERE target_id IS NULL) AS unresolved"
                "  FROM links WHERE " + DOCUMENT_IN_VAULTS,
                {"vaults": vaults_param(vaults)},
            ).fetchone()
        assert row is not None
        return LinkCounts(row["links"], row["unresolved"])

    def note_at(self, vaults: Sequence[str], path: str) -> list[StoredNote]:
        """The notes at vault-relative `path` in any of `vaults`."""
        return self._notes("d.path = %(key)s", vaults, path)

    def notes_named(self, vaults: Sequence[str], key: str) -> list[StoredNote]:
        """The notes of `vaults` a link finds by the name `key` (a file name or an alias)."""
        return self._notes(
            "d.id IN (SELECT document_id FROM note_names WHERE key = %(key)s)", vaults, key
        )

    def _notes(self, where: LiteralString, vaults: Sequence[str], key: str) -> list[StoredNote]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT d.id, d.vault, d.path,"
                "       array(SELECT key FROM note_names n WHERE n.document_id = d.id) AS keys"
                "  FROM documents d WHERE d.vault = ANY(%(vaults)s) AND "
                + where
                + ' ORDER BY d.vault, d.path COLLATE "C"',
                {"vaults": list(vaults), "key": key},
            ).fetchall()
        return [
            StoredNote(
                r["id"],
                r["vault"],
                r["path"],
                tuple(k for k in r["keys"] if k != link_key(r["path"])),
            )
            for r in rows
        ]

    def keys_of(self, vault: str, paths: Iterable[str]) -> set[str]:
        """The names (file names and aliases) the notes at these paths are found by now."""
        paths = list(paths)
        if not paths:
            return set()
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT n.key FROM note_names n JOIN documents d ON d.id = n.document_id"
                " WHERE d.vault = %s AND d.path = ANY(%s)",
                (vault, paths),
            ).fetchall()
        return {r["key"] for r in rows}

    def without_links(self, vault: str) -> dict[str, list[tuple[int, int]]]:
        """The notes of a vault whose links were never written (indexed before links were
        stored; found by migration 026's partial index), each with its chunks' line spans
        in position order."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT d.path, array_remove(array_agg(c.start_line ORDER BY c.position),"
                "                            NULL) AS starts,"
                "       array_remove(array_agg(c.end_line ORDER BY c.position), NULL) AS ends"
                "  FROM documents d LEFT JOIN chunks c ON c.document_id = d.id"
                " WHERE d.vault = %s AND d.links_version = 0 GROUP BY d.path",
                (vault,),
            ).fetchall()
        return {r["path"]: list(zip(r["starts"], r["ends"], strict=True)) for r in rows}

    def write(self, vault: str, notes: Sequence[tuple[str, Sequence[str], Sequence[Link]]]) -> int:
        """Write the links and names of some stored notes, each (path, aliases, links),
        their chunks untouched; how many notes were still there to take them."""
        if not notes:
            return 0
        with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            rows = cur.execute(
                "SELECT id, path FROM documents WHERE vault = %s AND path = ANY(%s)",
                (vault, [path for path, _, _ in notes]),
            ).fetchall()
            ids = {r["path"]: r["id"] for r in rows}
            write_links(
                cur, [(ids[p], p, aliases, links) for p, aliases, links in notes if p in ids]
            )
            cur.execute(
                "UPDATE documents SET links_version = %s WHERE id = ANY(%s)",
                (LINKS_VERSION, list(ids.values())),
            )
            return len(ids)

    def resolve(self, vault: str, *, keys: Iterable[str] = (), sources: Iterable[str] = ()) -> int:
        """Decide again where some of a vault's links lead: those written and not resolved
        yet (a note's new links; found by a partial index, so a sync that wrote nothing pays
        one empty lookup), those that look up one of `keys` (the names of notes added, moved,
        deleted or given other aliases), and those that led to one of the notes at
        `sources` (an alias of theirs may be gone). How many changed."""
        keys, sources = sorted(set(keys)), sorted(set(sources))
        with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute(
                # Each way a link is due read by its own index.
                "CREATE TEMPORARY TABLE due ON COMMIT DROP AS"
                " WITH picked AS ("
                "   SELECT document_id, position FROM links WHERE due"
                "   UNION SELECT document_id, position FROM links"
                "          WHERE target_key = ANY(%(keys)s)"
                "   UNION SELECT document_id, position FROM links WHERE target_id IN"
                "     (SELECT id FROM documents"
                "       WHERE vault = %(vault)s AND path = ANY(%(sources)s)))"
                " SELECT l.document_id, l.position, l.target, l.target_key, l.target_id, l.due,"
                "        s.path AS source"
                "   FROM picked JOIN links l USING (document_id, position)"
                "   JOIN documents s ON s.id = l.document_id"
                "  WHERE s.vault = %(vault)s",
                {"vault": vault, "keys": keys, "sources": sources},
            )
            if cur.rowcount == 0:
                return 0
            # Every note a due link may lead to: those found by the name it looks up.
            notes = cur.execute(
                "SELECT d.id, d.path, n.key, array_agg(a.key) AS names"
                "  FROM (SELECT DISTINCT target_key FROM due) t"
                "  JOIN note_names n ON n.key = t.target_key"
                "  JOIN documents d ON d.id = n.document_id AND d.vault = %s"
                "  JOIN note_names a ON a.document_id = d.id"
                " GROUP BY d.id, d.path, n.key",
                (vault,),
            ).fetchall()
            by_key: dict[str, list[NoteName]] = {}
            ids: dict[str, int] = {}
            for r in notes:
                note = NoteName(r["path"], _aliases(r["path"], r["names"]))
                by_key.setdefault(r["key"], []).append(note)
                ids[r["path"]] = r["id"]
            changed = 0
            # Read and written back a batch at a time: a first index resolves every link of
            # the vault, and holds a batch of them, not all.
            with conn.cursor("due_links") as due:
                due.execute("SELECT * FROM due")
                while batch := due.fetchmany(_BATCH):
                    docs: list[int] = []
                    positions: list[int] = []
                    targets: list[int | None] = []
                    for link in batch:
                        options = by_key.get(link["target_key"], ())
                        path = resolve(link["target"], link["source"], options)
                        target = ids[path] if path is not None else None
                        changed += target != link["target_id"]
                        if target != link["target_id"] or link["due"]:
                            docs.append(link["document_id"])
                            positions.append(link["position"])
                            targets.append(target)
                    cur.execute(
                        "UPDATE links l SET target_id = c.target, due = false"
                        "  FROM unnest(%s::bigint[], %s::integer[], %s::bigint[])"
                        "    AS c(document_id, position, target)"
                        " WHERE l.document_id = c.document_id AND l.position = c.position",
                        (docs, positions, targets),
                    )
            return changed
