"""Answer quality of `kb ask` against a plain retrieval-augmented baseline.

Two ways to answer each question, with the same chat model and the same answer prompt:

    baseline   raw chunks (context.summaries = "none"), vector search, no owner handling
    kb         kb's index with structural context (context.summaries = "structure", no LLM
               at index time), hybrid search, first-person questions read as the owner's
               and the owner's own notes marked as theirs in the prompt

Three question sets:

    personal-dev           LoCoMo questions with short gold answers, about two people's
                           first-person notes (one vault per conversation, its first speaker
                           the owner): the share of answers that contain the gold answer
                           (normalised as LoCoMo scores: lower case, no punctuation, no
                           articles), their token F1, and the share of citations that point
                           at a gold passage
    personal-dev unanswerable
                           LoCoMo's adversarial questions, which the notes do not support
                           (most ask about the wrong person): the share answered "your notes
                           don't say" rather than with the other person's facts
    docs-rag               documentation questions with sentence-long gold answers: token F1
                           and citation precision (containment of a whole sentence is rare)

Each corpus is indexed with kb twice (none, structure) into its own database on the
embedded PostgreSQL in --data-dir; nothing at index time calls the chat model, so indexing
costs only embeddings. Every answer is appended to --out as one JSON line the moment it is
written, and a second run skips what is there: an interrupted run loses nothing, and the
table is printed from the file. Questions are interleaved across the three sets and answered
in blocks (--block), each by both setups before the next, so a run stopped early is still a
fair sample.

Models come from the environment, as for kb (`eval "$(scripts/test-models start)"`).

    .venv/bin/python bench/answers.py ../shared/eval/personal-dev ../shared/eval/docs-rag \\
        --answerable 40 --unanswerable 30 --docs 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import string
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb import db
from kb.config import Config, SearchMode, SummaryMode
from kb.container import Container, open_store
from kb.errors import KbError
from kb.llm import make_chat, make_embedder
from kb.llm.base import ChatModel, Embedder
from kb.search.answer import Answer, ask
from kb.search.plan import SearchPlan
from kb.store import Store
from retrieval import Gold, Spans, Vault, _hit, make_config


@dataclass(frozen=True)
class Setup:
    name: str
    level: SummaryMode  # the index's context.summaries
    mode: SearchMode
    owner: bool


SETUPS = (
    Setup("baseline", "none", "vector", owner=False),
    Setup("kb", "structure", "hybrid", owner=True),
)


@dataclass(frozen=True)
class Corpus:
    """One vault to index and ask: a personal-dev conversation, or the docs-rag corpus."""

    key: str
    folder: Path
    owner: str | None  # whose personal notes these are, if anyone's
    personal: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    qid: str
    kind: str  # "answerable", "unanswerable" or "docs"
    corpus: str
    text: str
    answer: str | None
    gold: tuple[Gold, ...]  # files relative to the corpus folder
    form: str = ""  # personal-dev: "first-person" or "third-person"


def load(personal_dev: Path, docs_rag: Path) -> tuple[dict[str, Corpus], list[Question]]:
    corpora = {"docs-rag": Corpus("docs-rag", docs_rag / "corpus_md", None, ())}
    questions = []
    for line in _lines(personal_dev / "queries.jsonl"):
        q = json.loads(line)
        vault = q["vault"]
        corpora.setdefault(
            vault, Corpus(vault, personal_dev / vault, q["owner"], (f"{q['owner']}/**",))
        )
        gold = tuple(
            Gold(g["file"].removeprefix(f"{vault}/"), g["start"], g["end"]) for g in q["gold"]
        )
        questions.append(
            Question(q["qid"], "answerable", vault, q["query"], str(q["answer"]), gold, q["form"])
        )
    for line in _lines(personal_dev / "unanswerable.jsonl"):
        q = json.loads(line)
        questions.append(Question(q["qid"], "unanswerable", q["vault"], q["query"], None, ()))
    for line in _lines(docs_rag / "queries.jsonl"):
        q = json.loads(line)
        gold = tuple(Gold(g["file"], g["start"], g["end"]) for g in q["gold"])
        questions.append(Question(q["qid"], "docs", "docs-rag", q["query"], q["answer"], gold))
    return corpora, questions


def sample(questions: Sequence[Question], counts: dict[str, int], seed: int) -> list[Question]:
    """A seeded sample of each kind, interleaved so that any prefix is balanced."""
    rng = random.Random(seed)
    picked = []
    for kind, n in counts.items():
        pool = [q for q in questions if q.kind == kind]
        picked.append(rng.sample(pool, min(n, len(pool))))
    order: list[Question] = []
    for i in range(max(map(len, picked), default=0)):
        order += [group[i] for group in picked if i < len(group)]
    return order


# LoCoMo's answer normalisation (its evaluation code, after SQuAD's).
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")


def normalise(text: str) -> str:
    text = text.lower().replace(",", "")
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains(answer: str, gold: str) -> bool:
    return bool(normalise(gold)) and normalise(gold) in normalise(answer)


def token_f1(answer: str, gold: str) -> float:
    predicted, wanted = normalise(answer).split(), normalise(gold).split()
    common = sum((Counter(predicted) & Counter(wanted)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def config_for(corpus: Corpus, level: str, data_dir: Path) -> Config:
    # docs-rag is nobody's personal notes: the owner then matters to no note.
    vault = Vault(corpus.key, corpus.folder, (), corpus.owner or Vault.owner, corpus.personal)
    return make_config(vault, data_dir, level)


def score(question: Question, answer: Answer, spans: Spans) -> dict[str, Any]:
    cited = [answer.sources[n - 1] for n in answer.cited]
    good = [s for s in cited if any(_hit(spans(s.hit), g) for g in question.gold)]
    record: dict[str, Any] = {
        "qid": question.qid,
        "kind": question.kind,
        "form": question.form,
        "answer": answer.text,
        "not_in_notes": answer.not_in_notes,
        "cited": len(cited),
        "cited_gold": len(good),
        "seconds": answer.timings.total,
        "first_token": answer.timings.first_token,
    }
    if question.answer is not None:
        record["contains"] = contains(answer.text, question.answer)
        record["f1"] = token_f1(answer.text, question.answer)
    return record


def done_keys(out: Path) -> set[tuple[str, str]]:
    if not out.exists():
        return set()
    return {(r["setup"], r["qid"]) for r in map(json.loads, _lines(out))}


def run(
    args: argparse.Namespace,
    chat: ChatModel,
    embedder: Embedder,
    corpora: dict[str, Corpus],
    questions: Sequence[Question],
) -> None:
    server = db.embedded_url(args.data_dir)
    stores: dict[tuple[str, str], Store] = {}
    configs: dict[tuple[str, str], Config] = {}
    try:
        for key in sorted({q.corpus for q in questions}):
            for level in sorted({s.level for s in SETUPS}):
                name = f"answers_{key}_{level}".replace("-", "_")
                config = configs[key, level] = config_for(corpora[key], level, args.data_dir)
                store = stores[key, level] = open_store(db.database_on(server, name))
                started = time.perf_counter()
                parts = Container(config, store, chat=chat, embedder=embedder)
                report = parts.sync()
                # The vectors too: the questions are asked of the whole index.
                parts.worker(until_empty=True, fail_fast=True, speeds=("embed",)).run()
                print(
                    f"indexed {key} ({level}): {report.indexed} new, {report.unchanged} "
                    f"unchanged, {report.llm_calls} LLM calls, "
                    f"{time.perf_counter() - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
        if args.index_only:
            return
        spans = {key: Spans(corpus.folder) for key, corpus in corpora.items()}
        done = done_keys(args.out)
        with args.out.open("a", encoding="utf-8") as out:
            # A block of questions per setup in turn: consecutive prompts of one setup share
            # their instructions, which the server then evaluates once, and a run stopped
            # early still has both setups on nearly the same questions.
            blocks = [questions[i : i + args.block] for i in range(0, len(questions), args.block)]
            for block, setup in ((b, s) for b in blocks for s in SETUPS):
                for q in block:
                    i = questions.index(q) + 1
                    if (setup.name, q.qid) in done:
                        continue
                    config = configs[q.corpus, setup.level]
                    try:
                        owned = setup.owner and corpora[q.corpus].owner
                        plan = SearchPlan(
                            q.text,
                            owner=config.owner_name if owned else None,
                            top_k=args.top_k,
                            mode=setup.mode,
                        )
                        answer = ask(
                            stores[q.corpus, setup.level],
                            embedder,
                            chat,
                            plan,
                            context_window=config.llm.context_window,
                        )
                    except KbError as exc:
                        # Not recorded: a later run asks again.
                        print(f"[{i}/{len(questions)}] {setup.name}: {exc}", file=sys.stderr)
                        continue
                    record = {"setup": setup.name, **score(q, answer, spans[q.corpus])}
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                    out.flush()
                    print(
                        f"[{i}/{len(questions)}] {setup.name:8} {q.kind:12} "
                        f"{answer.timings.total:5.1f}s {answer.text[:100]!r}",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        for store in stores.values():
            store.close()


def table(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for setup in SETUPS:
        mine = [r for r in records if r["setup"] == setup.name]

        def of(kind: str, rows: Sequence[dict[str, Any]] = mine) -> list[dict[str, Any]]:
            return [r for r in rows if r["kind"] == kind]

        personal, unanswerable, docs = of("answerable"), of("unanswerable"), of("docs")
        figures[setup.name] = {
            "personal_n": len(personal),
            "personal_contains": _share(personal, "contains"),
            "personal_first_person_contains": _share(
                [r for r in personal if r["form"] == "first-person"], "contains"
            ),
            "personal_f1": _mean(personal, "f1"),
            "personal_citation_precision": _precision(personal),
            "personal_not_in_notes": _share(personal, "not_in_notes"),
            "unanswerable_n": len(unanswerable),
            "unanswerable_not_in_notes": _share(unanswerable, "not_in_notes"),
            "docs_n": len(docs),
            "docs_f1": _mean(docs, "f1"),
            "docs_contains": _share(docs, "contains"),
            "docs_citation_precision": _precision(docs),
            "seconds_per_answer": _mean(mine, "seconds"),
        }
    return figures


def _share(rows: Sequence[dict[str, Any]], key: str) -> float:
    return sum(bool(r[key]) for r in rows) / len(rows) if rows else float("nan")


def _mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    return statistics.mean(float(r[key]) for r in rows) if rows else float("nan")


def _precision(rows: Sequence[dict[str, Any]]) -> float:
    cited = sum(r["cited"] for r in rows)
    return sum(r["cited_gold"] for r in rows) / cited if cited else float("nan")


def print_table(figures: dict[str, dict[str, float]]) -> None:
    columns = [
        ("personal_contains", "contains gold"),
        ("personal_first_person_contains", "1st-person contains"),
        ("personal_f1", "F1"),
        ("personal_citation_precision", "citations on gold"),
        ("personal_not_in_notes", "said not in notes"),
        ("unanswerable_not_in_notes", "unanswerable: not in notes"),
        ("docs_f1", "docs F1"),
        ("docs_citation_precision", "docs citations on gold"),
        ("seconds_per_answer", "s/answer"),
    ]
    first = next(iter(figures.values()))
    print(
        f"personal-dev n={first['personal_n']:.0f}, unanswerable n={first['unanswerable_n']:.0f}, "
        f"docs-rag n={first['docs_n']:.0f}"
    )
    print("| setup | " + " | ".join(title for _, title in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name, row in figures.items():
        print(f"| {name} | " + " | ".join(f"{row[key]:.3f}" for key, _ in columns) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("personal_dev", type=Path, help="the personal-dev dataset folder")
    parser.add_argument("docs_rag", type=Path, help="the docs-rag dataset folder")
    parser.add_argument("--answerable", type=int, default=40, help="personal-dev questions")
    parser.add_argument("--unanswerable", type=int, default=30, help="unanswerable questions")
    parser.add_argument("--docs", type=int, default=20, help="docs-rag questions")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--top-k", type=int, default=5, help="passages per answer")
    parser.add_argument("--block", type=int, default=6, help="questions per setup in turn")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("KB_BENCH_DIR", Path.home() / ".cache/kb/bench")),
        help="where the benchmark's PostgreSQL and its indexes live (kept between runs)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("answers.jsonl"), help="one JSON line per answer"
    )
    parser.add_argument("--index-only", action="store_true", help="stop after indexing")
    parser.add_argument("--table-only", action="store_true", help="print the table of --out")
    parser.add_argument("--json", type=Path, help="also save the table's figures here")
    args = parser.parse_args(argv)

    if not args.table_only:
        corpora, questions = load(args.personal_dev, args.docs_rag)
        counts = {"answerable": args.answerable, "unanswerable": args.unanswerable}
        counts["docs"] = args.docs
        picked = sample(questions, counts, args.seed)
        config = config_for(corpora["docs-rag"], "none", args.data_dir)
        run(args, make_chat(config.llm), make_embedder(config.llm), corpora, picked)
        if args.index_only:
            return 0
    records = list(map(json.loads, _lines(args.out))) if args.out.exists() else []
    figures = table(records)
    print_table(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


def _lines(path: Path) -> Iterator[str]:
    return (line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(main())
