"""The retrieval benchmark's scoring rule and a whole run on a tiny dataset (fake models)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from kb.config import load_config
from kb.container import Container, open_store
from kb.llm.fake import FakeChat, FakeEmbedder
from kb.prompting import prompts
from kb.store import SearchHit
from support.configs import write_config

ROOT = Path(__file__).resolve().parents[1]
# bench/retrieval.py imports its neighbour bench/reference.py as a script would.
sys.path.insert(0, str(ROOT / "bench"))
_spec = importlib.util.spec_from_file_location("bench_retrieval", ROOT / "bench/retrieval.py")
assert _spec and _spec.loader
retrieval = importlib.util.module_from_spec(_spec)
sys.modules["bench_retrieval"] = retrieval
_spec.loader.exec_module(retrieval)
Gold, Query, Scores = retrieval.Gold, retrieval.Query, retrieval.Scores
# Its neighbour, imported by it as a script imports one, and the script that reads both.
reference = sys.modules["reference"]
statement_quality = importlib.import_module("statement_quality")


@pytest.mark.parametrize(
    ("span", "hit"),
    [
        (("a.md", 0, 100), True),  # the same span
        (("a.md", 40, 90), True),  # inside: overlap is all of the shorter span
        (("a.md", 0, 1000), True),  # a big chunk holding the whole gold section
        (("a.md", 70, 170), False),  # overlap 30 < half of 100
        (("a.md", 49, 149), True),  # overlap 51
        (("b.md", 0, 100), False),  # another file
        (("a.md", 100, 200), False),  # touching is not overlapping
    ],
)
def test_hit_rule(span: tuple[str, int, int], hit: bool) -> None:
    assert retrieval._hit(span, Gold("a.md", 0, 100)) is hit


def test_recall_and_mrr() -> None:
    q = Query("q", "?", (Gold("a.md", 0, 100), Gold("b.md", 0, 100)))
    scores = Scores()
    spans = [("c.md", 0, 50), ("b.md", 0, 100), ("x.md", 0, 10), ("a.md", 0, 100)]
    scores.add(q, spans, 0.0)
    assert scores.recall[1] == [0.0]
    assert scores.recall[3] == [0.5]
    assert scores.recall[5] == [1.0]
    assert scores.rr[3] == [0.5] and scores.rr[10] == [0.5]
    assert scores.chars == [50, 100, 10, 100]


def test_line_spans_become_character_spans(tmp_path: Path) -> None:
    (tmp_path / "n.md").write_text("# T\n\nfirst para\n\n## S\nbody\n")
    spans = retrieval.Spans(tmp_path)
    hit = SearchHit("v", "n.md", ["# T"], "first para", 0, 0, start_line=3, end_line=3)
    assert spans(hit) == ("n.md", 5, 15)
    text = (tmp_path / "n.md").read_text()
    assert text[5:15] == "first para"
    last = SearchHit("v", "n.md", ["# T", "## S"], "## S\nbody", 0, 0, start_line=5, end_line=6)
    assert text[slice(*spans(last)[1:])] == "## S\nbody"


def _dataset(root: Path) -> Path:
    notes = {
        "pets/cats.md": "# Cats\n\n## Food\n\nCats eat tuna and chicken.\n\n## Sleep\n\n"
        "Cats sleep sixteen hours a day on the sofa.\n",
        "pets/dogs.md": "# Dogs\n\n## Walks\n\nDogs need a walk in the park twice a day.\n",
        "garden.md": "# Garden\n\n## Tomatoes\n\nWater the tomatoes every evening in July.\n",
    }
    docs, queries = [], []
    for path, text in notes.items():
        file = root / "corpus_md" / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
        docs.append({"file": path})

    def gold(path: str, needle: str) -> dict:
        text = notes[path]
        start = text.index(needle)
        return {"file": path, "start": start, "end": start + len(needle)}

    queries = [
        {
            "qid": "1",
            "query": "how long do cats sleep",
            "gold": [gold("pets/cats.md", "Cats sleep")],
        },
        {"qid": "2", "query": "dogs walk park", "gold": [gold("pets/dogs.md", "Dogs need")]},
        {"qid": "3", "query": "water tomatoes", "gold": [gold("garden.md", "Water the")]},
    ]
    (root / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    return root


def test_a_whole_run_on_fake_models(
    tmp_path: Path, fake_models: None, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = _dataset(tmp_path / "tiny")
    out = tmp_path / "result.json"
    args = [str(dataset), "--data-dir", str(tmp_path / "data"), "--json", str(out)]

    def tiny() -> dict:
        return json.loads(out.read_text())["datasets"]["tiny"]

    # A quick run on two notes searches only them, and its work counts toward the full run.
    assert retrieval.main([*args, "--limit-docs", "2"]) == 0
    quick = tiny()
    assert quick["documents"] == 2 and quick["queries"] == 2
    assert all(row["recall@20"] == 1.0 for row in quick["results"].values())
    quick_calls = quick["costs"]["llm"]["this run"]["llm_calls"]
    assert quick_calls > 0
    # What a full run has indexed so far is scored alone, without a model call.
    assert retrieval.main([*args, "--so-far"]) == 0
    so_far = tiny()
    assert so_far["documents"] == 2 and so_far["queries"] == 2
    assert so_far["costs"]["llm"]["this run"]["llm_calls"] == 0
    assert all(row["recall@20"] == 1.0 for row in so_far["results"].values())

    assert retrieval.main(args) == 0
    result = tiny()
    full_calls = result["costs"]["llm"]["this run"]["llm_calls"]
    assert full_calls > 0
    assert result["costs"]["llm"]["paid in all runs"]["llm_calls"] == quick_calls + full_calls
    assert result["queries"] == 3
    rows = result["results"]
    expected = {
        row.name
        for level in retrieval.LEVELS
        for row in retrieval.configurations(level, retrieval.FUSIONS["dbsf"])
    }
    assert set(rows) == expected
    # kb's default order, the learned ranker's, is among them at every level.
    assert all(f"{level} learned ranker" in rows for level in retrieval.LEVELS)
    # None of these levels puts the model's voices or lines among the vectors.
    assert result["fusions"] == {level: "dbsf w.15" for level in retrieval.LEVELS}
    for row in rows.values():
        assert row["recall@20"] == 1.0  # three notes: everything is in the top 20
        assert 0 < row["recall@1"] <= 1
    assert result["costs"]["none"]["this run"]["llm_calls"] == 0

    # A second run pays nothing: the indexes are kept.
    capsys.readouterr()
    assert retrieval.main(args) == 0
    again = tiny()
    assert again["costs"]["llm"]["this run"]["llm_calls"] == 0
    assert again["costs"]["llm"]["paid in all runs"] == result["costs"]["llm"]["paid in all runs"]
    assert again["results"] == {
        name: {**row, "seconds_per_query": again["results"][name]["seconds_per_query"]}
        for name, row in result["results"].items()
    }


def test_so_far_counts_only_what_the_level_under_way_has_built(
    tmp_path: Path, fake_models: None
) -> None:
    """A model level's index starts as a copy of a smaller level's: the notes it has not
    rebuilt yet are not scored as its own."""
    dataset = _dataset(tmp_path / "tiny")
    out = tmp_path / "result.json"
    args = [str(dataset), "--data-dir", str(tmp_path / "data")]
    assert retrieval.main([*args, "--levels", "voices", "--index-only"]) == 0
    statements = [*args, "--levels", "structure,statements"]
    assert retrieval.main([*statements, "--limit-docs", "1", "--index-only"]) == 0
    assert retrieval.main([*statements, "--so-far", "--json", str(out)]) == 0
    so_far = json.loads(out.read_text())["datasets"]["tiny"]
    assert so_far["documents"] == 1 and so_far["queries"] == 1
    assert so_far["costs"]["statements"]["this run"]["llm_calls"] == 0


def _person_dataset(root: Path) -> Path:
    """Two people's vaults in the personal-dev layout: each journal says "I"."""
    notes = {
        "ann/Ann/Journal/d1.md": "# Monday\n\nI adopted a puppy named Biscuit today.\n",
        "ann/Letters/Bob/d1.md": "# Monday\n\nI painted my kitchen yellow.\n",
        "cal/Cal/Journal/d1.md": "# Friday\n\nI ran a marathon in Boston.\n",
    }
    for path, text in notes.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)

    def gold(path: str, needle: str) -> dict:
        start = notes[path].index(needle)
        return {"file": path, "start": start, "end": start + len(needle)}

    queries = [
        (
            "1",
            "When did Ann adopt a puppy?",
            "third-person",
            "ann",
            "Ann",
            "ann/Ann/Journal/d1.md",
            "I adopted",
        ),
        (
            "1-fp",
            "When did I adopt a puppy?",
            "first-person",
            "ann",
            "Ann",
            "ann/Ann/Journal/d1.md",
            "I adopted",
        ),
        (
            "2",
            "Who painted a kitchen?",
            "third-person",
            "ann",
            "Ann",
            "ann/Letters/Bob/d1.md",
            "I painted",
        ),
        (
            "3",
            "Where did Cal run a marathon?",
            "third-person",
            "cal",
            "Cal",
            "cal/Cal/Journal/d1.md",
            "I ran",
        ),
    ]
    lines = [
        {
            "qid": qid,
            "query": text,
            "form": form,
            "category": "single-hop" if qid in ("2", "3") else "temporal",
            "vault": vault,
            "owner": owner,
            "gold": [gold(path, needle)],
        }
        for qid, text, form, vault, owner, path, needle in queries
    ]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in lines))
    return root


def test_a_dataset_of_several_vaults_each_with_its_owner(tmp_path: Path, fake_models: None) -> None:
    dataset = retrieval.load_dataset(_person_dataset(tmp_path / "people"))
    assert [(v.name, v.owner, v.personal) for v in dataset.vaults] == [
        ("ann", "Ann", ("Ann/**",)),
        ("cal", "Cal", ("Cal/**",)),
    ]
    assert [q.first_person for q in dataset.queries] == [False, True, False, False]
    out = tmp_path / "result.json"
    args = [str(tmp_path / "people"), "--data-dir", str(tmp_path / "data"), "--json", str(out)]
    assert retrieval.main([*args, "--levels", "structure"]) == 0
    result = json.loads(out.read_text())["datasets"]["people"]
    # Each question is asked of its own vault only, and its gold is found there.
    assert all(row["recall@5"] == 1.0 for row in result["results"].values())
    first = result["first_person"]["structure text"]
    assert first["first_owner_r5"] == 1.0 and first["other_r5"] == 1.0
    kinds = result["categories"]["structure text"]
    assert {k: v["questions"] for k, v in kinds.items()} == {"single-hop": 2, "temporal": 2}
    assert kinds["temporal"]["recall@5"] == 1.0


def test_levels_where_the_model_names_writers_and_writes_statements_and_questions(
    tmp_path: Path, fake_models: None
) -> None:
    _person_dataset(tmp_path / "people")
    out = tmp_path / "result.json"
    args = [str(tmp_path / "people"), "--data-dir", str(tmp_path / "data"), "--json", str(out)]
    levels = "voices+paragraphs,statements+paragraphs,questions+paragraphs,both+paragraphs"
    assert retrieval.main([*args, "--levels", levels]) == 0
    costs = json.loads(out.read_text())["datasets"]["people"]["costs"]
    # The letter's writer, once; the statements level starts as a copy of the voices level's
    # index and asks only for each chunk's statements (the letter's "Monday" chunk, the two
    # journals' are said in the owner's voice); the questions level, as a copy of the same,
    # only for each chunk's questions; and both, as a copy of the statements level's, only
    # for the questions.
    assert costs["voices+paragraphs"]["this run"]["llm_calls"] == 1
    assert costs["statements+paragraphs"]["this run"]["llm_calls"] == 3
    assert costs["questions+paragraphs"]["this run"]["llm_calls"] == 3
    assert costs["both+paragraphs"]["this run"]["llm_calls"] == 3


def test_reference_facts_answer_the_statements_prompt_of_their_chunk(tmp_path: Path) -> None:
    note = "# Day\n\n## Morning\n\nI adopted a puppy.\n\n## Evening\n\nI painted the door.\n"
    (tmp_path / "Ann").mkdir()
    (tmp_path / "Ann/d1.md").write_text(note)
    morning, evening = note.index("I adopted"), note.index("I painted")
    facts = [
        reference.Fact("v/Ann/d1.md", morning, morning + 18, "Ann adopted a puppy.", "Ann"),
        reference.Fact("v/Ann/d1.md", evening, evening + 19, "Ann painted the door.", "Ann"),
        reference.Fact("w/Ann/d1.md", evening, evening + 19, "Another vault's fact.", "Ann"),
    ]
    chat = FakeChat()
    found = reference.FactFinder(tmp_path, "v/", ["Ann/d1.md"], facts)
    writer = reference.ReferenceWriter(chat, found)
    asked = prompts.lines_prompt(
        "statements",
        "Day > Evening",
        "I painted the door.",
        writer="Ann",
        date=None,
        max_tokens=100,
        context_window=4096,
    )
    assert writer.complete(asked) == "Ann painted the door."
    assert chat.usage.calls == 0  # a reference answer is no model call
    # Every other prompt is the model's.
    voice = prompts.voice_prompt("Ann/d1.md", "", note, context_window=4096)
    assert writer.complete(voice) == chat.complete(voice)
    unknown = prompts.lines_prompt(
        "statements",
        "",
        "Not in any note.",
        writer=None,
        date=None,
        max_tokens=100,
        context_window=4096,
    )
    assert writer.complete(unknown) == "" and writer.unplaced == 1


def test_a_level_of_reference_statements(tmp_path: Path, fake_models: None) -> None:
    root = _person_dataset(tmp_path / "people")
    journal = (root / "ann/Ann/Journal/d1.md").read_text()
    start = journal.index("I adopted")
    fact = {
        "file": "ann/Ann/Journal/d1.md",
        "start": start,
        "end": start + 30,
        "text": "Ann adopted a puppy named Biscuit.",
        "about": "Ann",
    }
    (root / reference.FACTS_FILE).write_text(json.dumps(fact) + "\n")
    out = tmp_path / "result.json"
    args = [str(root), "--data-dir", str(tmp_path / "data"), "--json", str(out)]
    assert retrieval.main([*args, "--levels", "voices+paragraphs,reference+paragraphs"]) == 0
    result = json.loads(out.read_text())["datasets"]["people"]
    # The letter's writer was named at the voices level; the facts cost no call.
    assert result["costs"]["reference+paragraphs"]["this run"]["llm_calls"] == 0
    assert (
        result["vectors"]["reference+paragraphs"][1]
        == result["vectors"]["voices+paragraphs"][1] + 1
    )
    # Read back: the one fact is restated by its chunk's one statement, of the right person.
    quality = statement_quality.judge(root, "reference+paragraphs", tmp_path / "data").summary()
    assert (quality["statements"], quality["facts"], quality["coverage"]) == (1, 1, 1.0)
    assert quality["misattributed_share"] == 0.0


def test_a_statement_restates_a_fact_by_its_content_words() -> None:
    fact = reference.Fact("f.md", 0, 10, "Nate won his first video game tournament.", "Nate")
    assert statement_quality.restates("Nate won a video game tournament in 2022.", fact)
    assert not statement_quality.restates("Joanna wrote a screenplay.", fact)
    lines = ["Nate: I won my first video game tournament!"]
    assert statement_quality.near_copy("Nate won my first video game tournament", lines)
    assert not statement_quality.near_copy("Joanna is proud of Nate's win.", lines)


def test_evaluating_an_existing_index_with_the_example_questions(
    tmp_path: Path, vault: Path, db_url: str
) -> None:
    config = write_config(tmp_path / "kb.toml", vault, name="example", database={"url": db_url})
    cfg = load_config(config, env={})
    with open_store(db_url) as store:
        parts = Container(cfg, store, chat=FakeChat(), embedder=FakeEmbedder())
        parts.sync()
        parts.worker(until_empty=True, speeds=("embed",)).run()  # an index with its vectors
    out = tmp_path / "result.json"
    dataset = ROOT / "examples" / "eval"
    assert retrieval.main([str(dataset), "--config", str(config), "--json", str(out)]) == 0
    result = json.loads(out.read_text())["datasets"]["eval"]
    assert result["queries"] == 16 and result["costs"] == {}
    rows = result["results"]
    assert {n.split()[0] for n in rows} == {"index"}  # no rows needing other indexes
    for row in rows.values():
        assert row["recall@20"] > 0.5
