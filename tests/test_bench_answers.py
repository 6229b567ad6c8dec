"""The answer benchmark's scoring: LoCoMo's normalisation, containment, token F1, sampling."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# bench/answers.py imports its neighbour bench/retrieval.py as a script would.
sys.path.insert(0, str(ROOT / "bench"))
_spec = importlib.util.spec_from_file_location("bench_answers", ROOT / "bench/answers.py")
assert _spec and _spec.loader
answers = importlib.util.module_from_spec(_spec)
sys.modules["bench_answers"] = answers
_spec.loader.exec_module(answers)


def test_normalisation_drops_case_punctuation_and_articles() -> None:
    assert answers.normalise("The  Eternal Sunshine, of a Mind!") == "eternal sunshine of mind"


@pytest.mark.parametrize(
    ("answer", "gold", "expected"),
    [
        ("You first watched it in 2019 [1].", "2019", True),
        ("Nate has three turtles [2].", "three turtles", True),
        ("Your notes don't say.", "2019", False),
        ("It was in 2018 [1].", "2019", False),
    ],
)
def test_an_answer_contains_the_gold_answer_once_normalised(
    answer: str, gold: str, expected: bool
) -> None:
    assert answers.contains(answer, gold) is expected


def test_token_f1() -> None:
    assert answers.token_f1("watching movies", "Watching movies, making desserts") == pytest.approx(
        2 * 1.0 * 0.5 / 1.5
    )
    assert answers.token_f1("nothing alike", "2019") == 0.0


def test_the_sample_is_seeded_and_interleaved() -> None:
    def q(kind: str, i: int) -> object:
        return answers.Question(f"{kind}{i}", kind, "c", "?", None, ())

    pool = [q("answerable", i) for i in range(10)] + [q("docs", i) for i in range(10)]
    picked = answers.sample(pool, {"answerable": 3, "docs": 2}, seed=1)
    assert [p.kind for p in picked] == ["answerable", "docs", "answerable", "docs", "answerable"]
    assert picked == answers.sample(pool, {"answerable": 3, "docs": 2}, seed=1)
