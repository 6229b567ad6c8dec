"""Text search by impact-ordered postings (migration 010) against exact BM25, on a real
PostgreSQL: the same results where the corpus is small, filters, every kind of write, and
an embedding-model switch."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import psycopg
import pytest

from kb.container import open_store
from kb.context import full_context, summaries_start
from kb.store import NO_FILTER, SearchFilter, Store
from kb.store import candidates as store_module
from kb.store.candidates import BM25_B, BM25_K1
from kb.store.schema import migrate, migrations
from kb.vault.wikitext import readable
from support.configs import make_config
from support.fake_kb import Kb
from support.reading import rows, search_store

# What a word of a chunk's summaries counts for against one of its own (migration 013).
SUMMARY_WEIGHT = 0.3

QUERIES = (
    "when did I climb a mountain",
    "postgres upgrade migration plan",
    "miso ramen noodles broth",
    "project goals for the knowledge base",
    "meeting notes about the planning",
    "the a of",  # stop words only: nothing to find
)


def _exact_bm25(
    store: Store, text: str, filters: SearchFilter = NO_FILTER
) -> list[tuple[int, float]]:
    """Okapi BM25 of every chunk holding a query word, from the chunks' own full-text
    vectors, each occurrence counted by its weight: the definition, computed in Python, best
    first."""
    space = store.vectors.space()
    assert space is not None
    with store.pool.connection() as conn:
        [parsed] = conn.execute(
            "SELECT tsvector_to_array(to_tsvector('english', %s)) AS w", (text,)
        ).fetchall()
        words = parsed["w"]
        rows = conn.execute(
            "SELECT c.id, d.path, d.metadata, length(v) AS length, w.lexeme, w.weights"
            "  FROM chunks c JOIN documents d ON d.id = c.document_id,"
            "       text_terms(c.full_context, c.summaries_at) AS v, unnest(v) AS w"
            " WHERE c.embed_model = %s",
            (space[0],),
        ).fetchall()
    lengths = {r["id"]: r["length"] for r in rows}
    n, average = len(lengths), sum(lengths.values()) / len(lengths)
    df: dict[str, int] = {}
    for r in rows:
        df[r["lexeme"]] = df.get(r["lexeme"], 0) + 1
    scores: dict[int, float] = {}
    for r in rows:
        if r["lexeme"] not in words or not _allowed(r["path"], r["metadata"], filters):
            continue
        idf = math.log(1 + (n - df[r["lexeme"]] + 0.5) / (df[r["lexeme"]] + 0.5))
        norm = BM25_K1 * (1 - BM25_B + BM25_B * r["length"] / average)
        tf = sum(1.0 if w == "A" else SUMMARY_WEIGHT for w in r["weights"])
        scores[r["id"]] = scores.get(r["id"], 0.0) + idf * tf * (BM25_K1 + 1) / (tf + norm)
    return sorted(scores.items(), key=lambda s: (-s[1], s[0]))


def _allowed(path: str, metadata: dict, filters: SearchFilter) -> bool:
    tags = [t.lower() for t in metadata.get("tags", [])]
    return (not filters.path_prefix or path.startswith(filters.path_prefix)) and all(
        any(t == want or t.startswith(want + "/") for t in tags) for want in filters.tags
    )


def _text(store: Store, text: str, depth: int = 40, **kwargs: object) -> list[tuple[int, float]]:
    space = store.vectors.space()
    assert space is not None
    found = store.candidates.find(
        [0.0] * space[1],
        text,
        model=space[0],
        dimensions=space[1],
        depth=depth,
        lists="text",
        **kwargs,  # type: ignore[arg-type]
    )
    return [(r.id, r.score) for r in found.text]


def _assert_same(found: list[tuple[int, float]], exact: list[tuple[int, float]]) -> None:
    assert [i for i, _ in found] == [i for i, _ in exact[: len(found)]]
    assert len(found) == min(len(exact), len(found)) and [s for _, s in found] == pytest.approx(
        [s for _, s in exact[: len(found)]], rel=1e-9
    )


def _assert_statistics_exact(store: Store) -> None:
    """The trigger-kept statistics and postings equal what the chunks say now."""
    with store.pool.connection() as conn:
        stale = conn.execute(
            """
            WITH now AS MATERIALIZED (
                SELECT c.id, c.document_id, text_terms(c.full_context, c.summaries_at) AS v
                  FROM chunks c
            ), words AS MATERIALIZED (
                SELECT now.id, now.document_id, w.lexeme, text_frequency(w.weights) AS tf,
                       length(now.v) AS length
                  FROM now, unnest(now.v) AS w
            ), df AS (
                SELECT lexeme, count(*) AS chunks FROM words GROUP BY lexeme
            )
            SELECT
              (SELECT count(*) FROM (
                 (SELECT lexeme, chunks FROM text_lexemes WHERE chunks > 0 EXCEPT ALL
                  SELECT lexeme, chunks FROM df)
                 UNION ALL
                 (SELECT lexeme, chunks FROM df EXCEPT ALL
                  SELECT lexeme, chunks FROM text_lexemes)) x) AS lexemes,
              (SELECT (chunks, lexemes) IS DISTINCT FROM
                      (SELECT (count(*), coalesce(sum(length(v)), 0)) FROM now)
                 FROM text_corpus) AS corpus,
              (SELECT count(*) FROM (
                 (SELECT lexeme, chunk_id, document_id, impact FROM text_postings EXCEPT ALL
                  SELECT lexeme, id, document_id, text_impact(tf, length) FROM words)
                 UNION ALL
                 (SELECT lexeme, id, document_id, text_impact(tf, length) FROM words EXCEPT ALL
                  SELECT lexeme, chunk_id, document_id, impact FROM text_postings)) x)
              AS postings,
              (SELECT count(*) FROM (
                 (SELECT chunk_id, terms FROM text_chunks EXCEPT ALL SELECT id, v FROM now)
                 UNION ALL
                 (SELECT id, v FROM now EXCEPT ALL SELECT chunk_id, terms FROM text_chunks)) x)
              AS vectors
            """
        ).fetchone()
    assert stale == {"lexemes": 0, "corpus": False, "postings": 0, "vectors": 0}


@pytest.mark.parametrize("text", QUERIES)
def test_text_search_is_exact_bm25_on_a_small_corpus(indexed: Kb, text: str) -> None:
    exact = _exact_bm25(indexed.store, text)
    found = _text(indexed.store, text)
    _assert_same(found, exact)
    if text != "the a of":
        assert found
    # Deeper lists too: every chunk that holds a word, in BM25's order.
    _assert_same(_text(indexed.store, text, depth=1000), exact)
    assert len(_text(indexed.store, text, depth=1000)) == len(exact)


def test_summaries_count_for_less_than_a_chunks_own_words(summaries_kb: Kb) -> None:
    """With LLM context, a chunk's header path and words (its rewrite, in a personal note)
    are weighted in full and its summaries after them at SUMMARY_WEIGHT; text search reads
    those weights (the exactness test above checks the scores)."""
    indexed = summaries_kb
    indexed.sync()
    with indexed.store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT c.content, c.rewrite, c.summary, c.full_context, c.summaries_at,"
            "       (SELECT array_agg(DISTINCT w ORDER BY w) FROM unnest(t.terms) AS u,"
            "               unnest(u.weights) AS w) AS weights,"
            "       text_frequency(ARRAY['A', 'D', 'D']) AS frequency"
            "  FROM chunks c JOIN text_chunks t ON t.chunk_id = c.id"
        ).fetchall()
    assert rows and all(r["summaries_at"] is not None for r in rows)
    for r in rows:
        own, summaries = (
            r["full_context"][: r["summaries_at"]],
            r["full_context"][r["summaries_at"] :],
        )
        assert own.endswith(readable(r["rewrite"] or r["content"]))
        assert summaries.startswith("\n\n" + r["summary"])
        assert r["weights"] == ["A", "D"]
        assert r["frequency"] == pytest.approx(1 + 2 * SUMMARY_WEIGHT)


def test_structure_level_text_counts_in_full(vault: Path, store: Store) -> None:
    kb = Kb(store, make_config(vault, context={"summaries": "structure"}))
    kb.sync()
    with store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT c.summaries_at, (SELECT array_agg(DISTINCT w) FROM unnest(t.terms) AS u,"
            "       unnest(u.weights) AS w) AS weights"
            "  FROM chunks c JOIN text_chunks t ON t.chunk_id = c.id"
        ).fetchall()
    assert rows and all(r["summaries_at"] is None and r["weights"] == ["A"] for r in rows)


def test_upgrade_weighs_the_summaries_of_chunks_stored_with_llm_context(blank_db_url: str) -> None:
    """Migration 013 on an index made before it: chunks with LLM context get where their
    summaries begin from full_context's layout, other chunks count in full, and the text
    index is made again to match, with no note rebuilt."""
    with psycopg.connect(blank_db_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for m in migrations():
            if m.version < 13:
                conn.execute(m.sql.encode())
                conn.execute("INSERT INTO schema_migrations VALUES (%s, %s)", (m.version, m.name))
        chunks = {
            # (path, level): (header path, chunk, rewrite, chunk summary, file summary)
            ("trip.md", "llm"): (["# Trip", "## Fuji"], "We climbed.", None, "A climb.", "Trip."),
            ("me.md", "llm"): ([], "I ran.", "Alex ran.", "A run.", "Alex's run."),
            ("plain.md", "structure"): (["# Plain"], "Words.", None, "Plain > x", "Plain."),
        }
        for (path, level), (headers, content, rewrite, summary, file_summary) in chunks.items():
            doc = conn.execute(
                "INSERT INTO documents (vault, path, content_hash, size, mtime_ns, summary,"
                " summary_key, context_build) VALUES ('v', %s, 'h', 1, 1, %s, 'k', %s)"
                " RETURNING id",
                (path, file_summary, f"2:1600/{level}/4/256"),
            ).fetchone()
            assert doc is not None
            whole = full_context(file_summary, summary, " > ".join(headers), rewrite or content)
            conn.execute(
                "INSERT INTO chunks (document_id, position, header_path, content, content_hash,"
                " start_line, end_line, summary, summary_key, rewrite, full_context,"
                " context_hash, chat_model, embed_text)"
                " VALUES (%s, 0, %s, %s, 'h', 1, 1, %s, 'k', %s, %s, 'c', 'm', %s)",
                (doc[0], headers, content, summary, rewrite, whole, whole),
            )
    assert migrate(blank_db_url) == [m.version for m in migrations() if m.version >= 13]
    with open_store(blank_db_url) as store:
        stored = {
            r["path"]: r
            for r in rows(
                store,
                "SELECT d.path, c.full_context, c.summaries_at FROM chunks c"
                " JOIN documents d ON d.id = c.document_id",
            )
        }
        assert stored["trip.md"]["summaries_at"] == summaries_start(
            "# Trip > ## Fuji", "We climbed."
        )
        assert stored["me.md"]["summaries_at"] == summaries_start("", "Alex ran.")
        assert stored["plain.md"]["summaries_at"] is None
        _assert_statistics_exact(store)


@pytest.mark.parametrize(
    "filters",
    [
        SearchFilter(path_prefix="Alex/"),
        SearchFilter(tags=("project",)),
        SearchFilter(tags=("hiking",), path_prefix="Alex/"),
    ],
)
def test_text_search_honours_filters(indexed: Kb, filters: SearchFilter) -> None:
    for text in QUERIES[:5]:
        _assert_same(
            _text(indexed.store, text, filters=filters), _exact_bm25(indexed.store, text, filters)
        )


def test_common_words_read_in_part_still_rank_by_exact_bm25(
    indexed: Kb, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each word's postings cut to its best 5 (a list 5 deep reads 5): the chunks found are
    # scored exactly, and the chunk with the rarest words (found through them) still leads.
    monkeypatch.setattr(store_module, "TEXT_POSTINGS_PER_WORD", 2)
    text = "climb Takao mountain with Kenji the note"
    exact = dict(_exact_bm25(indexed.store, text))
    found = _text(indexed.store, text, depth=5)
    assert len(found) == 5 and found[0][0] == max(exact, key=lambda i: exact[i])
    assert all(score == pytest.approx(exact[i], rel=1e-9) for i, score in found)
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)


def test_statistics_and_postings_follow_every_write(kb: Kb, vault: Path) -> None:
    kb.sync()
    _assert_statistics_exact(kb.store)
    ramen = vault / "Reference/Recipes/Weeknight Miso Ramen.md"
    takao = vault / "Alex/Journal/2024-04-12.md"
    # Edited, moved, deleted, and a new note.
    ramen.write_text(ramen.read_text().replace("miso", "shoyu"))
    moved = vault / "Archive/Takao.md"
    moved.parent.mkdir()
    shutil.move(takao, moved)
    (vault / "Inbox/Untitled.md").unlink()
    (vault / "Inbox/Zeppelin.md").write_text("# Zeppelin\n\nA zeppelin over the harbour.\n")
    kb.sync()
    _assert_statistics_exact(kb.store)
    for text in ("miso shoyu ramen", "zeppelin harbour", "climb Takao", *QUERIES[:3]):
        _assert_same(_text(kb.store, text), _exact_bm25(kb.store, text))
    paths = {h.path for h in _hits(kb, "climb Takao mountain")}
    assert "Archive/Takao.md" in paths and "Alex/Journal/2024-04-12.md" not in paths
    assert "Inbox/Zeppelin.md" in {h.path for h in _hits(kb, "zeppelin")}
    # A vault forgotten takes its chunks, and their postings, along.
    kb.store.vaults.forget("v")
    _assert_statistics_exact(kb.store)
    [left] = rows(kb.store, "SELECT count(*) AS n FROM text_postings")
    assert left["n"] == 0


def _hits(kb: Kb, text: str) -> list:
    from kb.search.plan import SearchPlan

    return search_store(kb.store, kb.embedder, SearchPlan(text, top_k=40, mode="text")).hits


def test_text_search_after_an_embedding_model_switch(kb: Kb, store: Store, vault: Path) -> None:
    kb.sync()
    before = {q: _text(store, q) for q in QUERIES}
    switched = Kb(store, make_config(vault, llm={"embed_model": "hash-128"}))
    switched.sync()
    assert store.vectors.space() == ("hash-128", 128)
    _assert_statistics_exact(store)
    for text in QUERIES:
        exact = _exact_bm25(store, text)
        _assert_same(_text(store, text), exact)
        # The same chunks, re-embedded: the same text list (scores summed in any order).
        _assert_same(_text(store, text), before[text])


def test_statistics_follow_writes_of_many_rows_and_edits_in_place(indexed: Kb) -> None:
    # kb writes one chunk per statement today; a batch of rows in one statement, and a
    # chunk edited in place, must keep the statistics exact too.
    store = indexed.store
    with store.pool.connection() as conn:
        conn.execute(
            "INSERT INTO chunks (document_id, position, header_path, content, content_hash,"
            "   start_line, end_line, summary, summary_key, full_context, embed_text,"
            "   context_hash, chat_model, embedding, embed_model)"
            " SELECT document_id, position + 1000, header_path, content, content_hash,"
            "   start_line, end_line, summary, summary_key, full_context || ' zeppelin',"
            "   embed_text, context_hash, chat_model, embedding, embed_model FROM chunks"
        )
        _assert_statistics_exact(store)
        conn.execute(
            "UPDATE chunks SET full_context = full_context || ' airship' WHERE position >= 1000"
        )
        conn.execute("UPDATE chunks SET embedding = embedding WHERE position < 1000")
        _assert_statistics_exact(store)
        _assert_same(_text(store, "zeppelin airship"), _exact_bm25(store, "zeppelin airship"))
        conn.execute("DELETE FROM chunks WHERE position >= 1000")
    _assert_statistics_exact(store)
    assert _text(store, "zeppelin airship") == []


def test_filtered_search_reads_postings_until_enough_are_allowed(
    indexed: Kb, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each word's best 2 postings within the filter, out of its best 5 overall: every chunk
    # found is allowed, and scored exactly.
    monkeypatch.setattr(store_module, "TEXT_POSTINGS_PER_WORD", 2)
    monkeypatch.setattr(store_module, "TEXT_POSTINGS_WALKED", 5)
    only = SearchFilter(path_prefix="Alex/")
    text = "climb mountain Takao Kenji goals project"
    exact = dict(_exact_bm25(indexed.store, text, only))
    found = _text(indexed.store, text, depth=2, filters=only)
    assert len(found) == 2 and all(i in exact for i, _ in found)
    assert all(score == pytest.approx(exact[i], rel=1e-9) for i, score in found)
