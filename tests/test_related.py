"""Related notes (kb.services.relating): the candidates of every kind on a small linked vault,
`--unlinked`, a line's chunk, the ranker file's version check and the why-texts."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kb.errors import KbError
from kb.related import scorer
from kb.related.evidence import nearest_of_all
from kb.related.mentions import ngrams
from kb.related.signals import FEATURES, FEATURES_VERSION
from kb.related.why import days_apart, shared_topic
from kb.store.nearby import Near
from support.fake_kb import Kb


def paths(found: object) -> list[str]:
    return [h.path for h in found.related]  # type: ignore[attr-defined]


def test_a_note_s_related_notes_come_with_why_and_its_links(linked_kb: Kb) -> None:
    found = linked_kb.related_service().related("v", "Indexing.md")
    assert "Cooking.md" not in paths(found)[:3]
    assert "pgvector.md" in paths(found)
    assert [r.path for r in found.links.links_to] == ["HNSW indexes.md"]
    assert found.links.linked_from == []
    postgres = next(h for h in found.related if h.path == "Postgres.md")
    # Indexing names Postgres without a link: an unlinked mention.
    assert any(w.startswith("mentions its title: 'postgres'") for w in postgres.why), postgres
    assert all(h.why for h in found.related[:3])


def test_unlinked_leaves_out_the_notes_it_links_to(linked_kb: Kb) -> None:
    service = linked_kb.related_service()
    assert "HNSW indexes.md" in paths(service.related("v", "Indexing.md"))
    assert "HNSW indexes.md" not in paths(service.related("v", "Indexing.md", unlinked=True))


def test_a_backlink_and_top_k(linked_kb: Kb) -> None:
    found = linked_kb.related_service().related("v", "HNSW indexes.md", top_k=4, unlinked=True)
    assert len(found.related) == 4
    indexing = next(h for h in found.related if h.path == "Indexing.md")  # it links here
    assert "links here" in indexing.why


def test_a_line_asks_for_the_chunk_holding_it(linked_kb: Kb) -> None:
    service = linked_kb.related_service()
    found = service.related("v", "Indexing.md", line=8)
    assert found.lines == (6, 8)
    # The "Later" section names no note: no mention from it.
    assert all(not w.startswith("mentions its title") for h in found.related for w in h.why)
    with pytest.raises(KbError, match="past the note's last chunk"):
        service.related("v", "Indexing.md", line=400)


def test_an_unknown_note_is_one_line(linked_kb: Kb) -> None:
    with pytest.raises(KbError, match="no note 'Nope\\.md'"):
        linked_kb.related_service().related("v", "Nope.md")


def test_the_json_shape(linked_kb: Kb) -> None:
    data = linked_kb.related_service().related("v", "pgvector.md", explain=True).as_json()
    assert set(data) >= {"related", "links_to", "linked_from", "unresolved"}
    hit = data["related"][0]
    assert set(hit) >= {"vault", "path", "title", "score", "why"}
    assert {r["path"] for r in data["linked_from"]} >= {"Postgres.md", "HNSW indexes.md"}
    json.dumps(data)


def test_dated_notes_say_how_far_apart(linked_kb: Kb) -> None:
    found = linked_kb.related_service().candidates("v", "Journal/2024-05-02.md")
    days_near = FEATURES.index("days_near")
    rows = {e.note.path: row for e, row in zip(found.evidence, found.rows, strict=True)}
    assert rows["Journal/2024-05-01.md"][days_near] == 0.5  # a day apart
    assert rows["pgvector.md"][days_near] == 0.0  # no day of its own


def test_ngrams_fold_case_and_number() -> None:
    grams = ngrams("Read about Core plugin settings, core plugins").counts
    assert grams["core plugin"] == grams["core plugins"] == 2
    assert "read about core plugin settings" in grams


def test_why_texts() -> None:
    assert days_apart(-1) == "the day before"
    assert days_apart(1) == "the day after"
    assert days_apart(0) == "the same day"
    assert days_apart(-3) == "3 days before"
    assert shared_topic("We tuned pgvector today", "pgvector and HNSW") == "pgvector"
    assert shared_topic("the cat", "a dog") is None


def test_the_candidates_are_measured_by_their_vectors_and_read_for_the_source_s_names(
    linked_kb: Kb,
) -> None:
    read = linked_kb.store.related
    space = linked_kb.related_service().vectors.space()
    assert space is not None
    source = read.note("v", "pgvector.md")
    assert source is not None
    ids = {
        p: n.id
        for p in ("Postgres.md", "HNSW indexes.md", "Cooking.md")
        if (n := read.note("v", p))
    }
    with linked_kb.store.pool.connection() as conn:
        # A note whose vectors are not written yet is not measured, and still read for names.
        conn.execute(
            "UPDATE chunks SET embedding = NULL, embed_model = NULL WHERE document_id = %s",
            (ids["HNSW indexes.md"],),
        )
    measured, naming = read.similarities(
        [c.id for c in read.chunks(source.id)],
        list(ids.values()),
        ["pgvector"],
        model=space[0],
        dimensions=space[1],
    )
    assert set(measured) == {ids["Postgres.md"], ids["Cooking.md"]}
    assert all(abs(m.best) <= 1.0001 and abs(m.mean) <= 1.0001 for m in measured.values())
    assert naming == {ids["Postgres.md"], ids["HNSW indexes.md"]}


def test_the_shipped_ranker_file_fits_these_features() -> None:
    loaded = scorer.load.__wrapped__(scorer.DEFAULT_MODEL)
    assert loaded.name.startswith("lightgbm-")
    row = [0.0] * len(FEATURES)
    named = [*row[:1], 1.0, 0.5, *row[3:]]  # the text names it, in two words
    assert loaded.score(named) > loaded.score(row)


def test_a_ranker_file_of_other_features_falls_back_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = json.loads(scorer.DEFAULT_MODEL.read_text(encoding="utf-8"))
    data["features_version"] = FEATURES_VERSION + 1
    path = tmp_path / "ranker.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="kb.related.scorer"):
        loaded = scorer.load(path)
        again = scorer.load(path)
    assert loaded is scorer.FALLBACK and again is loaded
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "features version" in warnings[0].getMessage()


def test_the_probes_halves_merge_as_one_read_of_every_chunk_gives_them() -> None:
    def near(doc: int, similarity: float, chunk: int, hits: int) -> Near:
        return Near(doc, similarity, chunk, f"chunk {chunk}", [], hits)

    first = [near(1, 0.9, 10, 2), near(2, 0.5, 10, 1)]
    second = [near(1, 0.7, 11, 1), near(2, 0.8, 12, 2), near(3, 0.4, 11, 1)]
    merged = {n.document_id: n for n in nearest_of_all([first, second])}
    assert merged == {
        1: near(1, 0.9, 10, 3),  # its best chunk from the first half, hits from both
        2: near(2, 0.8, 12, 3),
        3: near(3, 0.4, 11, 1),
    }
    assert nearest_of_all([[], []]) == []
