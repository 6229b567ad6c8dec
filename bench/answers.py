"""Answer quality of `kb ask`: what a small local model gets right, and where it loses it.

Each question is answered as `kb ask` answers it (the search service of a config, its
[query] settings, the learned ranker, the answer prompt), in one or both setups:

    kb         kb's default index with no model at index time (context.summaries =
               "structure", paragraph vectors), hybrid search, first-person questions read
               as the owner's and the owner's notes marked as theirs
    baseline   raw chunks (context.summaries = "none", no paragraph vectors), vector search,
               no owner handling: a plain retrieval-augmented answer (--setups kb,baseline)

Three question sets:

    personal-dev           LoCoMo questions with short gold answers (single-hop, multi-hop,
                           temporal, open-domain; third- and first-person forms), about two
                           people's first-person notes, the first speaker the owner. A seeded
                           sample stratified by kind and form (--answerable, 150 by default).
    unanswerable           LoCoMo's adversarial questions (all 101 by default), which the notes
                           do not support: most ask about the wrong person.
    docs-rag               documentation questions with sentence-long gold answers.

Figures, per setup:

    token F1               LoCoMo's: its normalisation (lower case, no punctuation, no
                           articles) and Porter stems; a multi-hop gold answer is a list, each
                           item matched by its best piece of the answer; an open-domain one is
                           the part before its ";".
    holds gold             the normalised gold answer inside the normalised answer.
    citation precision     of the passages an answer cites, the share that hold a gold span.
    decline precision      of the personal-dev answers that said "not in your notes", the share
                           that were unanswerable; recall: the share of unanswerable declined.
    retrieval / model      every answerable question whose answer does not hold gold is put
                           down to retrieval (no gold passage was given to the model) or to
                           the model (a gold passage was given, and the answer missed it).

Each corpus is indexed once per setup into its own database on the embedded PostgreSQL in
--data-dir; nothing at index time calls the chat model. Every answer is appended to --out as
one JSON line the moment it is written (its text, every passage given to the model with its
span and whether it holds gold, the timings), and a later run skips what is there: an
interrupted run loses nothing, and --table-only prints the table from the file. Progress
goes to stderr and to --log. Questions are interleaved across the sets, so a run stopped
early is still a fair sample.

Models come from the environment, as for kb (`source` a model stack's variables;
KB_ASK_MODEL and KB_ASK_HOST point the answers alone at another model). The full run:

    nohup nice -n 10 .venv/bin/python bench/answers.py \\
        ../shared/eval/personal-dev ../shared/eval/docs-rag --out answers.jsonl > answers.out &
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import statistics
import string
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from nltk.stem import PorterStemmer  # type: ignore[import-untyped]

from kb import db
from kb.config import Config, SearchMode
from kb.container import Container, open_store
from kb.errors import KbError
from kb.llm import make_chat, make_embedder
from kb.models.base import ChatModel, Embedder, Prompt, TokenUsage
from kb.search.answer import Answer
from kb.services.searching import SearchRequest
from kb.store import Store, databases
from retrieval import PARAGRAPHS, Gold, Spans, Vault, _hit, make_config


@dataclass(frozen=True)
class Setup:
    name: str
    level: str  # the index's level, as bench/retrieval.py names it
    mode: SearchMode
    owner: bool


SETUPS = {
    s.name: s
    for s in (
        Setup("kb", f"structure{PARAGRAPHS}", "hybrid", owner=True),
        Setup("baseline", "none", "vector", owner=False),
    )
}


class WholeAnswers:
    """A chat model whose stream is its whole answer in one piece. llama-cpp-python's server
    ends a stream as soon as another request waits (its `interrupt_requests`), and a model
    server shared with an indexing job always has one waiting: a streamed answer would be
    cut short. Without --stream the benchmark asks for whole answers, and the time to the
    first words is the whole answer's."""

    def __init__(self, chat: ChatModel) -> None:
        self.name = chat.name
        self.usage = chat.usage
        self._chat = chat

    def complete(self, prompt: Prompt) -> str:
        return self._chat.complete(prompt)

    def stream(self, prompt: Prompt) -> Iterator[str]:
        yield self._chat.complete(prompt)


class Recorded:
    """A chat model that says to each question what a model said in an earlier run
    (--recheck): kb's retrieval and its check of today, over the same words."""

    name = "recorded"

    def __init__(self, said: dict[str, str]) -> None:
        self.usage = TokenUsage()
        self._said = said

    def complete(self, prompt: Prompt) -> str:
        return self._said[prompt.inputs["question"]]

    def stream(self, prompt: Prompt) -> Iterator[str]:
        yield self.complete(prompt)


def said_before(records: Sequence[dict[str, Any]]) -> dict[str, str]:
    """What the model wrote to each question of a run's records (its words, also where kb
    withdrew them); questions no model was asked (no passage found) are left out."""
    return {r["question"]: r["withdrawn"] or r["answer"] for r in records if r.get("model")}


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
    category: str = ""  # personal-dev: single-hop, multi-hop, temporal, open-domain


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
            Question(
                q["qid"],
                "answerable",
                vault,
                q["query"],
                str(q["answer"]),
                gold,
                q["form"],
                q["category"],
            )
        )
    for line in _lines(personal_dev / "unanswerable.jsonl"):
        q = json.loads(line)
        questions.append(Question(q["qid"], "unanswerable", q["vault"], q["query"], None, ()))
    for line in _lines(docs_rag / "queries.jsonl"):
        q = json.loads(line)
        gold = tuple(Gold(g["file"], g["start"], g["end"]) for g in q["gold"])
        questions.append(Question(q["qid"], "docs", "docs-rag", q["query"], q["answer"], gold))
    return corpora, questions


def stratified(pool: Sequence[Question], n: int, rng: random.Random) -> list[Question]:
    """`n` of the pool, each stratum (kind of question and form) in proportion to its size
    and none left empty while `n` allows, in a seeded random order."""
    strata: dict[tuple[str, str], list[Question]] = defaultdict(list)
    for q in pool:
        strata[q.category, q.form].append(q)
    n = min(n, len(pool))
    keys = sorted(strata)
    exact = {k: n * len(strata[k]) / len(pool) for k in keys}
    quota = {k: min(len(strata[k]), max(1, int(exact[k]))) for k in keys}
    # Then one at a time to the stratum furthest below its share (or from the one furthest
    # above it), until the quotas add up to n.
    while sum(quota.values()) < n:
        k = max((k for k in keys if quota[k] < len(strata[k])), key=lambda k: exact[k] - quota[k])
        quota[k] += 1
    while sum(quota.values()) > n:
        k = max((k for k in keys if quota[k] > 0), key=lambda k: quota[k] - exact[k])
        quota[k] -= 1
    picked = [q for k in keys for q in rng.sample(strata[k], quota[k])]
    rng.shuffle(picked)
    return picked


def sample(questions: Sequence[Question], counts: dict[str, int], seed: int) -> list[Question]:
    """A seeded sample of each kind (personal-dev's stratified), interleaved so that any
    prefix is balanced."""
    rng = random.Random(seed)
    picked = []
    for kind, n in counts.items():
        pool = [q for q in questions if q.kind == kind]
        picked.append(
            stratified(pool, n, rng)
            if kind == "answerable"
            else rng.sample(pool, min(n, len(pool)))
        )
    order: list[Question] = []
    for i in range(max(map(len, picked), default=0)):
        order += [group[i] for group in picked if i < len(group)]
    return order


# LoCoMo's answer normalisation and token F1 (its task_eval/evaluation.py, after SQuAD's).
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = frozenset(string.punctuation)
_STEMMER = PorterStemmer()


def normalise(text: str) -> str:
    text = "".join(ch for ch in text.replace(",", "").lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains(answer: str, gold: str) -> bool:
    return bool(normalise(gold)) and normalise(gold) in normalise(answer)


def token_f1(answer: str, gold: str) -> float:
    predicted = [_STEMMER.stem(w) for w in normalise(answer).split()]
    wanted = [_STEMMER.stem(w) for w in normalise(gold).split()]
    common = sum((Counter(predicted) & Counter(wanted)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def locomo_f1(answer: str, gold: str, category: str) -> float:
    """LoCoMo's score of an answer by the question's kind: a multi-hop gold answer is a list
    whose every item takes its best-matching piece of the answer; an open-domain one is
    what comes before its ";"."""
    if category == "multi-hop":
        pieces = [p.strip() for p in answer.split(",")]
        items = [g.strip() for g in gold.split(",")]
        return statistics.mean(max(token_f1(p, g) for p in pieces) for g in items)
    if category == "open-domain":
        gold = gold.split(";")[0].strip()
    return token_f1(answer, gold)


def config_for(corpus: Corpus, level: str, data_dir: Path) -> Config:
    # docs-rag is nobody's personal notes: the owner then matters to no note.
    vault = Vault(corpus.key, corpus.folder, (), corpus.owner or Vault.owner, corpus.personal)
    return make_config(vault, data_dir, level)


def score(question: Question, answer: Answer, spans: Spans) -> dict[str, Any]:
    """One answer's JSON line: what it said, every passage given to the model (and whether
    it holds gold), what it cited, its figures."""
    golden = {s.number for s in answer.sources if any(_hit(spans(s.hit), g) for g in question.gold)}
    record: dict[str, Any] = {
        "qid": question.qid,
        "kind": question.kind,
        "category": question.category,
        "form": question.form,
        "question": question.text,
        "answer": answer.text,
        "not_in_notes": answer.not_in_notes,
        # The model's own answer, when kb withdrew it (kb.search.grounding), and why.
        "withdrawn": answer.withdrawn,
        "withdrawn_because": answer.withdrawn_because,
        "sources": [
            {
                "path": s.hit.path,
                "lines": [s.hit.start_line, s.hit.end_line],
                "cut": s.cut,
                "gold": s.number in golden,
            }
            for s in answer.sources
        ],
        "gold_given": bool(golden),
        "cited": len(answer.cited),
        "cited_gold": len(golden.intersection(answer.cited)),
        "model": answer.model,
        "prompt_version": answer.prompt_version,
        "seconds": answer.timings.total,
        "first_token": answer.timings.first_token,
    }
    if question.answer is not None:
        record["gold_answer"] = question.answer
        record["contains"] = contains(answer.text, question.answer)
        record["f1"] = locomo_f1(answer.text, question.answer, question.category)
    return record


def done_keys(out: Path) -> set[tuple[str, str]]:
    if not out.exists():
        return set()
    return {(r["setup"], r["qid"]) for r in map(json.loads, _lines(out))}


class Log:
    """Progress lines, timestamped, to stderr and appended to a file."""

    def __init__(self, path: Path | None) -> None:
        self._file: TextIO | None = path.open("a", encoding="utf-8") if path else None

    def __call__(self, line: str) -> None:
        stamped = f"{dt.datetime.now():%H:%M:%S} {line}"
        print(stamped, file=sys.stderr, flush=True)
        if self._file is not None:
            self._file.write(stamped + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def run(
    args: argparse.Namespace,
    setups: Sequence[Setup],
    chat: ChatModel,
    embedder: Embedder,
    corpora: dict[str, Corpus],
    questions: Sequence[Question],
    log: Log,
) -> None:
    server = db.embedded_url(args.data_dir)
    stores: dict[tuple[str, str], Store] = {}
    parts: dict[tuple[str, str], Container] = {}
    try:
        for key in sorted({q.corpus for q in questions}):
            for level in sorted({s.level for s in setups}):
                name = f"answers_{key}_{level}".replace("-", "_").replace("+", "_")
                config = config_for(corpora[key], level, args.data_dir)
                store = stores[key, level] = open_store(databases.database_on(server, name))
                container = parts[key, level] = Container(
                    config, store, chat=chat, embedder=embedder
                )
                started = time.perf_counter()
                report = container.sync()
                # The vectors too: the questions are asked of the whole index.
                container.worker(until_empty=True, fail_fast=True, speeds=("embed",)).run()
                log(
                    f"indexed {key} ({level}): {report.indexed} new, {report.unchanged} "
                    f"unchanged, {report.llm_calls} LLM calls, "
                    f"{time.perf_counter() - started:.0f} s"
                )
        if args.index_only:
            return
        spans = {key: Spans(corpus.folder) for key, corpus in corpora.items()}
        done = done_keys(args.out)
        with args.out.open("a", encoding="utf-8") as out:
            # A block of questions per setup in turn: consecutive prompts of one setup share
            # their instructions, which the server then evaluates once, and a run stopped
            # early still has every setup on nearly the same questions.
            blocks = [questions[i : i + args.block] for i in range(0, len(questions), args.block)]
            for block, setup in ((b, s) for b in blocks for s in setups):
                for q in block:
                    i = questions.index(q) + 1
                    if (setup.name, q.qid) in done:
                        continue
                    service = parts[q.corpus, setup.level].search_service()
                    request = SearchRequest(
                        q.text,
                        top_k=args.top_k,
                        mode=setup.mode,
                        owner=setup.owner and corpora[q.corpus].owner is not None,
                    )
                    try:
                        answer = service.ask(request)
                    except KbError as exc:
                        # Not recorded: a later run asks again.
                        log(f"[{i}/{len(questions)}] {setup.name} {q.qid}: {exc}")
                        continue
                    record = {"setup": setup.name, **score(q, answer, spans[q.corpus])}
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                    out.flush()
                    log(_progress(i, len(questions), setup, q, record))
    finally:
        for store in stores.values():
            store.close()


def _progress(i: int, n: int, setup: Setup, q: Question, record: dict[str, Any]) -> str:
    if q.kind == "unanswerable":
        verdict = "declined" if record["not_in_notes"] else "answered"
    else:
        held = "holds gold" if record.get("contains") else f"F1 {record['f1']:.2f}"
        verdict = f"{held}, gold {'given' if record['gold_given'] else 'not given'}"
    return (
        f"[{i}/{n}] {setup.name:8} {q.kind:12} {record['seconds']:5.1f}s {verdict}: "
        f"{record['answer'][:90]!r}"
    )


def paired(
    before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Two runs' records on the questions both answered in the same setup, each setup named
    for its run ("kb before", "kb after"): a before-and-after table on the same questions,
    however far each run got."""
    keys = {(r["setup"], r["qid"]) for r in before} & {(r["setup"], r["qid"]) for r in after}
    return [
        {**r, "setup": f"{r['setup']} {run}"}
        for run, records in (("before", before), ("after", after))
        for r in records
        if (r["setup"], r["qid"]) in keys
    ]


def table(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The figures of each setup in the records (its name → figure → value)."""
    figures: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(r["setup"] for r in records):
        mine = [r for r in records if r["setup"] == name]

        def of(kind: str, rows: Sequence[dict[str, Any]] = mine) -> list[dict[str, Any]]:
            return [r for r in rows if r["kind"] == kind]

        personal, unanswerable, docs = of("answerable"), of("unanswerable"), of("docs")
        missed = [r for r in personal if not r["contains"]]
        declined_wrongly = sum(r["not_in_notes"] for r in personal)
        declined_rightly = sum(r["not_in_notes"] for r in unanswerable)
        row = {
            "personal_n": len(personal),
            "personal_f1": _mean(personal, "f1"),
            "personal_contains": _share(personal, "contains"),
            "personal_first_person_contains": _share(
                [r for r in personal if r["form"] == "first-person"], "contains"
            ),
            "personal_citing": _share(personal, "cited"),
            "personal_citation_precision": _precision(personal),
            "personal_gold_given": _share(personal, "gold_given"),
            "personal_declined": _share(personal, "not_in_notes"),
            "personal_withdrawn": _share(personal, "withdrawn"),
            "unanswerable_withdrawn": _share(unanswerable, "withdrawn"),
            "missed_retrieval": _part(sum(not r["gold_given"] for r in missed), len(personal)),
            "missed_model": _part(sum(r["gold_given"] for r in missed), len(personal)),
            "unanswerable_n": len(unanswerable),
            "unanswerable_declined": _share(unanswerable, "not_in_notes"),
            "decline_precision": _part(declined_rightly, declined_rightly + declined_wrongly),
            "decline_recall": _part(declined_rightly, len(unanswerable)),
            "docs_n": len(docs),
            "docs_f1": _mean(docs, "f1"),
            "docs_contains": _share(docs, "contains"),
            "docs_citation_precision": _precision(docs),
            "seconds_per_answer": _mean(mine, "seconds"),
            "first_token": _mean([r for r in mine if r["first_token"] is not None], "first_token"),
        }
        for category in sorted({r["category"] for r in personal}):
            row[f"f1_{category}"] = _mean([r for r in personal if r["category"] == category], "f1")
        figures[name] = row
    return figures


def _share(rows: Sequence[dict[str, Any]], key: str) -> float:
    # Records of answers from before kb withdrew any have no "withdrawn".
    return _part(sum(bool(r.get(key)) for r in rows), len(rows))


def _part(count: int, whole: int) -> float:
    return count / whole if whole else float("nan")


def _mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    return statistics.mean(float(r[key]) for r in rows) if rows else float("nan")


def _precision(rows: Sequence[dict[str, Any]]) -> float:
    return _part(sum(r["cited_gold"] for r in rows), sum(r["cited"] for r in rows))


COLUMNS = (
    ("personal_f1", "F1"),
    ("personal_contains", "holds gold"),
    ("personal_first_person_contains", "1st-person holds gold"),
    ("personal_citing", "answers citing"),
    ("personal_citation_precision", "citations on gold"),
    ("personal_gold_given", "gold given"),
    ("missed_retrieval", "missed: retrieval"),
    ("missed_model", "missed: model"),
    ("personal_declined", "answerable declined"),
    ("personal_withdrawn", "of them withdrawn by kb"),
    ("unanswerable_declined", "unanswerable declined"),
    ("unanswerable_withdrawn", "of them withdrawn by kb"),
    ("decline_precision", "decline precision"),
    ("docs_f1", "docs F1"),
    ("docs_citation_precision", "docs citations on gold"),
    ("seconds_per_answer", "s/answer"),
    ("first_token", "s to first words"),
)


def print_table(figures: dict[str, dict[str, float]]) -> None:
    if not figures:
        print("no answers yet")
        return
    first = next(iter(figures.values()))
    print(
        f"personal-dev n={first['personal_n']:.0f}, unanswerable n={first['unanswerable_n']:.0f}, "
        f"docs-rag n={first['docs_n']:.0f}"
    )
    print("| setup | " + " | ".join(title for _, title in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for name, row in figures.items():
        print(f"| {name} | " + " | ".join(f"{row[key]:.3f}" for key, _ in COLUMNS) + " |")
    kinds = sorted(k for k in first if k.startswith("f1_"))
    print("\nF1 by kind: " + ", ".join(k.removeprefix("f1_") for k in kinds))
    for name, row in figures.items():
        print(f"  {name}: " + ", ".join(f"{row.get(k, float('nan')):.3f}" for k in kinds))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("personal_dev", type=Path, help="the personal-dev dataset folder")
    parser.add_argument("docs_rag", type=Path, help="the docs-rag dataset folder")
    parser.add_argument("--answerable", type=int, default=150, help="personal-dev questions")
    parser.add_argument("--unanswerable", type=int, default=101, help="unanswerable questions")
    parser.add_argument("--docs", type=int, default=100, help="docs-rag questions")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument(
        "--top-k", type=int, default=None, help="passages per answer (default: [ask] passages)"
    )
    parser.add_argument(
        "--setups", default="kb", help=f"comma-separated, of: {', '.join(SETUPS)} (default kb)"
    )
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
    parser.add_argument("--log", type=Path, help="also append progress here")
    parser.add_argument(
        "--timeout", type=float, default=1200.0, help="seconds an answer may take (llm.timeout)"
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help="stream answers, to time the first words (on a server no other job uses)",
    )
    parser.add_argument(
        "--recheck",
        type=Path,
        help="an earlier run's --out: its questions answered again with the words its model "
        "wrote then, so a change to retrieval or to the check is measured without a model",
    )
    parser.add_argument("--index-only", action="store_true", help="stop after indexing")
    parser.add_argument("--table-only", action="store_true", help="print the table of --out")
    parser.add_argument("--json", type=Path, help="also save the table's figures here")
    parser.add_argument(
        "--against",
        type=Path,
        help="an earlier run's --out: both tables, on the questions both runs answered",
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.setups.split(",") if n.strip()]
    if not names or any(n not in SETUPS for n in names):
        parser.error(f"--setups takes some of {', '.join(SETUPS)}")
    if args.recheck and len(names) > 1:
        parser.error("--recheck checks one setup's answers: name it alone in --setups")

    if not args.table_only:
        corpora, questions = load(args.personal_dev, args.docs_rag)
        counts = {"answerable": args.answerable, "unanswerable": args.unanswerable}
        counts["docs"] = args.docs
        picked = sample(questions, counts, args.seed)
        said: dict[str, str] = {}
        if args.recheck:
            earlier = map(json.loads, _lines(args.recheck))
            said = said_before([r for r in earlier if r["setup"] == names[0]])
            picked = [q for q in picked if q.text in said]
        config = config_for(corpora["docs-rag"], "none", args.data_dir)
        log = Log(args.log)
        try:
            log(f"{len(picked)} questions ({counts}, seed {args.seed}), setups {', '.join(names)}")
            # A shared server queues each answer behind other jobs' requests.
            chat: ChatModel
            if args.recheck:
                chat = Recorded(said)
            else:
                chat = make_chat(replace(config.llm, timeout=args.timeout))
                if not args.stream:
                    chat = WholeAnswers(chat)
            embedder = make_embedder(config.llm)
            run(args, [SETUPS[n] for n in names], chat, embedder, corpora, picked, log)
        finally:
            log.close()
        if args.index_only:
            return 0
    records = list(map(json.loads, _lines(args.out))) if args.out.exists() else []
    if args.against:
        records = paired(list(map(json.loads, _lines(args.against))), records)
    figures = table(records)
    print_table(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


def _lines(path: Path) -> Iterator[str]:
    return (line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(main())
