"""A query's candidates from both lists (vector and BM25 text), and the notes a search or an
assistant may name: the reads of `CandidateReads`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from psycopg import sql

from kb.dates import DateSource
from kb.errors import KbError
from kb.fusion import Ranked
from kb.names import composed
from kb.store.pool import Pool, Vector, epoch_ns, like_prefix, vector_param
from kb.store.vaults import vaults_param
from kb.vault.sync_plan import VaultFilter


@dataclass(frozen=True)
class Candidate:
    """A chunk one of the search lists found, with its place in each."""

    id: int
    vault: str
    path: str
    header_path: list[str]
    content: str
    start_line: int
    end_line: int
    similarity: float | None  # None without a query vector
    vector_rank: int | None
    text_rank: int | None
    text_score: float | None
    note_date: dt.date | None = None  # its note's date (kb.dates)
    # Where that date was read; a note stored before notes were dated has its file's day.
    date_source: DateSource = "file time"
    # What the learned ranker (kb.search.features) reads beyond both lists' verdicts: the
    # chunk's place in its note, the note's kind, and each of its vectors' similarity.
    position: int = 0
    note_chunks: int = 1
    personal: bool = False
    own_similarity: float | None = None  # the chunk's own vector; None without a query one
    # The best similarity of each kind of passage it has (kb.context.passage_texts), by kind.
    kinds: dict[str, float] | None = None
    passages: int = 0

    @property
    def own_date(self) -> dt.date | None:
        """The date the note gives itself: what a question's time is matched against."""
        return None if self.date_source == "file time" else self.note_date


@dataclass(frozen=True)
class Candidates:
    """Both lists of one query: the chunks by id, and each list in its own order."""

    rows: dict[int, Candidate]
    vector: list[Ranked]
    text: list[Ranked]

    @classmethod
    def of(cls, rows: Sequence[Candidate]) -> Candidates:
        by_vector = sorted((r for r in rows if r.vector_rank), key=lambda r: r.vector_rank or 0)
        by_text = sorted((r for r in rows if r.text_rank), key=lambda r: r.text_rank or 0)
        return cls(
            rows={r.id: r for r in rows},
            vector=[Ranked(r.id, r.vector_rank or 0, r.similarity or 0.0) for r in by_vector],
            text=[Ranked(r.id, r.text_rank or 0, r.text_score or 0.0) for r in by_text],
        )


# Okapi BM25's usual constants (term-frequency saturation, length normalisation). Text
# search ranks by BM25 rather than ts_rank_cd because ts_rank_cd has no inverse document
# frequency: where every note says "Claude" or "project", the common words of a question
# outweighed the one rare word that finds the answer.
BM25_K1 = 1.2


BM25_B = 0.75


# Text search reads, for each query word, only its best TEXT_POSTINGS_PER_WORD postings
# (migration 010 orders a word's postings by its BM25 weight in each chunk), adds them up
# into a first score, and scores the TEXT_RESCORED chunks with the best first score by BM25,
# exactly. Where every query word is in fewer chunks than that and fewer chunks than
# TEXT_RESCORED hold any of them, every matching chunk is scored: exact BM25. Beyond, a
# chunk can be missed when its common words' postings were cut off; bench/search_scale.py
# --exactness measures how often at 100k chunks. With a filter, a word's postings are read
# until TEXT_POSTINGS_PER_WORD of them lie in the notes it allows, at most
# TEXT_POSTINGS_WALKED of them.
TEXT_POSTINGS_PER_WORD = 1000
TEXT_RESCORED = 400
TEXT_POSTINGS_WALKED = 20 * TEXT_POSTINGS_PER_WORD


# The vector list reads this many passages for each chunk it returns: a chunk may have
# several among the nearest, and the list is the union of the chunks of the nearest passages
# and the nearest chunks, each scored by its best vector.
PASSAGE_DEPTH = 2


# A passage the chat model wrote (a statement or a question, kb.context.chunk_writes) says what
# the model read in the chunk, loosely or wrongly at times: its cosine distance counts this many
# times, so that it lifts its chunk only where it is clearly nearer the query than the chunk's own
# text and paragraphs. A factor rather than a fixed margin, because embedders spread their distances
# differently (e5's lie closer together than MiniLM's). Counted as
# it is, the small model's statements crowded the vector list with chunks they paraphrase
# loosely (docs/retrieval.md#how-much-a-statement-counts).
WRITTEN_DISTANCE_FACTOR = 1.25


@dataclass(frozen=True)
class SearchFilter:
    """Which notes a search may return; every part is optional and they combine (AND)."""

    path_prefix: str | None = None
    tags: tuple[str, ...] = ()  # all of them; a tag also matches its nested tags (a/b)
    # The note's date (kb.dates): from this day on, and before this day.
    after: dt.date | None = None
    before: dt.date | None = None
    # The file's modification time.
    modified_after: dt.datetime | None = None
    modified_before: dt.datetime | None = None
    paths: tuple[str, ...] = ()  # only these notes (exact vault-relative paths)
    # Only these vaults' notes (None: every vault the index holds). Set by the search
    # service, not by a face: see kb.vault.sync_plan.vault_filter.
    vaults: VaultFilter = None

    @property
    def folder(self) -> str | None:
        """The path filter's folder or note, as `_under` reads it; None for none, or for
        one that names the whole vault ("/", "./"), which filters nothing."""
        return _under(self.path_prefix)[0] or None if self.path_prefix else None

    @property
    def active(self) -> bool:
        return bool(
            self.folder
            or self.tags
            or self.after
            or self.before
            or self.modified_after
            or self.modified_before
            or self.paths
            or self.vaults is not None
        )


NO_FILTER = SearchFilter()


def _under(prefix: str) -> tuple[str, str]:
    """A path filter as the database reads it: the exact path of a note, and a LIKE pattern
    for everything in the folder of that name.

    A filter names whole folders ("Docs" is the folder Docs/, never Docs2/), written as the
    user may: "./Docs/", "/Docs" and "Docs\\" are Docs too, and "/" is the whole vault.
    A filter cannot leave its vault (".."). Composed, as paths are compared (kb.names)."""
    parts = [p for p in prefix.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise KbError(f"path filter {prefix!r}: '..' cannot name a folder of the vault")
    path = composed("/".join(parts))
    return path, like_prefix(path + "/") if path else "%"


# A note is in a path filter's folder (or is its note), names compared composed (kb.names):
# a stored path is the disk's own name, which may be decomposed.
_IN_FOLDER = "(normalize(d.path, NFC) = %(exact)s OR normalize(d.path, NFC) LIKE %(like)s)"


# The day of a note of `d` (kb.dates); a row stored before notes had one always dated has
# its file's day.
_NOTE_DAY = "coalesce(d.note_date, to_timestamp(d.mtime_ns / 1e9)::date)"


# A note of `d` has every tag in %(tags)s (lower case), or a tag nested under it (a/b).
_HAS_TAGS = """
    cardinality(%(tags)s::text[]) = (
        SELECT count(*) FROM unnest(%(tags)s::text[]) AS want
         WHERE EXISTS (
             SELECT 1 FROM jsonb_array_elements_text(d.metadata -> 'tags') AS t
              WHERE lower(t) = want OR left(lower(t), length(want) + 1) = want || '/'))
"""


@dataclass(frozen=True)
class NoteInfo:
    """What the index knows of one note, for listing it or naming it as a source."""

    vault: str
    path: str
    personal: bool
    date: str | None  # the note's date (kb.dates), else its frontmatter's `date` as written
    mtime_ns: int
    tags: list[str]
    chunks: int
    title: str | None = None  # the frontmatter's `title`, as written


@dataclass(frozen=True)
class NotePage:
    notes: list[NoteInfo]
    total: int  # every note that matches, not only this page


_NOTE_INFO = """
    SELECT d.vault, d.path, d.personal,
           coalesce(d.note_date::text, d.metadata ->> 'date') AS date, d.mtime_ns,
           ARRAY(SELECT jsonb_array_elements_text(d.metadata -> 'tags')) AS tags,
           (SELECT count(*) FROM chunks c WHERE c.document_id = d.id) AS chunks,
           d.metadata ->> 'title' AS title
      FROM documents d
"""


# Control characters a note hardly ever holds (one that does is shown unmarked: see
# kb.web.cards).
MARK_START, MARK_END = "\x02", "\x03"
_MARKED = """
    SELECT CASE WHEN numnode(q.words) = 0 THEN t.text
                ELSE ts_headline('english', t.text, q.words,
                                 'HighlightAll=true, StartSel=' || chr(2) || ', StopSel=' || chr(3))
           END AS marked
      FROM unnest(%(texts)s::text[]) WITH ORDINALITY AS t (text, n),
           -- Any of the query's words, as the text list finds chunks with any of them.
           (SELECT replace(plainto_tsquery('english', %(q)s)::text, ' & ', ' | ')::tsquery
                   AS words) AS q
     ORDER BY t.n
"""


# Which lists a search asks for.
Lists = Literal["vector", "text", "both"]


def document_conditions(filters: SearchFilter) -> sql.Composable:
    """The notes (`d`) a filter allows, as one condition: only the parts of the filter in
    use, since the others would still be evaluated for every row."""
    parts = [sql.SQL("TRUE")]
    if filters.folder:
        parts.append(sql.SQL(_IN_FOLDER))
    if filters.paths:
        parts.append(sql.SQL("d.path = ANY(%(paths)s::text[])"))
    if filters.vaults is not None:
        parts.append(sql.SQL("d.vault = ANY(%(vaults)s::text[])"))
    if filters.after:
        parts.append(sql.SQL(f"{_NOTE_DAY} >= %(day_after)s"))
    if filters.before:
        parts.append(sql.SQL(f"{_NOTE_DAY} < %(day_before)s"))
    if filters.modified_after:
        parts.append(sql.SQL("d.mtime_ns >= %(after)s"))
    if filters.modified_before:
        parts.append(sql.SQL("d.mtime_ns < %(before)s"))
    if filters.tags:
        parts.append(sql.SQL(_HAS_TAGS))
    return sql.SQL(" AND ").join(parts)


def _distance(alias: Literal["c", "p"], dimensions: int) -> sql.Composable:
    """The cosine distance to the query's vector of a chunk (`c`) or a passage (`p`)."""
    return sql.SQL("{alias}.embedding::vector({dim}) <=> %(v)s::vector({dim})").format(
        alias=sql.Identifier(alias), dim=sql.Literal(dimensions)
    )


def _passages(model: str, documents: sql.Composable, filtered: bool) -> sql.Composable:
    """The passages a search may read: of the model, in the notes the filter allows."""
    if not filtered:
        return sql.SQL("passages p WHERE p.embed_model = {model}").format(model=sql.Literal(model))
    return sql.SQL(
        "passages p JOIN chunks c ON c.id = p.chunk_id"
        " JOIN documents d ON d.id = c.document_id"
        " WHERE p.embed_model = {model} AND {documents}"
    ).format(model=sql.Literal(model), documents=documents)


def _best_distance(model: str, dimensions: int) -> sql.Composable:
    """The best of a chunk `c`'s own vector's distance and its passages', a written
    passage's times WRITTEN_DISTANCE_FACTOR (least is NULL-blind)."""
    return sql.SQL(
        "least({distance}, (SELECT min(({passage_distance})"
        " * CASE WHEN p.kind = 'paragraph' THEN 1 ELSE {factor} END) FROM passages p"
        " WHERE p.chunk_id = c.id AND p.embed_model = {model}))"
    ).format(
        distance=_distance("c", dimensions),
        passage_distance=_distance("p", dimensions),
        factor=sql.Literal(WRITTEN_DISTANCE_FACTOR),
        model=sql.Literal(model),
    )


def _postings(documents: sql.Composable, filtered: bool) -> sql.Composable:
    """A word's best postings; with a filter, the best of those in the notes it allows.
    The sub-select inside an expression stays a hash of the allowed notes, built once,
    where a plain IN would become a join the planner may read in another order."""
    best = sql.SQL(
        "SELECT p.chunk_id, p.impact, p.document_id FROM text_postings p"
        ' WHERE p.lexeme = words.lexeme COLLATE "C" ORDER BY p.impact DESC LIMIT {limit}'
    )
    if not filtered:
        return best.format(limit=sql.SQL("%(per_word)s"))
    return sql.SQL(
        "SELECT p.chunk_id, p.impact FROM ({walk}) AS p"
        " WHERE (p.document_id IN (SELECT d.id FROM documents d WHERE {documents}))"
        " IS TRUE LIMIT %(per_word)s"
    ).format(walk=best.format(limit=sql.SQL("%(walked)s")), documents=documents)


# Both lists of a query in one statement, and what the ranker reads of each candidate.
_CANDIDATES = r"""
WITH own AS (
    SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id
     WHERE {where}
     ORDER BY {distance} LIMIT %(nv)s
), by_passage AS (
    -- The chunks of the nearest passages (kb.context.passage_texts), each a vector of its own.
    SELECT p.chunk_id AS id FROM {passages}
     ORDER BY {passage_distance} LIMIT %(np)s
), v AS (
    -- A chunk's distance is the least of its own vector's and its passages'
    -- (a written passage's times its factor).
    SELECT id, distance, row_number() OVER (ORDER BY distance, id) AS rank
      FROM (
          SELECT c.id, {best} AS distance
            FROM (SELECT id FROM own UNION SELECT id FROM by_passage) AS ids
            JOIN chunks c ON c.id = ids.id
      ) AS scored
     ORDER BY distance, id LIMIT %(nv)s
), words AS MATERIALIZED (
    -- The query's lexemes with their inverse document frequency, from the
    -- statistics the triggers keep; nothing when only vectors are asked for.
    SELECT q.lexeme,
           ln(1 + (n.chunks - l.chunks + 0.5) / (l.chunks + 0.5))::float8 AS idf,
           n.lexemes::float8 / n.chunks AS avg_length
      FROM text_corpus n,
           unnest(tsvector_to_array(to_tsvector('english', %(q)s))) AS q (lexeme)
           JOIN text_lexemes l ON l.lexeme = q.lexeme COLLATE "C"
     WHERE %(nt)s > 0 AND l.chunks > 0
), found AS MATERIALIZED (
    -- Each word's best postings, summed into a first score by their stored impact.
    SELECT p.chunk_id, sum(words.idf * p.impact) AS first
      FROM words, LATERAL ({postings}) AS p
     GROUP BY p.chunk_id
     ORDER BY first DESC LIMIT %(rescored)s
), bm25 AS MATERIALIZED (
    -- Okapi BM25 of the best of them, from their full-text vectors, each word's
    -- frequency weighted by where it stands (text_frequency, migration 013):
    -- only the query's lexemes are kept before unnesting (the vector less all
    -- its other lexemes).
    SELECT x.chunk_id AS id, sum(words.idf * w.frequency * ({k1} + 1)
               / (w.frequency + {k1} * (1 - {b}
                  + {b} * x.length / words.avg_length))) AS score
      FROM found JOIN text_chunks x ON x.chunk_id = found.chunk_id,
           LATERAL (
               SELECT u.lexeme, text_frequency(u.weights) AS frequency
                 FROM unnest(ts_delete(x.terms, tsvector_to_array(
                          ts_delete(x.terms, ARRAY(SELECT lexeme FROM words))
                      ))) AS u
           ) AS w
           JOIN words ON words.lexeme = w.lexeme
     GROUP BY x.chunk_id
     ORDER BY score DESC, x.chunk_id
), t AS (
    -- Best first, each looked up for a vector of the model (or none yet: waiting in
    -- the embedding queue) until enough have one (a sub-select, so one lookup per row
    -- read, however the planner estimates).
    SELECT id, score, row_number() OVER (ORDER BY score DESC, id) AS rank
      FROM (
          SELECT id, score FROM bm25
           WHERE (SELECT coalesce(c.embed_model, {model}) FROM chunks c WHERE c.id = bm25.id)
                 = {model}
           ORDER BY score DESC, id LIMIT %(nt)s
      ) AS best
)
SELECT c.id, d.vault, d.path, c.header_path, c.content, c.start_line, c.end_line,
       1 - coalesce(v.distance, {best}) AS similarity, v.rank AS vector_rank,
       t.rank AS text_rank, t.score::float8 AS text_score,
       coalesce(d.note_date, to_timestamp(d.mtime_ns / 1e9)::date) AS note_date,
       coalesce(d.date_source, 'file time') AS date_source,
       c.position, d.personal,
       (SELECT count(*) FROM chunks o WHERE o.document_id = c.document_id)::int
           AS note_chunks,
       1 - ({distance}) AS own_similarity, own.kinds, own.passages
  FROM v FULL OUTER JOIN t ON v.id = t.id
  JOIN chunks c ON c.id = coalesce(v.id, t.id) JOIN documents d ON d.id = c.document_id,
       -- The chunk's passages in one read: the best similarity of each kind, and how many.
       LATERAL (
           SELECT jsonb_object_agg(k.kind, k.similarity)
                      FILTER (WHERE k.similarity IS NOT NULL) AS kinds,
                  coalesce(sum(k.n), 0)::int AS passages
             FROM (SELECT p.kind, max(1 - ({passage_distance})) AS similarity, count(*) AS n
                     FROM passages p
                    WHERE p.chunk_id = c.id AND p.embed_model = {model}
                    GROUP BY p.kind) AS k
       ) AS own
"""


def candidates_sql(model: str, dimensions: int, filters: SearchFilter) -> sql.Composed:
    """The statement of `CandidateReads.find` for an embedding space and a filter; its
    parameters are `candidates_params`'."""
    documents = document_conditions(filters)
    return sql.SQL(_CANDIDATES).format(
        distance=_distance("c", dimensions),
        passage_distance=_distance("p", dimensions),
        passages=_passages(model, documents, filters.active),
        best=_best_distance(model, dimensions),
        where=sql.SQL("c.embed_model = {model} AND {documents}").format(
            model=sql.Literal(model), documents=documents
        ),
        postings=_postings(documents, filters.active),
        model=sql.Literal(model),
        k1=sql.Literal(BM25_K1),
        b=sql.Literal(BM25_B),
    )


def candidates_params(
    vector: Vector | None, text: str, *, depth: int, lists: Lists, filters: SearchFilter
) -> dict[str, Any]:
    """The values `candidates_sql` reads: the query, each list's depth (none for a list
    not asked for) and the filter's."""
    exact, like = _under(filters.folder) if filters.folder else (None, None)
    return {
        "v": None if vector is None else vector_param(vector),
        "q": text,
        "exact": exact,
        "like": like,
        "after": epoch_ns(filters.modified_after) if filters.modified_after else None,
        "before": epoch_ns(filters.modified_before) if filters.modified_before else None,
        "day_after": filters.after,
        "day_before": filters.before,
        "tags": [t.lower().lstrip("#") for t in filters.tags],
        "paths": list(filters.paths),
        "vaults": vaults_param(filters.vaults),
        "nv": 0 if lists == "text" else depth,
        "np": 0 if lists == "text" else PASSAGE_DEPTH * depth,
        "nt": 0 if lists == "vector" else depth,
        # A list deeper than the defaults reads deeper too.
        "per_word": max(depth, TEXT_POSTINGS_PER_WORD),
        "walked": max(depth, TEXT_POSTINGS_WALKED),
        "rescored": max(depth, TEXT_RESCORED),
    }


class CandidateReads:
    """What a search reads: a query's candidates of both lists, the facts of the notes it
    names, its words marked in a passage, and the notes listed a page at a time."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def find(
        self,
        vector: Vector | None,
        text: str,
        *,
        model: str,
        dimensions: int,
        depth: int,
        lists: Lists = "both",
        filters: SearchFilter = NO_FILTER,
    ) -> Candidates:
        """The top `depth` chunks of each list for a query, in one round trip.

        vector: nearest by cosine, a chunk scored by the best of its own vector and its
        passages' (kb.context.passage_texts), a written passage's distance times
        WRITTEN_DISTANCE_FACTOR. text: full-text match on full_context (any of the
        query's words, ranked by BM25: see TEXT_POSTINGS_PER_WORD). How the two lists become
        one is `kb.fusion`'s job. Without a `vector` only the text list can be asked for,
        and no chunk has a similarity. Each candidate comes with what the learned ranker
        reads of it beyond the lists (kb.search.features).
        """
        if vector is None and lists != "text":
            raise ValueError("the vector list needs the query's vector")
        query = candidates_sql(model, dimensions, filters)
        params = candidates_params(vector, text, depth=depth, lists=lists, filters=filters)
        with self.pool.connection() as conn, conn.transaction():
            # An HNSW scan must keep going until it has enough rows (pgvector >= 0.8): rows a
            # filter rejects, and the dead entries that updated or replaced chunks leave in
            # the index until a vacuum (every note enriched, every edit), would cut it short.
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            # Never a prepared statement: its generic plan, made without the query's words
            # and limits, scans postings and chunks whole where a custom plan reads a few.
            rows = conn.execute(query, params, prepare=False).fetchall()
        return Candidates.of([Candidate(**r) for r in rows])

    def note_info(self, notes: Iterable[tuple[str, str]]) -> dict[tuple[str, str], NoteInfo]:
        """The index's facts about some notes, by (vault, path); unknown notes are left out."""
        keys = set(notes)
        with self.pool.connection() as conn:
            rows = conn.execute(
                _NOTE_INFO + " WHERE (d.vault, d.path) IN (SELECT * FROM unnest(%s::text[],"
                " %s::text[]))",
                ([v for v, _ in keys], [p for _, p in keys]),
            ).fetchall()
        return {(r["vault"], r["path"]): NoteInfo(**r) for r in rows}

    def marked(self, query: str, texts: Sequence[str]) -> list[str]:
        """Each text with the words the full-text search matches for `query` (any of its
        words, stemmed as the index stems them) between MARK_START and MARK_END."""
        if not texts:
            return []
        with self.pool.connection() as conn:
            rows = conn.execute(_MARKED, {"q": query, "texts": list(texts)}).fetchall()
        return [r["marked"] for r in rows]

    def list_notes(
        self,
        *,
        vaults: Sequence[str],
        folder: str | None = None,
        tags: Sequence[str] = (),
        offset: int = 0,
        limit: int = 50,
    ) -> NotePage:
        """Indexed notes of some vaults in path order, optionally under a folder, with tags."""
        exact, like = _under(folder) if folder else (None, None)
        params = {
            "vaults": list(vaults),
            "exact": exact,
            "like": like,
            "tags": [t.lower().lstrip("#") for t in tags],
            "offset": offset,
            "limit": limit,
        }
        where = (
            """ WHERE d.vault = ANY(%(vaults)s::text[])
                  AND (%(like)s::text IS NULL OR """
            + _IN_FOLDER
            + """)
                  AND """
            + _HAS_TAGS
        )
        with self.pool.connection() as conn, conn.transaction():
            counted = conn.execute("SELECT count(*) AS n FROM documents d" + where, params)
            row = counted.fetchone()
            assert row is not None
            total = row["n"]
            rows = conn.execute(
                _NOTE_INFO + where + " ORDER BY d.vault, d.path OFFSET %(offset)s LIMIT %(limit)s",
                params,
            ).fetchall()
        return NotePage([NoteInfo(**r) for r in rows], total)
