"""The learned ranker: its file, its plain-Python trees against LightGBM's own, and every
search of a face ordered by it (a real index, the fake provider)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pytest

from kb.config import Config, SearchMode
from kb.errors import KbError, LLMError
from kb.results import explanation
from kb.search import ranker
from kb.search.features import FEATURES, FEATURES_VERSION, SCHEMA
from kb.services.searching import SearchRequest
from support.fake_kb import Kb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
bench_ranker = importlib.import_module("ranker")

TAKAO = "Alex/Journal/2024-04-12.md"


def _fitted(seed: int = 3, trees: int = 40) -> lgb.Booster:
    """A small LightGBM ranker fitted on random rows of FEATURES."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(600, len(FEATURES)))
    y = (x[:, 2] + 0.5 * x[:, 7] + rng.normal(scale=0.3, size=600) > 1).astype(float)
    data = lgb.Dataset(x, y, group=[30] * 20, feature_name=list(FEATURES))
    params = {**bench_ranker.LGB_PARAMS, "min_data_in_leaf": 5}
    return lgb.train(params, data, num_boost_round=trees)


RECORD = {"level": "test", "embed_model": "fake", "fitted_on": {"random": {}}}


def test_the_trees_score_as_lightgbm_does(tmp_path: Path) -> None:
    booster = _fitted()
    path = tmp_path / "ranker.json"
    bench_ranker.save(path, booster, RECORD)
    loaded = ranker.load(path, SCHEMA)
    # The file says which version of the features' meaning its trees read.
    assert json.loads(path.read_text())["features_version"] == FEATURES_VERSION
    assert loaded.unfit is None
    rows = np.random.default_rng(9).normal(size=(200, len(FEATURES)))
    ours = loaded.scores(rows.tolist())
    assert ours == pytest.approx(list(booster.predict(rows)), abs=1e-9)
    # What lifted a row adds up to its score: each tree's mean output plus its splits' lifts.
    base = sum(t.mean for t in loaded.trees)
    for row, score in zip(rows[:5].tolist(), ours, strict=False):
        assert base + sum(loaded.lifts(row).values()) == pytest.approx(score, abs=1e-9)


def test_the_compiled_trees_read_nothing_of_a_file_but_numbers(tmp_path: Path) -> None:
    low, high = [0.0] * len(FEATURES), [1e308] * len(FEATURES)
    # An infinite threshold (LightGBM may write one) compiles, and holds every row.
    endless = ranker.load(_one_split(tmp_path, "chars", float("inf")), SCHEMA)
    assert endless.scores([low, high]) == [0.0, 0.0]
    assert ranker.load(_one_split(tmp_path, "passages", 0.5), SCHEMA).scores([low, high]) == [
        0.0,
        1.0,
    ]
    # What is not a number never becomes code.
    hostile = tmp_path / "hostile.json"
    data = json.loads(_one_split(tmp_path, "similarity", 0.5).read_text())
    data["trees"][0][0][0][1] = "__import__('os').system('false')"
    hostile.write_text(json.dumps(data))
    with pytest.raises(KbError, match="is damaged"):
        ranker.load(hostile, SCHEMA)


def test_the_shipped_ranker_reads_kb_s_features_and_says_what_it_was_fitted_on() -> None:
    shipped = ranker.load(ranker.DEFAULT_MODEL, SCHEMA)
    assert shipped.features == FEATURES and len(shipped.trees) >= 50 and shipped.unfit is None
    fitted_on = shipped.record["fitted_on"]
    # Fitted on the training vaults alone: personal-dev is what it is judged by.
    assert "personal-train" in fitted_on and "personal-dev" not in fitted_on
    assert fitted_on["personal-train"]["questions"] > 500
    assert "personal-dev" in shipped.record["datasets"]


def test_a_ranker_file_that_is_not_one_is_one_line(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"format": 1, "features": []')
    with pytest.raises(KbError, match="cannot read the ranker file"):
        ranker.load(damaged, SCHEMA)
    listed = tmp_path / "listed.json"
    listed.write_text("[1, 2]")
    with pytest.raises(KbError, match="is damaged"):
        ranker.load(listed, SCHEMA)
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"format": 99}))
    with pytest.raises(KbError, match="format 99"):
        ranker.load(newer, SCHEMA)


def _one_split(tmp_path: Path, feature: str, threshold: float) -> Path:
    """A ranker of one tree: rows whose `feature` is above `threshold` score 1, others 0."""
    path = tmp_path / f"{feature}.json"
    at = FEATURES.index(feature)
    path.write_text(
        json.dumps(
            {
                "format": ranker.FORMAT,
                "name": f"by-{feature}",
                "features": list(FEATURES),
                "features_version": FEATURES_VERSION,
                "trees": [[[[at, threshold, ~0, ~1, 0.5]], [0.0, 1.0]]],
            }
        )
    )
    return path


def _kb(kb: Kb, **query: object) -> Kb:
    config: Config = kb.config
    settings = dataclasses.replace(config.query, **query)  # type: ignore[arg-type]
    return Kb(kb.store, dataclasses.replace(config, query=settings))


def test_every_face_s_search_is_ordered_by_the_ranker(kb: Kb, tmp_path: Path) -> None:
    kb.sync()
    question = "when did Alex climb Mount Takao"
    plain = _kb(kb, ranker="fusion").search_service().search(SearchRequest(question, top_k=40))
    assert all(h.judged is None and h.fused_rank is None for h in plain.hits)

    learned = kb.search_service().search(SearchRequest(question, top_k=10, explain=True))
    hits = learned.hits
    assert hits[0].path == TAKAO
    assert [h.judged for h in hits] == sorted((h.judged or 0.0 for h in hits), reverse=True)
    # Each hit keeps its place in fusion's order, and says what moved it.
    fused = [(h.path, h.start_line) for h in plain.hits]
    assert all(fused[(h.fused_rank or 0) - 1] == (h.path, h.start_line) for h in hits)
    assert hits[0].lifted_by and "ranker" in explanation(hits[0])

    # A ranker that puts the longest chunk first does so, whatever fusion said.
    longest = _one_split(tmp_path, "chars", float(np.log1p(700)))
    by_length = _kb(kb, ranker_file=longest).search_service()
    top = by_length.search(SearchRequest(question, explain=True)).hits[0]
    assert len(top.content) > 700 and top.fused_rank != 1
    assert top.lifted_by == ["chars +0.50"]
    # Unasked, what moved a hit is not worked out: the order is the same.
    unexplained = by_length.search(SearchRequest(question)).hits[0]
    assert (unexplained.path, unexplained.judged) == (top.path, top.judged)
    assert unexplained.lifted_by is None


def test_one_list_alone_is_in_that_list_s_order(kb: Kb) -> None:
    kb.sync()
    service = kb.search_service()
    modes: tuple[SearchMode, ...] = ("text", "vector")
    for mode in modes:
        found = service.search(SearchRequest("miso ramen broth", mode=mode))
        assert found.hits and all(h.judged is None for h in found.hits)


def test_a_search_that_cannot_embed_is_in_fusion_s_order(kb: Kb) -> None:
    kb.sync()

    def down(text: str) -> list[float]:
        raise LLMError("the embedder is down")

    kb.embedder.embed_query = down  # type: ignore[method-assign]
    found = kb.search_service().search(SearchRequest("miso ramen broth"))
    assert found.mode_used == "text" and found.hits
    assert all(h.judged is None for h in found.hits)


def test_a_missing_ranker_file_is_one_line(kb: Kb, tmp_path: Path) -> None:
    kb.sync()
    service = _kb(kb, ranker_file=tmp_path / "nowhere.json").search_service()
    with pytest.raises(KbError, match=r"cannot read the ranker file .*nowhere\.json"):
        service.search(SearchRequest("miso ramen"))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"features_version": FEATURES_VERSION + 1}, "version 2 of its features"),
        ({"features_version": None}, "no recorded version"),
        ({"features": [*FEATURES[:-1], "another"]}, "other features"),
    ],
)
def test_a_ranker_fitted_on_other_features_is_not_used(
    kb: Kb, tmp_path: Path, change: dict[str, object], why: str
) -> None:
    """Trees whose features meant something else, or whose file does not say, are left out:
    a hybrid search is in fusion's order and says so in one line, never ordered by weights
    for what a feature meant once."""
    kb.sync()
    data = json.loads(_one_split(tmp_path, "chars", float(np.log1p(700))).read_text())
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({k: v for k, v in {**data, **change}.items() if v is not None}))
    unfit = ranker.load(stale, SCHEMA)
    assert unfit.trees == () and unfit.unfit and why in unfit.unfit

    question = "when did Alex climb Mount Takao"
    fusion = _kb(kb, ranker="fusion").search_service().search(SearchRequest(question))
    found = _kb(kb, ranker_file=stale).search_service().search(SearchRequest(question))
    assert [(h.path, h.start_line) for h in found.hits] == [
        (h.path, h.start_line) for h in fusion.hits
    ]
    assert all(h.judged is None and h.fused_rank is None for h in found.hits)
    (warning,) = found.warnings
    assert str(stale) in warning and why in warning and "fusion's order" in warning
    # A search the ranker never orders has nothing to say of it.
    text = _kb(kb, ranker_file=stale).search_service()
    assert not text.search(SearchRequest(question, mode="text")).warnings
