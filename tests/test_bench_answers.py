"""The answer benchmark: LoCoMo's scoring, the stratified sample, the figures, and a whole
run on a tiny dataset with the fake models."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

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


def test_token_f1_compares_stems() -> None:
    assert answers.token_f1("watching movies", "Watching movies, making desserts") == pytest.approx(
        2 * 1.0 * 0.5 / 1.5
    )
    # LoCoMo stems: "adopted" is "adopts".
    assert answers.token_f1("She adopted turtles", "adopts turtle") == pytest.approx(0.8)
    assert answers.token_f1("nothing alike", "2019") == 0.0


def test_locomo_scores_a_list_item_by_item_and_an_open_answer_before_its_semicolon() -> None:
    # Each gold item takes the best piece of the answer.
    assert answers.locomo_f1("movies, desserts", "movies, desserts", "multi-hop") == 1.0
    assert answers.locomo_f1("movies", "movies, desserts", "multi-hop") == 0.5
    assert answers.locomo_f1("Yes", "Yes; teammates on his team", "open-domain") == 1.0
    assert answers.locomo_f1("Yes", "Yes; teammates on his team", "single-hop") < 0.5


def _question(kind: str, i: int, category: str = "", form: str = "") -> Any:
    return answers.Question(f"{kind}{i}{category}{form}", kind, "c", "?", None, (), form, category)


def test_the_sample_is_seeded_and_interleaved() -> None:
    pool = [_question("unanswerable", i) for i in range(10)]
    pool += [_question("docs", i) for i in range(10)]
    picked = answers.sample(pool, {"unanswerable": 3, "docs": 2}, seed=1)
    kinds = ["unanswerable", "docs", "unanswerable", "docs", "unanswerable"]
    assert [p.kind for p in picked] == kinds
    assert picked == answers.sample(pool, {"unanswerable": 3, "docs": 2}, seed=1)


def test_personal_questions_are_sampled_by_kind_and_form_in_proportion() -> None:
    pool = [
        _question("answerable", i, category, form)
        for category, size in (("single-hop", 60), ("temporal", 30), ("open-domain", 4))
        for form in ("first-person", "third-person")
        for i in range(size)
    ]
    picked = answers.sample(pool, {"answerable": 20}, seed=3)
    assert len(picked) == len(set(picked)) == 20
    strata = Counter((q.category, q.form) for q in picked)
    # Every kind and form is there, the small ones too, and the large ones in proportion.
    assert len(strata) == 6 and min(strata.values()) >= 1
    assert strata["single-hop", "third-person"] > strata["temporal", "third-person"]
    assert answers.sample(pool, {"answerable": 20}, seed=3) == picked
    assert len(answers.sample(pool, {"answerable": 500}, seed=3)) == len(pool)


def _record(kind: str, **fields: Any) -> dict[str, Any]:
    base = {
        "setup": "kb",
        "kind": kind,
        "category": "single-hop" if kind == "answerable" else "",
        "form": "third-person",
        "not_in_notes": False,
        "withdrawn": None,
        "cited": 0,
        "cited_gold": 0,
        "gold_given": False,
        "seconds": 10.0,
        "first_token": 2.0,
    }
    if kind != "unanswerable":
        base |= {"contains": False, "f1": 0.0}
    return base | fields


def test_the_figures_put_each_miss_down_to_retrieval_or_the_model() -> None:
    records = [
        _record("answerable", contains=True, f1=1.0, gold_given=True, cited=1, cited_gold=1),
        _record("answerable", gold_given=True, cited=2, cited_gold=1),  # the model's miss
        _record("answerable"),  # retrieval's miss
        _record("answerable", not_in_notes=True),  # declined, and retrieval's miss
        _record("unanswerable", not_in_notes=True, withdrawn="Joanna dyed her hair purple."),
        _record("unanswerable", not_in_notes=True),
        _record("unanswerable"),
        _record("docs", f1=0.5, first_token=None),
    ]
    row = answers.table(records)["kb"]
    assert row["personal_n"] == 4 and row["personal_f1"] == pytest.approx(0.25)
    assert row["personal_contains"] == row["personal_declined"] == pytest.approx(0.25)
    assert row["personal_citing"] == 0.5 and row["personal_citation_precision"] == 2 / 3
    assert row["missed_retrieval"] == 0.5 and row["missed_model"] == 0.25
    assert row["unanswerable_declined"] == row["decline_recall"] == pytest.approx(2 / 3)
    assert row["decline_precision"] == pytest.approx(2 / 3)
    assert row["unanswerable_withdrawn"] == pytest.approx(1 / 3) and row["personal_withdrawn"] == 0
    assert row["docs_f1"] == 0.5 and row["first_token"] == 2.0
    assert row["f1_single-hop"] == pytest.approx(0.25)


# -- a whole run ---------------------------------------------------------------------------------


def _gold(root: Path, file: str, needle: str) -> dict[str, Any]:
    start = (root / file).read_text().index(needle)
    return {"file": file, "start": start, "end": start + len(needle)}


def _datasets(root: Path) -> tuple[Path, Path]:
    personal, docs = root / "personal-dev", root / "docs-rag"
    notes = {
        personal / "conv-1/Ann/Journal/2022-03-01.md": "---\ndate: 2022-03-01\n---\n# Tuesday\n\n"
        "I adopted a turtle named Shelly at the market today.\n",
        personal / "conv-1/Letters/Ben/2022-03-01.md": "---\ndate: 2022-03-01\n---\n# Tuesday\n\n"
        "I won the chess tournament in Oslo last week.\n",
        docs / "corpus_md/backup.md": "# Backups\n\nrestic runs every night at two.\n",
    }
    for path, text in notes.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    questions = [
        {
            "qid": "q1",
            "query": "What did Ann adopt at the market?",
            "form": "third-person",
            "vault": "conv-1",
            "owner": "Ann",
            "category": "single-hop",
            "answer": "a turtle",
            "gold": [_gold(personal, "conv-1/Ann/Journal/2022-03-01.md", "I adopted")],
        },
        {
            "qid": "q2",
            "query": "Which tournament did Ben win?",
            "form": "third-person",
            "vault": "conv-1",
            "owner": "Ann",
            "category": "single-hop",
            "answer": "chess tournament",
            "gold": [_gold(personal, "conv-1/Letters/Ben/2022-03-01.md", "I won")],
        },
    ]
    unanswerable = [
        {
            "qid": "u1",
            "query": "What is the zeppelin's xylophone?",
            "vault": "conv-1",
            "owner": "Ann",
        }
    ]
    docs_questions = [
        {
            "qid": "d1",
            "query": "when does restic run?",
            "answer": "every night at two",
            "gold": [_gold(docs / "corpus_md", "backup.md", "restic runs")],
        }
    ]
    for path, rows in (
        (personal / "queries.jsonl", questions),
        (personal / "unanswerable.jsonl", unanswerable),
        (docs / "queries.jsonl", docs_questions),
    ):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return personal, docs


def test_a_whole_run_on_fake_models_records_every_answer_and_resumes(
    tmp_path: Path, fake_models: None, capsys: pytest.CaptureFixture[str]
) -> None:
    personal, docs = _datasets(tmp_path)
    out, log = tmp_path / "answers.jsonl", tmp_path / "answers.log"
    args = [str(personal), str(docs), "--data-dir", str(tmp_path / "data"), "--out", str(out)]
    args += ["--log", str(log), "--setups", "kb,baseline", "--json", str(tmp_path / "t.json")]
    assert answers.main(args) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert Counter(r["setup"] for r in records) == {"kb": 4, "baseline": 4}
    adopted = next(r for r in records if r["qid"] == "q1" and r["setup"] == "kb")
    # The passages the model was given, each with whether it holds gold.
    assert adopted["gold_given"] and any(s["gold"] for s in adopted["sources"])
    assert adopted["sources"][0]["path"].endswith(".md")
    assert adopted["contains"] and adopted["f1"] > 0 and adopted["cited_gold"] >= 1
    declined = next(r for r in records if r["qid"] == "u1" and r["setup"] == "kb")
    assert declined["not_in_notes"] and "contains" not in declined
    figures = json.loads((tmp_path / "t.json").read_text())
    assert set(figures) == {"kb", "baseline"} and figures["kb"]["personal_n"] == 2
    assert "| kb |" in capsys.readouterr().out
    assert log.read_text().count("] kb ") == 4

    # A second run asks nothing again; the table is printed from the file.
    assert answers.main(args) == 0
    assert len(out.read_text().splitlines()) == len(records)
    assert answers.main([*args, "--table-only"]) == 0
    assert json.loads((tmp_path / "t.json").read_text()) == figures

    # Checked again with the words the model wrote then: the same answers, no model asked.
    again = tmp_path / "again.jsonl"
    recheck = [*args[:6], "--out", str(again), "--setups", "kb", "--recheck", str(out)]
    assert answers.main(recheck) == 0
    rechecked = {r["qid"]: r for r in map(json.loads, again.read_text().splitlines())}
    kb_before = {r["qid"]: r for r in records if r["setup"] == "kb"}
    assert set(rechecked) == {q for q, r in kb_before.items() if r["model"]}
    for qid, record in rechecked.items():
        assert record["model"] == "recorded"
        assert (record["answer"], record["withdrawn"]) == (
            kb_before[qid]["answer"],
            kb_before[qid]["withdrawn"],
        )


def test_whole_answers_stream_in_one_piece() -> None:
    from kb.llm.fake import FakeChat
    from kb.prompting.prompts import answer_prompt

    chat = answers.WholeAnswers(FakeChat("fake-chat"))
    prompt = answer_prompt(
        "when do backups run?",
        [('in "Backups":', "restic runs every night.")],
        owner=None,
        max_tokens=64,
        context_window=4096,
    )
    assert list(chat.stream(prompt)) == [chat.complete(prompt)]
    assert chat.name == "fake-chat"


def test_two_runs_are_compared_on_the_questions_both_answered() -> None:
    before = [_record("answerable", qid="a"), _record("answerable", qid="b")]
    after = [_record("answerable", qid="b", contains=True, f1=1.0)]
    rows = answers.table(answers.paired(before, after))
    assert set(rows) == {"kb before", "kb after"}
    assert rows["kb before"]["personal_n"] == rows["kb after"]["personal_n"] == 1
    assert rows["kb after"]["personal_f1"] == 1.0 and rows["kb before"]["personal_f1"] == 0.0
