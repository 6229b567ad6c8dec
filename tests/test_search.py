"""Vector, text and hybrid search with filters, on a real PostgreSQL and the fake provider."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest

from kb.errors import KbError
from kb.search.hybrid import rank, retrieve
from kb.search.plan import SearchPlan
from kb.store import SearchFilter, SearchHit
from support.fake_kb import Kb
from support.reading import search_store, similarity

RAMEN = "Reference/Recipes/Weeknight Miso Ramen.md"
TAKAO = "Alex/Journal/2024-04-12.md"


def _search(kb: Kb, text: str, **plan: Any) -> list[SearchHit]:
    plan.setdefault("top_k", 10)
    return search_store(kb.store, kb.embedder, SearchPlan(text, **plan)).hits


def test_text_mode_returns_only_chunks_with_a_query_word(indexed: Kb) -> None:
    hits = _search(indexed, "tonkotsu miso broth", mode="text")
    assert hits and hits[0].path == RAMEN
    for hit in hits:
        context = hit.content.lower()
        assert any(w in context for w in ("miso", "broth", "tonkotsu")) or hit.path == RAMEN
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_text_mode_matches_any_word_and_stems(indexed: Kb) -> None:
    # "climbing" stems to "climb"; no chunk needs every word of the question.
    hits = _search(indexed, "climbing zebra unicorn", mode="text", top_k=40)
    assert TAKAO in {h.path for h in hits}
    assert _search(indexed, "zebra unicorn", mode="text") == []


def test_hybrid_fuses_both_lists(indexed: Kb) -> None:
    question = "when did Alex climb Mount Takao"
    vector = _search(indexed, question, mode="vector", top_k=40)
    text = _search(indexed, question, mode="text", top_k=40)
    hybrid = _search(indexed, question, mode="hybrid", top_k=10)
    assert hybrid and hybrid[0].path == TAKAO
    assert [h.score for h in hybrid] == sorted((h.score for h in hybrid), reverse=True)
    ranked = {(h.path, h.start_line) for h in vector} | {(h.path, h.start_line) for h in text}
    assert all((h.path, h.start_line) in ranked for h in hybrid)
    # Each hit says where each list put it: first in both here, which scores the most.
    top = hybrid[0]
    assert (top.vector_rank, top.text_rank) == (1, 1) and 0 < top.score <= 1 + 1e-9
    assert top.vector_score == pytest.approx(top.similarity)
    assert top.text_score == max(h.text_score or 0 for h in text)


def test_a_search_is_its_retrieval_ranked(indexed: Kb) -> None:
    """What a search ranks is what `retrieve` finds: the step every benchmark calls."""
    store = indexed.store
    plan = SearchPlan("what did I climb in April 2024", owner="Alex Doe", top_k=10)
    got = retrieve(
        indexed.embedder,
        plan,
        candidates=store.candidates,
        vectors=store.vectors,
        queue=store.queue,
    )
    assert got.used == "hybrid" and not got.warnings and got.period is not None
    ranked = rank(got.found, got.used, plan.fusion, got.period)[: plan.top_k]
    assert search_store(store, indexed.embedder, plan).hits == ranked


@pytest.mark.parametrize("mode", ["vector", "text", "hybrid"])
def test_similarity_and_threshold_mean_the_same_in_every_mode(indexed: Kb, mode: str) -> None:
    # A threshold of -1 keeps every hit; it has text mode embed the query, as any threshold.
    hits = _search(indexed, "postgres upgrade migration", mode=mode, threshold=-1.0)
    assert hits
    floor = sorted(similarity(h) for h in hits)[len(hits) // 2]
    kept = _search(indexed, "postgres upgrade migration", mode=mode, threshold=floor)
    assert kept and all(similarity(h) >= floor for h in kept)
    assert {(h.path, h.start_line) for h in kept} == {
        (h.path, h.start_line) for h in hits if similarity(h) >= floor
    }
    if mode == "vector":
        assert all(h.score == pytest.approx(h.similarity) for h in hits)


def _tagged(kb: Kb, *tags: str) -> set[str]:
    """Notes whose tags include every one of `tags`, read from the stored metadata."""
    found = set()
    for path in kb.store.documents.states("v"):
        with kb.store.pool.connection() as conn:
            row = conn.execute("SELECT metadata FROM documents WHERE path = %s", (path,)).fetchone()
        assert row is not None
        have = [t.lower() for t in row["metadata"].get("tags", [])]
        if all(any(h == t or h.startswith(t + "/") for h in have) for t in tags):
            found.add(path)
    return found


@pytest.mark.parametrize("mode", ["vector", "text", "hybrid"])
def test_tag_filter_in_every_mode(indexed: Kb, mode: str) -> None:
    hiking = _tagged(indexed, "hiking")
    assert hiking == {TAKAO, "Clippings/How I Climbed Mount Fuji in One Night.md"}
    hits = _search(
        indexed, "mountain climb hike", mode=mode, filters=SearchFilter(tags=("hiking",))
    )
    assert {h.path for h in hits} == hiking
    # Several tags: all of them. Case does not matter.
    both = _search(
        indexed, "mountain climb", mode=mode, filters=SearchFilter(tags=("Hiking", "travel"))
    )
    assert {h.path for h in both} == _tagged(indexed, "hiking", "travel") != hiking
    assert _search(indexed, "mountain", mode=mode, filters=SearchFilter(tags=("nope",))) == []


@pytest.mark.parametrize("mode", ["vector", "text", "hybrid"])
def test_paths_filter_keeps_only_the_named_notes(indexed: Kb, mode: str) -> None:
    notes = (RAMEN, TAKAO)
    hits = _search(indexed, "miso ramen mountain climb", mode=mode, top_k=50)
    assert {h.path for h in hits} - set(notes)
    only = _search(
        indexed, "miso ramen mountain climb", mode=mode, top_k=50, filters=SearchFilter(paths=notes)
    )
    assert {h.path for h in only} == set(notes)
    if mode != "hybrid":  # fusion re-ranks within the filtered lists, so its order may move
        kept = [(h.path, h.start_line) for h in hits if h.path in notes]
        assert [(h.path, h.start_line) for h in only][: len(kept)] == kept


def test_a_tag_matches_its_nested_tags(indexed: Kb) -> None:
    # Inline #project/kb in the goals note; the project notes are tagged "project" too.
    expected = _tagged(indexed, "project")
    assert "Alex/Goals 2024.md" in expected
    hits = _search(indexed, "project goals plan", top_k=50, filters=SearchFilter(tags=("project",)))
    assert hits and {h.path for h in hits} == expected
    nested = _search(
        indexed, "knowledge base", top_k=50, filters=SearchFilter(tags=("project/kb",))
    )
    assert {h.path for h in nested} == {"Alex/Goals 2024.md"}


@pytest.mark.parametrize("mode", ["vector", "text", "hybrid"])
def test_modified_date_filters_in_every_mode(kb: Kb, vault: Path, mode: str) -> None:
    old = dt.datetime(2020, 1, 1, tzinfo=dt.UTC).timestamp()
    for path in vault.rglob("*.md"):
        os.utime(path, (old, old))
    recent = dt.datetime(2024, 6, 1, tzinfo=dt.UTC).timestamp()
    os.utime(vault / RAMEN, (recent, recent))
    kb.sync()
    cut = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
    after = _search(kb, "miso ramen noodles", mode=mode, filters=SearchFilter(modified_after=cut))
    assert after and {h.path for h in after} == {RAMEN}
    before = _search(kb, "miso ramen noodles", mode=mode, filters=SearchFilter(modified_before=cut))
    assert before and RAMEN not in {h.path for h in before}
    window = SearchFilter(
        modified_after=dt.datetime(2024, 5, 31, tzinfo=dt.UTC),
        modified_before=dt.datetime(2024, 6, 2, tzinfo=dt.UTC),
        path_prefix="Reference/",
        tags=("recipe",),
    )
    combined = _search(kb, "miso ramen noodles", mode=mode, filters=window)
    assert {h.path for h in combined} == {RAMEN}


def test_first_person_query_reaches_the_owner_in_text_mode_too(indexed: Kb) -> None:
    question = "when did I climb a mountain"
    owner = "Alex Doe"
    plain = _search(indexed, question, mode="text", top_k=5)
    mine = _search(indexed, question, mode="text", owner=owner, top_k=5)
    # The owner's name is searched for as words too, so the owner's notes (which name them)
    # come up where the words alone found only the saved article and other people.
    assert not any(h.path.startswith("Alex/") for h in plain)
    assert sum(h.path.startswith("Alex/") for h in mine) >= 3


def test_text_mode_weighs_a_rare_word_above_a_repeated_common_one(kb: Kb, vault: Path) -> None:
    # BM25's inverse document frequency: "project" is in every stand-up note, "zeppelin" in
    # one note only, so that note leads although the stand-ups repeat "project" four times.
    (vault / "Scratch").mkdir()
    for i in range(8):
        (vault / "Scratch" / f"Standup {i}.md").write_text(
            f"# Standup {i}\n\nProject update: the project is on track, project review "
            "next week, project board updated.\n"
        )
    (vault / "Scratch" / "Airship.md").write_text(
        "# Airship\n\nA zeppelin flew over the harbour this morning.\n"
    )
    kb.sync()
    hits = _search(kb, "project zeppelin", mode="text", top_k=3)
    assert hits and hits[0].path == "Scratch/Airship.md"
    assert all(h.path.startswith("Scratch/Standup") for h in hits[1:])


@pytest.mark.parametrize("mode", ["vector", "text", "hybrid"])
def test_a_path_filter_names_whole_folders_however_written(kb: Kb, vault: Path, mode: str) -> None:
    for folder in ("Docs", "Docs2", "Docs/Sub"):
        (vault / folder).mkdir(exist_ok=True)
        (vault / folder / "pelican.md").write_text(f"# Pelican\n\nA pelican in {folder}.\n")
    kb.sync()

    def paths(prefix: str) -> set[str]:
        only = SearchFilter(path_prefix=prefix)
        return {h.path for h in _search(kb, "pelican", mode=mode, top_k=50, filters=only)}

    docs = {"Docs/pelican.md", "Docs/Sub/pelican.md"}
    for written in ("Docs", "Docs/", "./Docs/", "/Docs", "Docs//", "./Docs/."):
        assert paths(written) == docs, written
    assert paths("Docs/Sub") == {"Docs/Sub/pelican.md"}
    assert paths("Docs2/pelican.md") == {"Docs2/pelican.md"}  # one note, by its path
    assert paths("Doc") == set()
    assert paths("/") == paths("./") == paths("") >= docs | {"Docs2/pelican.md"}  # the vault
    with pytest.raises(KbError, match=r"'\.\.' cannot name a folder"):
        paths("Docs/../Docs2")
    listed = kb.store.candidates.list_notes(vaults=["v"], folder="./Docs")
    assert {n.path for n in listed.notes} == docs and listed.total == 2
