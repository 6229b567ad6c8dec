"""The learned ranker's features, pinned: a few fixed candidates of one question (no model,
no database) and the rows kb.search.features makes of them.

A change to what any feature means changes a value here. Then bump FEATURES_VERSION
(kb.search.features), fit the ranker again (bench/ranker.py, docs/retrieval.md) and write
the new values below: the trees kb ships were fitted on these.
"""

from __future__ import annotations

import datetime as dt

import pytest

from kb.fusion import DEFAULT_FUSION
from kb.search import features
from kb.search.features import FEATURES, FEATURES_VERSION
from kb.search.hybrid import fused_order
from kb.search.when import question_period
from kb.store import Candidate, Candidates

# A first-person question with a name and a month: every group of features has something
# to read (both lists, passages of each kind, a note of two chunks, the owner, a date).
QUESTION = "what lentil soup did I cook with Kenji in March 2024"
OWNER = "Alex Doe"
TODAY = dt.date(2026, 1, 1)
CANDIDATES = [
    Candidate(
        id=1, vault="notes", path="Alex/journal.md", header_path=["Sunday", "Cooking"],
        content="I cooked a spicy lentil soup with Kenji, cumin and lemon.",
        start_line=5, end_line=7, similarity=0.82, vector_rank=1, text_rank=2, text_score=4.5,
        note_date=dt.date(2024, 3, 10), date_source="property", position=0, note_chunks=2,
        personal=True, own_similarity=0.71, kinds={"paragraph": 0.8, "question": 0.77},
        passages=2,
    ),
    Candidate(
        id=2, vault="notes", path="Alex/journal.md", header_path=["Sunday", "Cooking"],
        content="The soup needed more salt than the recipe said.",
        start_line=9, end_line=10, similarity=0.64, vector_rank=3, text_rank=None,
        text_score=None, note_date=dt.date(2024, 3, 10), date_source="property", position=1,
        note_chunks=2, personal=True, own_similarity=0.6, kinds={"paragraph": 0.64},
        passages=1,
    ),
    Candidate(
        id=3, vault="notes", path="recipes/Soups.md", header_path=["Soups", "Lentil soup"],
        content="Lentil soup: cook red lentils twenty minutes, then blend with cumin.",
        start_line=3, end_line=6, similarity=None, vector_rank=None, text_rank=1,
        text_score=6.25, note_date=dt.date(2023, 1, 2), date_source="file time", position=4,
        note_chunks=9,
    ),
    Candidate(
        id=4, vault="notes", path="letters/Kenji Doe.md", header_path=["Letter from Alex Doe"],
        content="Dear Kenji, thank you for the soup recipes you sent in March. Alex",
        start_line=1, end_line=2, similarity=0.7, vector_rank=2, text_rank=3, text_score=2.0,
        note_date=dt.date(2024, 3, 20), date_source="file name", own_similarity=0.55,
        kinds={"paragraph": 0.66, "statement": 0.7}, passages=3,
    ),
]  # fmt: skip

# Each feature's value for the candidates in kb's order (ids [1, 4, 2, 3]).
EXPECTED: dict[str, tuple[float, ...]] = {
    "vector_rank": (1, 2, 3, 41),
    "vector_inverse_rank": (1.0, 0.5, 0.3333333333333333, 0.0),
    "similarity": (0.82, 0.7, 0.64, 0.0),
    "similarity_gap": (0.0, 0.12, 0.17999999999999994, 0.82),
    "text_rank": (2, 3, 41, 1),
    "text_inverse_rank": (0.5, 0.3333333333333333, 0.0, 1.0),
    "text_score": (4.5, 2.0, 0.0, 6.25),
    "text_share": (0.72, 0.32, 0.0, 1.0),
    "in_both": (1.0, 1.0, 0.0, 0.0),
    "fused_score": (0.5835389573679683, 0.3361241158956173, 0.09654775161751508, 0.483789175118899),
    "fused_share": (1.0, 0.5760097276310276, 0.16545210974943347, 0.829060629132651),
    "fused_rank": (1, 2, 3, 4),
    "own_similarity": (0.71, 0.55, 0.6, -1.0),
    "paragraph_similarity": (0.8, 0.66, 0.64, -1.0),
    "statement_similarity": (-1.0, 0.7, -1.0, -1.0),
    "question_similarity": (0.77, -1.0, -1.0, -1.0),
    "passages": (2, 3, 1, 0),
    "chars": (4.060443010546419, 4.204692619390966, 3.8712010109078907, 4.23410650459726),
    "header_depth": (2, 1, 2, 2),
    "position": (0, 0, 1, 4),
    "relative_position": (0.0, 0.0, 1.0, 0.5),
    "note_chunks": (2, 1, 2, 9),
    "note_candidates": (2, 1, 2, 1),
    "note_best_rank": (1, 2, 1, 4),
    "note_best": (1.0, 1.0, 0.0, 1.0),
    "note_rank": (1, 2, 1, 3),
    "neighbour_score": (0.09654775161751508, 0.0, 0.5835389573679683, 0.0),
    "first_person": (1.0, 1.0, 1.0, 1.0),
    "personal": (1.0, 0.0, 1.0, 0.0),
    "first_person_personal": (1.0, 0.0, 1.0, 0.0),
    "owner_named": (0.0, 1.0, 0.0, 0.0),
    "dated": (1.0, 1.0, 1.0, 1.0),
    "note_dated": (1.0, 1.0, 1.0, 0.0),
    "in_period": (1.0, 1.0, 1.0, 0.0),
    "log_days_apart": (1.9459101490553132, 1.6094379124341003, 1.9459101490553132, -1.0),
    "word_overlap": (0.6666666666666666, 0.5, 0.16666666666666666, 0.5),
    "name_overlap": (0.5, 1.0, 0.0, 0.0),
    "names": (2, 2, 2, 2),
    "header_overlap": (
        0.16666666666666666,
        0.16666666666666666,
        0.16666666666666666,
        0.3333333333333333,
    ),
    "query_words": (6, 6, 6, 6),
    "name_header": (0.0, 0.5, 0.0, 0.0),
    "names_found": (1, 2, 0, 0),
    "owner_header": (1.0, 1.0, 1.0, 0.0),
    "first_person_owner_header": (1.0, 1.0, 1.0, 0.0),
    "candidate_rarity": (
        4.686306312755053,
        3.7924884367329565,
        0.7884573603642703,
        3.3870233286247924,
    ),
    "novel_words": (0.6666666666666666, 0.16666666666666666, 0.0, 0.0),
    "shared_top": (1.5, 1.3333333333333333, 3.0, 1.6666666666666667),
    "note_spread": (2, 0, 2, 0),
    "top_notes": (3, 3, 3, 3),
}


def test_each_feature_of_fixed_candidates_keeps_its_value() -> None:
    found = Candidates.of(CANDIDATES)
    period = question_period(QUESTION, TODAY)
    order = fused_order(found, "hybrid", DEFAULT_FUSION, period)
    assert [f.id for f in order] == [1, 4, 2, 3]
    rows = features.rows(QUESTION, OWNER, found, order, period)
    assert list(EXPECTED) == list(FEATURES)
    changed = {
        name: (got, want)
        for name, want in EXPECTED.items()
        if (got := tuple(getattr(row, name) for row in rows)) != pytest.approx(want, rel=1e-12)
    }
    assert not changed, (
        f"features changed {changed}: if what one means changed, bump FEATURES_VERSION "
        f"(now {FEATURES_VERSION}) and fit the ranker again"
    )
