"""Fusion of the vector and text lists: pure functions, no database."""

from __future__ import annotations

import pytest

from kb.fusion import FUSION_METHODS, Fusion, Ranked, fuse, single


def ranked(*scores: float, start: int = 0) -> list[Ranked]:
    return [Ranked(start + i, i + 1, s) for i, s in enumerate(scores)]


@pytest.mark.parametrize("method", FUSION_METHODS)
def test_every_candidate_of_either_list_is_kept_and_explained(method: str) -> None:
    vector = ranked(0.9, 0.8, 0.7)  # ids 0, 1, 2
    text = ranked(12.0, 3.0, start=2)  # ids 2, 3
    fused = fuse(vector, text, Fusion(method, 0.5))  # type: ignore[arg-type]
    assert sorted(f.id for f in fused) == [0, 1, 2, 3]
    both = next(f for f in fused if f.id == 2)
    assert (both.vector_rank, both.vector_score, both.text_rank, both.text_score) == (
        3, 0.7, 1, 12.0,
    )  # fmt: skip
    only_text = next(f for f in fused if f.id == 3)
    assert only_text.vector_rank is None and only_text.vector_score is None
    assert [f.score for f in fused] == sorted((f.score for f in fused), reverse=True)


@pytest.mark.parametrize("method", FUSION_METHODS)
def test_the_weight_hands_the_order_to_one_list(method: str) -> None:
    vector = ranked(0.9, 0.5, 0.1)
    text = [Ranked(2, 1, 9.0), Ranked(1, 2, 5.0), Ranked(0, 3, 1.0)]
    assert [f.id for f in fuse(vector, text, Fusion(method, 1.0))] == [0, 1, 2]  # type: ignore[arg-type]
    assert [f.id for f in fuse(vector, text, Fusion(method, 0.0))] == [2, 1, 0]  # type: ignore[arg-type]


def test_rrf_uses_ranks_only() -> None:
    vector = ranked(0.99, 0.98)
    text = ranked(50.0, 1.0)
    fused = fuse(vector, text, Fusion("rrf", 0.5))
    assert fused[0].score == pytest.approx(1.0)  # first in both lists
    assert fused[1].score == pytest.approx(61 / 62)


def test_tm2c2_lets_a_flat_list_outvote_nothing() -> None:
    # The vector list's candidates are all alike; the text list has one clear winner.
    vector = [Ranked(0, 1, 0.41), Ranked(1, 2, 0.40), Ranked(2, 3, 0.39)]
    text = [Ranked(2, 1, 10.0), Ranked(0, 2, 1.0)]
    assert fuse(vector, text, Fusion("tm2c2", 0.5))[0].id == 2
    # Rescaled between its own best and worst, the same flat list counts as much as any.
    assert fuse(vector, text, Fusion("minmax", 0.5))[0].id == 0


def test_one_list_alone_keeps_its_order() -> None:
    text = [Ranked(7, 2, 1.0), Ranked(3, 1, 4.0)]
    alone = single(text, vector=False)
    assert [(f.id, f.text_rank, f.vector_rank) for f in alone] == [(3, 1, None), (7, 2, None)]


def test_empty_lists() -> None:
    for method in FUSION_METHODS:
        assert fuse([], [], Fusion(method)) == []
        assert [f.id for f in fuse(ranked(0.5), [], Fusion(method))] == [0]
