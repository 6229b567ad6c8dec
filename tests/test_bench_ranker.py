"""The learned ranker's benchmark: feature rows from a real index (fake models), fitting,
scoring against kb's order, cross-validation and the saved models."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import json
import sys
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pytest

from kb.llm.fake import FakeChat, FakeEmbedder
from kb.search import features
from kb.search import ranker as kb_ranker
from kb.store import NO_FILTER, Store

ROOT = Path(__file__).resolve().parents[1]
# bench/ranker.py imports its neighbour bench/retrieval.py as a script would.
sys.path.insert(0, str(ROOT / "bench"))
ranker = importlib.import_module("ranker")
retrieval = importlib.import_module("retrieval")

# Sections of two paragraphs or more, so that each chunk has paragraph vectors
# (kb.context.passage_texts); Alex's journal is personal, and one note is dated.
NOTES = {
    "Alex/journal.md": "---\ndate: 2024-03-10\n---\n# Sunday\n\n## Cooking\n\n"
    "I cooked a spicy lentil soup with cumin and lemon.\n\n"
    "The soup needed more salt than the recipe said.\n",
    "pets/cats.md": "# Cats\n\n## Sleep\n\nCats sleep sixteen hours a day on the sofa.\n\n"
    "Kittens and old cats sleep even longer than that.\n\n## Food\n\n"
    "Cats eat tuna and chicken twice a day.\n\nFresh water should always stand nearby.\n",
    "garden.md": "# Garden\n\n## Tomatoes\n\nWater the tomatoes every evening in July.\n\n"
    "Tie the tall tomato plants to wooden stakes early.\n",
}
QUESTIONS = {
    "how long do cats sleep": ("pets/cats.md", "Cats sleep sixteen"),
    "what soup did I cook in March 2024": ("Alex/journal.md", "I cooked"),
    "when to water the tomatoes": ("garden.md", "Water the tomatoes"),
}


def _vault(root: Path) -> Path:
    """A docs-rag-style dataset of NOTES, owned by Alex Doe, asked QUESTIONS."""
    for path, text in NOTES.items():
        (root / "corpus_md" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "corpus_md" / path).write_text(text)
    (root / "documents.jsonl").write_text("".join(json.dumps({"file": p}) + "\n" for p in NOTES))
    (root / "dataset.json").write_text(json.dumps({"owner": "Alex Doe", "personal": ["Alex/**"]}))
    rows = []
    for n, (question, (path, needle)) in enumerate(QUESTIONS.items()):
        start = NOTES[path].index(needle)
        gold = {"file": path, "start": start, "end": start + len(needle)}
        rows.append({"qid": str(n), "query": question, "gold": [gold]})
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_feature_rows_of_a_real_index(tmp_path: Path, store: Store, fake_models: None) -> None:
    dataset = retrieval.load_dataset(_vault(tmp_path / "tiny"))
    vault = dataset.vaults[0]
    config = retrieval.make_config(vault, tmp_path, ranker.LEVEL)
    embedder = FakeEmbedder()
    retrieval.index(config, store, FakeChat(), embedder, (), tmp_path / "cost.json")

    asked, search_ms, features_ms = ranker.ask_all(
        dataset,
        {vault.name: store},
        embedder,
        config.query.fusion,
        {vault.name: NO_FILTER},
        voiced_queries=config.context.voiced_passages(),
        today=dt.date(2026, 1, 1),
    )
    assert len(asked) == len(search_ms) == len(features_ms) == 3
    column = {name: i for i, name in enumerate(ranker.FEATURES)}
    for a in asked:
        assert a.features.shape == (len(a.labels), len(ranker.FEATURES))
        # Three notes: every question's gold chunk is among its candidates.
        assert sum(a.labels) == 1
        assert a.query.qid in {"0", "1", "2"}
        # The rows come in kb's order, each with its place in it.
        places = a.features[:, column["fused_rank"]]
        assert places.tolist() == list(range(1, len(a.labels) + 1))
        assert (np.diff(a.features[:, column["fused_score"]]) <= 1e-12).all()
        # Each chunk's own vector and its paragraphs' are read from the index.
        assert (a.features[:, column["own_similarity"]] > features.NO_SIMILARITY).all()
        assert (a.features[:, column["paragraph_similarity"]] > features.NO_SIMILARITY).all()
        # No model writes statements or questions at the structure level.
        assert (a.features[:, column["statement_similarity"]] == features.NO_SIMILARITY).all()
    cats = next(a for a in asked if a.query.text == "how long do cats sleep")
    gold = cats.labels.index(1)
    # "cats" and "sleep" of "long", "cats", "sleep": words as written (the chunk says "longer").
    assert cats.features[gold, column["word_overlap"]] == pytest.approx(2 / 3)
    assert cats.spans[gold][0] == "pets/cats.md"
    assert cats.features[:, column["first_person"]].tolist() == [0.0] * len(cats.labels)
    assert cats.features[:, column["dated"]].tolist() == [0.0] * len(cats.labels)
    # The note's other chunk is a candidate too, and the gold one's neighbour.
    assert cats.features[gold, column["note_candidates"]] == 2
    assert cats.features[gold, column["neighbour_score"]] > 0
    # "cats" and "sleep" are in its header path ("Cats > Sleep"), "long" is not.
    assert cats.features[gold, column["header_overlap"]] == pytest.approx(2 / 3)
    # Across the candidates: the first one's words are all new, and its note among the first.
    first = cats.features[0]
    assert first[column["novel_words"]] == first[column["word_overlap"]]
    assert 1 <= first[column["top_notes"]] <= 3
    assert (cats.features[:, column["note_spread"]] >= 0).all()
    # A first-person question of a time, and the owner's note of that time.
    soup = next(a for a in asked if a.query.text.startswith("what soup"))
    gold = soup.labels.index(1)
    mine = {n: soup.features[gold, column[n]] for n in ("first_person_personal", "in_period")}
    assert mine == {"first_person_personal": 1.0, "in_period": 1.0}
    assert soup.features[gold, column["log_days_apart"]] >= 0
    # The owner as the writer: Alex's folder, for a question in the first person.
    owner = {
        n: soup.features[gold, column[n]] for n in ("owner_header", "first_person_owner_header")
    }
    assert owner == {"owner_header": 1.0, "first_person_owner_header": 1.0}
    others = [i for i in range(len(soup.labels)) if i != gold]
    assert all(soup.features[i, column["personal"]] == 0.0 for i in others)
    assert all(soup.features[i, column["log_days_apart"]] == -1.0 for i in others)

    # Scored in kb's own order and by fitted models: the same scores as the retrieval
    # benchmark's for kb's order, and models that fit and score without error.
    assert ranker.score(asked, None).summary()["recall@5"] == 1.0
    for fit in (ranker.fit_lightgbm, ranker.fit_linear):
        assert ranker.score(asked, fit(asked)).summary()["recall@20"] == 1.0


def _synthetic(questions: int, seed: int) -> list:
    """Questions of 40 candidates each whose one gold chunk stands out in a single feature
    (its own similarity) while kb's order puts it last."""
    rng = np.random.default_rng(seed)
    own = ranker.FEATURES.index("own_similarity")
    asked = []
    for n in range(questions):
        rows = rng.normal(size=(40, len(ranker.FEATURES)))
        rows[-1, own] = rows[:, own].max() + 1.0
        spans = [(f"n{n}.md", i * 100, i * 100 + 50) for i in range(40)]
        gold = retrieval.Gold(f"n{n}.md", 3900, 3950)
        query = retrieval.Query(str(n), "?", (gold,), vault=f"v{n % 10}")
        labels = [0] * 39 + [1]
        asked.append(ranker.Asked(query, spans, labels, rows))
    return asked


def test_a_ranker_learns_what_kb_order_misses(tmp_path: Path) -> None:
    train, held_out = _synthetic(120, seed=1), _synthetic(40, seed=2)
    assert ranker.score(held_out, None).summary()["recall@5"] == 0.0
    assert ranker.best_possible(held_out).summary()["recall@1"] == 1.0
    fitted = [ranker.fit_lightgbm(train, rounds=30), ranker.fit_linear(train)]
    for model in fitted:
        assert ranker.score(held_out, model).summary()["recall@1"] >= 0.9
    folds = ranker.cross_validated(held_out, train, ranker.fit_linear)
    assert folds.summary()["recall@1"] >= 0.9

    booster = fitted[0].model
    assert isinstance(booster, lgb.Booster)
    times = ranker.inference_ms(held_out, booster)
    assert len(times) == 40 and all(t >= 0 for t in times)
    shares = dict(ranker.importance(booster))
    assert max(shares, key=lambda name: shares[name]) == "own_similarity"

    report = {"level": "synthetic", "embed_model": "none", "fitted_on": {"synthetic": 120}}
    path = tmp_path / "models/ranker.json"
    ranker.save(path, booster, report)
    # kb's ranker file orders as the fitted trees do, and keeps their record.
    shipped = kb_ranker.load(path, features.SCHEMA)
    assert shipped.record == report
    rows = held_out[0].features
    assert np.allclose(shipped.scores(rows.tolist()), fitted[0].score(rows))


def test_a_fold_is_never_fitted_on_its_twins_under_another_embedder() -> None:
    """Rows of the same questions under another embedder are fitted on with their fold's
    others, never while that fold is scored."""
    asked = _synthetic(40, seed=3)
    twins = [
        dataclasses.replace(t, query=dataclasses.replace(t.query, qid=f"twin {t.query.qid}"))
        for t in _synthetic(40, seed=4)
    ]
    fitted_on: list[set[str]] = []

    def fit(rows: list) -> object:
        fitted_on.append({a.query.qid for a in rows})
        return ranker.fit_linear(rows)

    ranker.cross_validated(asked, [], fit, twins)
    groups = {a.query.qid: a.group for a in [*asked, *twins]}
    assert len(fitted_on) == 5
    for qids in fitted_on:
        held = {groups[q] for q in set(groups) - qids}
        assert held and held.isdisjoint(groups[q] for q in qids)
    # Each question and its twin is fitted on in the four folds that do not score it.
    assert sum(len(q) for q in fitted_on) == 4 * 80


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("What did Caroline tell Melanie about Paris?", {"caroline", "melanie", "paris"}),
        ("When did I meet John?", {"john"}),
        ("how long do cats sleep", set()),
    ],
)
def test_names_of_a_question(question: str, names: set[str]) -> None:
    assert features._names(question) == names


@pytest.mark.parametrize(
    ("question", "text", "found"),
    [
        # Words as full-text search reads them: one stem for "scored" and "Scoring".
        ("how are billing anomalies scored", "## Scoring of an Anomaly", {"score", "anomali"}),
        ("when did I climb a mountain", "How I Climbed Mount Fuji", {"climb"}),
        ("what did Kenji say", "Kenji's plan, and Kenjiro's", {"kenji"}),
        # A word that only starts like one asked is not it.
        ("which tests ran", "the testament", set()),
    ],
)
def test_the_question_s_words_are_found_by_their_stems(
    question: str, text: str, found: set[str]
) -> None:
    q = features._Question.of(question, None, None)
    assert q.finder.found(text) == found


def test_rows_of_another_level_and_of_some_vaults(tmp_path: Path) -> None:
    assert ranker.Twins.parse(str(tmp_path)) == ranker.Twins(tmp_path, ranker.LEVEL)
    assert ranker.Twins.parse(f"{tmp_path}=questions").level == "questions+paragraphs"
    query = retrieval.Query("1", "?", (retrieval.Gold("a.md", 0, 1),), vault="b")
    dataset = retrieval.Dataset(
        "d",
        tuple(retrieval.Vault(name, tmp_path / name, ()) for name in ("a", "b")),
        (dataclasses.replace(query, qid="0", vault="a"), query),
    )
    kept = ranker.only_vaults(dataset, ["b"])
    assert [v.name for v in kept.vaults] == ["b"] and kept.queries == (query,)
    assert ranker.only_vaults(dataset, None) is dataset
    with pytest.raises(SystemExit, match="no vault c"):
        ranker.only_vaults(dataset, ["c"])
