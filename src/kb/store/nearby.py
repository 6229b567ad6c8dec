"""Related notes: the reads `kb related` makes of one note and of the notes near it, each
bounded by an index (a note's names, its links, the vectors' HNSW graph), none reading the
whole vault."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import sql

from kb.store.pool import Pool


@dataclass(frozen=True)
class SourceChunk:
    id: int
    start_line: int
    end_line: int
    header_path: list[str]
    content: str


@dataclass(frozen=True)
class RelatedNote:
    """What related notes read of a note: its names, tags, day and writer, and how many
    notes link to it."""

    id: int
    vault: str
    path: str
    title: str | None  # the frontmatter's title, as written
    names: list[str]  # as links find it (kb.vault.links.note_keys)
    tags: list[str]
    day: dt.date | None  # the day the note gives itself (kb.dates), not its file's time
    writer: str | None  # the writer the chat model named, if any
    personal: bool
    inbound: int  # notes that link to it


@dataclass(frozen=True)
class Near:
    """A note whose chunks lie near the source's: its best chunk's similarity, which source
    chunk that was nearest, and how many source chunks had one of its chunks among their
    nearest."""

    document_id: int
    similarity: float
    source_chunk: int
    chunk_content: str
    chunk_header: list[str]
    hits: int


@dataclass(frozen=True)
class Similarity:
    """A note's chunks against the source's: the best pair, and the notes' mean vectors."""

    document_id: int
    best: float
    mean: float


@dataclass(frozen=True)
class Neighbour:
    """A note near the source in the link graph (links read in both directions)."""

    document_id: int
    links_here: bool  # it links to the source
    linked: bool  # the source links to it
    shared_targets: int  # notes both link to
    shared_sources: int  # notes that link to both
    through: int  # notes the source links to that link to it
    adamic_adar: float  # over the undirected graph: each shared neighbour 1 / ln(its degree)


_NOTE = """
    SELECT d.id, d.vault, d.path, d.metadata ->> 'title' AS title,
           ARRAY(SELECT n.key FROM note_names n WHERE n.document_id = d.id) AS names,
           ARRAY(SELECT jsonb_array_elements_text(
               CASE WHEN jsonb_typeof(d.metadata -> 'tags') = 'array'
                    THEN d.metadata -> 'tags' ELSE '[]'::jsonb END)) AS tags,
           CASE WHEN d.date_source IS DISTINCT FROM 'file time' THEN d.note_date END AS day,
           nullif(d.voice, '') AS writer, d.personal,
           (SELECT count(DISTINCT l.document_id) FROM links l
             WHERE l.target_id = d.id AND l.document_id <> d.id)::int AS inbound
      FROM documents d
"""


_MENTIONED = """
WITH named AS MATERIALIZED (
    SELECT n.document_id, n.key
      -- One text, a gram a line: psycopg quotes an array's thousands of items one by one.
      FROM unnest(string_to_array(%(grams)s, E'\n')) AS g (key)
      JOIN note_names n ON n.key = g.key
)
SELECT document_id AS id, key AS name FROM named
 WHERE document_id <> %(source)s
   -- Each name found (a handful) looks its note's vault up: the planner takes every gram
   -- for a name, and joined would read the whole documents table for them.
   AND (SELECT d.vault FROM documents d WHERE d.id = named.document_id) = ANY(%(vaults)s::text[])
"""


# Each source chunk's nearest chunks by the HNSW index, PER_CHUNK of them, folded into
# their notes.
_NEAREST = """
    SELECT c.document_id, max(n.similarity) AS similarity, count(DISTINCT s.id)::int AS hits,
           (array_agg(s.id ORDER BY n.similarity DESC))[1] AS source_chunk,
           (array_agg(c.content ORDER BY n.similarity DESC))[1] AS chunk_content,
           (array_agg(to_jsonb(c.header_path) ORDER BY n.similarity DESC))[1] AS chunk_header
      FROM chunks s,
           LATERAL (
               SELECT o.id, 1 - ({distance}) AS similarity
                 FROM chunks o
                WHERE o.embed_model = {model}
                ORDER BY {distance} LIMIT %(per_chunk)s
           ) AS n
      JOIN chunks c ON c.id = n.id JOIN documents d ON d.id = c.document_id
     WHERE s.id = ANY(%(chunks)s::bigint[]) AND s.embed_model = {model}
       AND c.document_id <> %(source)s AND d.vault = ANY(%(vaults)s::text[])
     GROUP BY c.document_id
"""


# Some notes' chunks against the source chunks, every pair, and whether their text names the
# source: the candidates' chunks read once for both. Every chunk is read for the names (a
# chunk of another model's vectors still holds the text); only this model's are measured.
_SIMILARITIES = """
WITH s AS (
    SELECT embedding::vector({dim}) AS e FROM chunks
     WHERE id = ANY(%(chunks)s::bigint[]) AND embed_model = {model}
), centre AS (
    SELECT avg(e) AS e FROM s
), theirs AS MATERIALIZED (
    SELECT document_id,
           CASE WHEN embed_model = {model} THEN embedding::vector({dim}) END AS e,
           EXISTS (SELECT 1 FROM unnest(%(names)s::text[]) AS n (name)
                    WHERE strpos(lower(content), n.name) > 0) AS names_source
      FROM chunks
     WHERE document_id = ANY(%(ids)s::bigint[])
)
SELECT t.document_id,
       max(1 - (SELECT min(t.e <=> s.e) FROM s))::float8 AS best,
       (1 - (avg(t.e) <=> (SELECT e FROM centre)))::float8 AS mean,
       bool_or(t.names_source) AS names_source
  FROM theirs t
 GROUP BY t.document_id
"""


# How rare each name's rarest word is in the vault's chunks: its inverse document frequency
# from the statistics the text index keeps (migration 010), over the most it can be.
_RARITY = """
SELECT n.name, coalesce(max(ln(c.chunks::float8 / greatest(l.chunks, 1)))
                        / nullif(ln(greatest(c.chunks, 2)::float8), 0), 1.0) AS rarity
  FROM unnest(%(names)s::text[]) AS n (name)
  CROSS JOIN text_corpus c
  LEFT JOIN LATERAL unnest(tsvector_to_array(to_tsvector('english', n.name))) AS w (lexeme)
       ON TRUE
  LEFT JOIN text_lexemes l ON l.lexeme = w.lexeme COLLATE "C"
 GROUP BY n.name, c.chunks
"""


# The source's neighbours in the link graph, and the notes two steps away through them.
_NEIGHBOURS = """
WITH outs AS (
    SELECT DISTINCT target_id AS id FROM links
     WHERE document_id = %(source)s AND target_id IS NOT NULL AND target_id <> %(source)s
), ins AS (
    SELECT DISTINCT document_id AS id FROM links
     WHERE target_id = %(source)s AND document_id <> %(source)s
), around AS (
    SELECT id FROM outs UNION SELECT id FROM ins
), degree AS (
    SELECT a.id, greatest(2, (SELECT count(*) FROM (
               SELECT target_id FROM links WHERE document_id = a.id AND target_id IS NOT NULL
               UNION SELECT document_id FROM links WHERE target_id = a.id) AS u)) AS n
      FROM around a
), steps AS (
    -- (candidate, the neighbour it is reached through, how)
    SELECT l.target_id AS id, o.id AS via, 'out-out' AS kind
      FROM outs o JOIN links l ON l.document_id = o.id WHERE l.target_id IS NOT NULL
    UNION SELECT l.document_id, o.id, 'out-in' FROM outs o JOIN links l ON l.target_id = o.id
    UNION SELECT l.target_id, i.id, 'in-out'
      FROM ins i JOIN links l ON l.document_id = i.id WHERE l.target_id IS NOT NULL
    UNION SELECT l.document_id, i.id, 'in-in' FROM ins i JOIN links l ON l.target_id = i.id
), pairs AS (
    SELECT DISTINCT id, via FROM steps WHERE id <> %(source)s
), two AS (
    SELECT p.id, sum(1 / ln(g.n))::float8 AS adamic_adar,
           count(*) FILTER (WHERE EXISTS (SELECT 1 FROM steps s WHERE s.id = p.id
               AND s.via = p.via AND s.kind = 'out-in'))::int AS shared_targets,
           count(*) FILTER (WHERE EXISTS (SELECT 1 FROM steps s WHERE s.id = p.id
               AND s.via = p.via AND s.kind = 'in-out'))::int AS shared_sources,
           count(*) FILTER (WHERE EXISTS (SELECT 1 FROM steps s WHERE s.id = p.id
               AND s.via = p.via AND s.kind = 'out-out'))::int AS through
      FROM pairs p JOIN degree g ON g.id = p.via
     GROUP BY p.id
     ORDER BY adamic_adar DESC, p.id LIMIT %(most)s
)
SELECT coalesce(two.id, a.id) AS document_id,
       EXISTS (SELECT 1 FROM ins WHERE ins.id = coalesce(two.id, a.id)) AS links_here,
       EXISTS (SELECT 1 FROM outs WHERE outs.id = coalesce(two.id, a.id)) AS linked,
       coalesce(two.shared_targets, 0) AS shared_targets,
       coalesce(two.shared_sources, 0) AS shared_sources,
       coalesce(two.through, 0) AS through,
       coalesce(two.adamic_adar, 0.0) AS adamic_adar
  FROM two FULL OUTER JOIN around a ON a.id = two.id
  JOIN documents d ON d.id = coalesce(two.id, a.id)
 WHERE d.vault = ANY(%(vaults)s::text[])
"""


# Which of some notes mention any of the source's names in their text.
_MENTIONING = """
    SELECT DISTINCT c.document_id FROM chunks c
     WHERE c.document_id = ANY(%(ids)s::bigint[])
       AND EXISTS (SELECT 1 FROM unnest(%(names)s::text[]) AS n (name)
                    WHERE strpos(lower(c.content), n.name) > 0)
"""


class Related:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def note(self, vault: str, path: str) -> RelatedNote | None:
        with self.pool.connection() as conn:
            row = conn.execute(
                _NOTE + " WHERE d.vault = %s AND d.path = %s", (vault, path)
            ).fetchone()
        return RelatedNote(**row) if row else None

    def notes(self, ids: Sequence[int]) -> dict[int, RelatedNote]:
        with self.pool.connection() as conn:
            rows = conn.execute(_NOTE + " WHERE d.id = ANY(%s::bigint[])", (list(ids),))
            return {r["id"]: RelatedNote(**r) for r in rows.fetchall()}

    def chunks(self, document_id: int) -> list[SourceChunk]:
        """A note's chunks in order."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, start_line, end_line, header_path, content FROM chunks"
                " WHERE document_id = %s ORDER BY position",
                (document_id,),
            ).fetchall()
        return [SourceChunk(**r) for r in rows]

    def mentioned(self, source: int, grams: Sequence[str], vaults: Sequence[str]) -> dict[int, str]:
        """The notes (not `source`) one of whose names is among `grams`, with the longest."""
        if not grams:
            return {}
        with self.pool.connection() as conn:
            rows = conn.execute(
                _MENTIONED,
                {"grams": "\n".join(grams), "vaults": list(vaults), "source": source},
            ).fetchall()
        found: dict[int, str] = {}
        for r in rows:
            if len(r["name"]) > len(found.get(r["id"], "")):
                found[r["id"]] = r["name"]
        return found

    def mentioning(self, ids: Sequence[int], names: Sequence[str]) -> set[int]:
        """Those of the notes `ids` whose text holds one of `names` (keyed names)."""
        if not ids or not names:
            return set()
        with self.pool.connection() as conn:
            rows = conn.execute(_MENTIONING, {"ids": list(ids), "names": list(names)})
            return {r["document_id"] for r in rows.fetchall()}

    def nearest(
        self,
        source: int,
        chunks: Sequence[int],
        *,
        model: str,
        dimensions: int,
        per_chunk: int,
        breadth: int,
        vaults: Sequence[str],
    ) -> list[Near]:
        """The notes whose chunks are among the `per_chunk` nearest of any of `chunks`, as
        HNSW finds them keeping `breadth` candidates as it walks the graph (ef_search)."""
        if not chunks:
            return []
        distance = sql.SQL("o.embedding::vector({dim}) <=> s.embedding::vector({dim})").format(
            dim=sql.Literal(dimensions)
        )
        query = sql.SQL(_NEAREST).format(distance=distance, model=sql.Literal(model))
        params = {
            "chunks": list(chunks),
            "per_chunk": per_chunk,
            "source": source,
            "vaults": list(vaults),
        }
        with self.pool.connection() as conn, conn.transaction():
            # As a search does (kb.store.candidates): an HNSW scan goes on past dead entries.
            # Each probe wants a few neighbours, not a search's page of them, and the width of
            # its walk of the graph (pgvector's default is 40) sets most of its time. Both
            # set in one statement: each round trip waits its turn on a busy machine.
            conn.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                " set_config('hnsw.ef_search', %s, true)",
                (str(breadth),),
            )
            rows = conn.execute(query, params, prepare=False).fetchall()
        return [Near(**r) for r in rows]

    def similarities(
        self,
        chunks: Sequence[int],
        ids: Sequence[int],
        names: Sequence[str],
        *,
        model: str,
        dimensions: int,
    ) -> tuple[dict[int, Similarity], set[int]]:
        """Each of the notes `ids` against the source `chunks`, by their vectors, and those of
        them whose text holds one of `names` (keyed names), as `mentioning` finds them."""
        if not ids:
            return {}, set()
        query = sql.SQL(_SIMILARITIES).format(dim=sql.Literal(dimensions), model=sql.Literal(model))
        with self.pool.connection() as conn:
            rows = conn.execute(
                query,
                {"chunks": list(chunks), "ids": list(ids), "names": list(names)},
                prepare=False,
            ).fetchall()
        measured = {
            r["document_id"]: Similarity(r["document_id"], r["best"], r["mean"])
            for r in rows
            if r["mean"] is not None
        }
        return measured, {r["document_id"] for r in rows if r["names_source"]}

    def rarity(self, names: Sequence[str]) -> dict[str, float]:
        """How rare each name's rarest word is among the vault's chunks, from 0 (in every
        chunk) to 1 (in one)."""
        if not names:
            return {}
        with self.pool.connection() as conn:
            rows = conn.execute(_RARITY, {"names": list(names)}).fetchall()
        return {r["name"]: min(1.0, max(0.0, r["rarity"])) for r in rows}

    def neighbours(self, source: int, *, most: int, vaults: Sequence[str]) -> list[Neighbour]:
        """The source's linked notes both ways, and the `most` notes two links away with the
        best Adamic-Adar score."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                _NEIGHBOURS, {"source": source, "most": most, "vaults": list(vaults)}
            ).fetchall()
        return [Neighbour(**r) for r in rows]
