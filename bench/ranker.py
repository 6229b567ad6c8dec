"""A learned ranker over kb's own signals: does it order the candidates kb already finds
better than kb's fusion does?

Every question is searched as kb searches (a SearchPlan, retrieved by
kb.search.hybrid.retrieve, as bench/retrieval.py does: the owner's name for
full-text search on a first-person question, the question in the owner's voice for the
embedder where the level's passages speak in writers' voices), and every chunk of its two
candidate lists (kb.search.plan.CANDIDATES each) becomes a row of kb.search.features.FEATURES,
made as a query makes it: what each list said of it, kb's fused score and place, its own and its
passages' similarity, its note's other candidates, the owner and first-person rule, the
time the question names against the note's date, its words and names against the
question's, and its words against the other candidates'. Its label: the chunk hits a gold
section (retrieval._hit).

Two models are fitted on personal-train only (personal-dev is never fitted or tuned on):
gradient-boosted trees with LightGBM's lambdarank objective, and a logistic regression over
the standardised features, for comparison. Each orders the candidates of every question of
the evaluated datasets; recall@k and MRR@3 are scored as bench/retrieval.py scores them,
against kb's own order of the same candidates. docs-rag is also scored by cross-validation
(its folds grouped by the note of each question's gold, each fold's model fitted on
personal-train and the other folds).

    .venv/bin/python bench/ranker.py --train ../shared/eval/personal-train \\
        --evaluate ../shared/eval/personal-dev ../shared/eval/docs-rag \\
        --save src/kb/search/ranker.json
    .venv/bin/python bench/ranker.py ... --limit-docs docs-rag=25   # its 25 smallest notes

One model serves every embedder and context level: `--also-fit-on DIR[=LEVEL]` adds the
training datasets' rows an earlier run kept in DIR (another embedder's index, or another
level's, such as the questions level whose rows `--level questions` makes; `--only-vaults
personal-train=conv-43,conv-44` makes them of the vaults that level has indexed so far).
Cross-validation keeps a fold's rows under every embedder and level out while it is scored.

The indexes are bench/retrieval.py's (the same databases in --data-dir, indexed here if
they are not yet). Models come from the environment, as for bench/retrieval.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from kb import db
from kb.container import open_store
from kb.fusion import Fused, Fusion
from kb.llm import make_chat, make_embedder
from kb.models.base import Embedder
from kb.results import SearchHit
from kb.search import features
from kb.search import ranker as kb_ranker
from kb.search.features import FEATURES, FEATURES_VERSION, SCHEMA
from kb.search.hybrid import fused_order, retrieve
from kb.search.plan import SearchPlan
from kb.store import NO_FILTER, Candidate, SearchFilter, Store, databases
from retrieval import (
    PARAGRAPHS,
    CachedEmbedder,
    Dataset,
    Limit,
    Query,
    Scores,
    Spans,
    Vault,
    _database,
    _hit,
    index,
    load_dataset,
    make_config,
)

ROOT = Path(__file__).resolve().parents[1]


def with_paragraphs(level: str) -> str:
    """A context level as its indexes are named here: with its paragraph vectors on."""
    return f"{level}{PARAGRAPHS}"


# The level whose rows are made unless --level names another.
LEVEL = with_paragraphs("structure")


@dataclass
class Asked:
    """One question's candidates in kb's order: their spans, labels and feature rows."""

    query: Query
    spans: list[tuple[str, int, int]]
    labels: list[int]
    features: np.ndarray

    @property
    def group(self) -> str:
        """What cross-validation keeps together: its vault where a dataset has several
        (questions of one person's notes), else the note of its first gold section."""
        return self.query.vault or self.query.gold[0].file

    def to_json(self) -> dict[str, Any]:
        return {
            "qid": self.query.qid,
            "spans": self.spans,
            "labels": self.labels,
            "features": self.features.tolist(),
        }


def ask_all(
    dataset: Dataset,
    stores: Mapping[str, Store],
    embedder: Embedder,
    fusion: Fusion,
    filters: Mapping[str, SearchFilter],
    *,
    voiced_queries: bool,
    today: dt.date,
) -> tuple[list[Asked], list[float], list[float]]:
    """Every question searched as kb searches it (a plan retrieved by kb.search.hybrid), its
    candidates as feature rows; and the milliseconds per question of retrieving them and of
    the feature rows."""
    owners = {v.name: v.owner for v in dataset.vaults}
    spans = {v.name: Spans(v.path, v.prefix) for v in dataset.vaults}
    asked: list[Asked] = []
    search_ms: list[float] = []
    features_ms: list[float] = []
    for n, q in enumerate(dataset.queries, 1):
        store, owner = stores[q.vault], owners[q.vault]
        plan = SearchPlan(
            q.text,
            owner=owner,
            fusion=fusion,
            filters=filters[q.vault],
            voiced_index=voiced_queries,
            today=today,
        )
        asked_at = time.perf_counter()
        got = retrieve(
            embedder, plan, candidates=store.candidates, vectors=store.vectors, queue=store.queue
        )
        search_ms.append((time.perf_counter() - asked_at) * 1000)
        # Rows of both lists only: a question the embedder could not read would teach the
        # trees what a text search alone looks like.
        if got.used != "hybrid":
            raise SystemExit(f"{q.qid}: {'; '.join(got.warnings)}")
        order = fused_order(got.found, "hybrid", fusion, got.period)
        started = time.perf_counter()
        rows = features.rows(q.text, owner, got.found, order, got.period)
        features_ms.append((time.perf_counter() - started) * 1000)
        matrix = np.asarray(rows, dtype=np.float64).reshape(len(order), len(FEATURES))
        chunk_spans = [spans[q.vault](_as_hit(got.found.rows[f.id])) for f in order]
        labels = [int(any(_hit(s, g) for g in q.gold)) for s in chunk_spans]
        asked.append(Asked(q, chunk_spans, labels, matrix))
        if n % 100 == 0:
            print(f"    {n} questions", file=sys.stderr, flush=True)
    return asked, search_ms, features_ms


def _as_hit(row: Candidate) -> SearchHit:
    """A candidate as Spans reads a hit: its note and lines."""
    return SearchHit(
        row.vault, row.path, row.header_path, row.content, 0.0, row.similarity,
        row.start_line, row.end_line,
    )  # fmt: skip


def open_indexes(
    dataset: Dataset, data_dir: Path, embedder: Embedder, level: str, *, subset: bool
) -> dict[str, Store]:
    """Each vault's index at `level` in bench/retrieval.py's database, indexed (or brought
    up to date) first; with `subset`, only the vault's files of the dataset."""
    server = db.embedded_url(data_dir)
    chat = make_chat(make_config(dataset.vaults[0], data_dir, level).llm)
    stores = {}
    for vault in dataset.vaults:
        name = _database(dataset.name, vault.name, level)
        store = stores[vault.name] = open_store(databases.database_on(server, name))
        # Its cost is counted in bench/retrieval.py's ledger of the same database.
        config = make_config(vault, data_dir, level)
        ledger = data_dir / f"{name}.cost.json"
        index(config, store, chat, embedder, vault.files if subset else (), ledger)
    return stores


# -- fitting and scoring ------------------------------------------------------------------

# Small trees: a few thousand questions to fit, and a model that must run in milliseconds
# and carry to vaults it never saw. Chosen among 100-300 trees of 7 or 15 leaves by
# personal-train's leave-one-vault-out figures and docs-rag's, never personal-dev's: 300
# of 7 had the best MRR@3 on personal-train and recall@5 on docs-rag fitted on
# personal-train alone (docs/retrieval.md, "A learned ranker").
LGB_PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "eval_at": [5],
    "learning_rate": 0.05,
    "num_leaves": 7,
    "min_data_in_leaf": 40,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "num_threads": 1,  # a shared machine; also makes the fit repeatable
    "deterministic": True,
    "seed": 7,
    "verbose": -1,
}
LGB_ROUNDS = 300


@dataclass
class Ranker:
    """A fitted model: scores a question's feature rows, higher first."""

    name: str
    score: Callable[[np.ndarray], np.ndarray]
    model: lgb.Booster | Pipeline


def _stack(asked: Sequence[Asked]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    x = np.vstack([a.features for a in asked])
    y = np.concatenate([np.asarray(a.labels, dtype=np.float64) for a in asked])
    return x, y, [len(a.labels) for a in asked]


def fit_lightgbm(asked: Sequence[Asked], rounds: int = LGB_ROUNDS) -> Ranker:
    x, y, groups = _stack(asked)
    data = lgb.Dataset(x, y, group=groups, feature_name=list(FEATURES), free_raw_data=False)
    booster = lgb.train(LGB_PARAMS, data, num_boost_round=rounds)

    def scores(rows: np.ndarray) -> np.ndarray:
        return np.asarray(booster.predict(rows, num_threads=1))

    return Ranker("lightgbm", scores, booster)


def fit_linear(asked: Sequence[Asked]) -> Ranker:
    x, y, _ = _stack(asked)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=5000))
    model.fit(x, y)
    return Ranker("linear", model.decision_function, model)


def order_by(ranker: Ranker | None, asked: Asked) -> list[int]:
    """The candidates' indices best first: the ranker's, or kb's order (ties keep it)."""
    if ranker is None:
        return list(range(len(asked.labels)))
    scores = ranker.score(asked.features)
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def score(asked: Sequence[Asked], ranker: Ranker | None) -> Scores:
    scores = Scores()
    for a in asked:
        picked = order_by(ranker, a)
        scores.add(a.query, [a.spans[i] for i in picked], 0.0)
    return scores


def best_possible(asked: Sequence[Asked]) -> Scores:
    """The candidates that hit a gold section first: what any order of them can reach."""
    scores = Scores()
    for a in asked:
        picked = sorted(range(len(a.labels)), key=lambda i: -a.labels[i])
        scores.add(a.query, [a.spans[i] for i in picked], 0.0)
    return scores


def cross_validated(
    asked: Sequence[Asked],
    extra: Sequence[Asked],
    fit: Callable[[Sequence[Asked]], Ranker],
    twins: Sequence[Asked] = (),
) -> Scores:
    """`asked` scored in folds grouped by the note of each question's gold, each fold by a
    model fitted on `extra` and the other folds (with their `twins`: the same questions'
    rows under another embedder, kept out with their fold)."""
    folds = min(5, len({a.group for a in asked}))
    ordered: dict[str, list[tuple[str, int, int]]] = {}
    for train, test in GroupKFold(folds).split(
        np.zeros(len(asked)), groups=[a.group for a in asked]
    ):
        kept = {asked[i].group for i in train}
        ranker = fit([*extra, *(asked[i] for i in train), *(t for t in twins if t.group in kept)])
        for i in test:
            ordered[asked[i].query.qid] = [asked[i].spans[j] for j in order_by(ranker, asked[i])]
    scores = Scores()
    for a in asked:
        scores.add(a.query, ordered[a.query.qid], 0.0)
    return scores


def in_folds(
    asked: Sequence[Asked],
    name: str,
    by_dataset: Mapping[str, Sequence[Asked]],
    twins: Mapping[str, Sequence[Asked]],
    rounds: int,
) -> dict[str, dict[str, float]]:
    """Dataset `name`'s figures in folds, by trees and the linear model fitted on the other
    training datasets (with their twins under other embedders) and its own other folds:
    never on the fold scored, nor on that fold's twins."""
    others = [
        a for other, fitted in by_dataset.items() if other != name for a in [*fitted, *twins[other]]
    ]
    own = twins.get(name, [])
    return {
        "lightgbm, cross-validated": _figures(
            cross_validated(asked, others, lambda a: fit_lightgbm(a, rounds), own)
        ),
        "linear, cross-validated": _figures(cross_validated(asked, others, fit_linear, own)),
    }


def inference_ms(asked: Sequence[Asked], booster: lgb.Booster) -> list[float]:
    """Milliseconds to order each question's candidates from their feature rows as a query
    does: the trees exported to kb's ranker file and scored by kb.search.ranker, and the
    sort (the rows' own cost is measured as they are made)."""
    shipped = kb_ranker.parse(export(booster, {"level": LEVEL, "embed_model": ""}), SCHEMA)
    times = []
    for a in asked:
        rows = a.features.tolist()
        order = [Fused(i, 0.0, None, None, None, None) for i in range(len(rows))]
        started = time.perf_counter()
        kb_ranker.order(shipped, order, rows)
        times.append((time.perf_counter() - started) * 1000)
    return times


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))] if ordered else 0.0


def importance(booster: lgb.Booster) -> list[tuple[str, float]]:
    """Each feature's share of the trees' total gain, largest first."""
    gains = booster.feature_importance(importance_type="gain")
    total = float(gains.sum()) or 1.0
    return sorted(
        ((name, float(g) / total) for name, g in zip(FEATURES, gains, strict=True)),
        key=lambda item: -item[1],
    )


# -- the run --------------------------------------------------------------------------------


def load_asked(
    folder: Path, args: argparse.Namespace, embedder: Embedder
) -> tuple[Dataset, list[Asked], list[float], list[float]]:
    """A dataset's questions as feature rows (kept in --data-dir, made again with --fresh),
    and the milliseconds per question of retrieving its candidates (kb.search.hybrid.retrieve:
    the query embedded, the index's state, the candidates query) and of the feature rows."""
    name = folder.resolve().name
    docs = args.limit.get(name)
    limit = Limit(docs, smallest=bool(docs))
    dataset = only_vaults(load_dataset(folder, limit), args.vaults.get(name))
    vaults = [v.name for v in dataset.vaults]
    cache = _kept_rows(args.data_dir, dataset, args.level, docs)
    kept = json.loads(cache.read_text()) if cache.exists() and not args.fresh else {}
    if _current(kept) and kept.get("vaults", vaults) == vaults:
        return dataset, _asked(dataset, kept), kept["search_ms"], kept["features_ms"]
    print(f"{dataset.name}: {len(dataset.queries)} questions", file=sys.stderr)
    stores = open_indexes(dataset, args.data_dir, embedder, args.level, subset=bool(docs))
    config = make_config(dataset.vaults[0], args.data_dir, args.level)
    filters = {v.name: SearchFilter(paths=v.files) if docs else NO_FILTER for v in dataset.vaults}
    try:
        started = time.perf_counter()
        asked, search_ms, features_ms = ask_all(
            dataset,
            stores,
            embedder,
            config.query.fusion,
            filters,
            voiced_queries=config.context.voiced_passages(),
            today=dt.date.today(),
        )
        print(f"    {time.perf_counter() - started:.0f} s", file=sys.stderr)
    finally:
        for store in stores.values():
            store.close()
    cache.write_text(
        json.dumps(
            {
                "features": list(FEATURES),
                "features_version": FEATURES_VERSION,
                "embed_model": embedder.name,
                "vaults": vaults,
                "search_ms": search_ms,
                "features_ms": features_ms,
                "questions": [a.to_json() for a in asked],
            }
        )
    )
    return dataset, asked, search_ms, features_ms


def _current(kept: Mapping[str, Any]) -> bool:
    """Whether rows kept by an earlier run are of the features this kb makes: their names
    and the version of their meaning."""
    return bool(
        kept.get("features") == list(FEATURES) and kept.get("features_version") == FEATURES_VERSION
    )


def _kept_rows(data_dir: Path, dataset: Dataset, level: str, docs: int | None) -> Path:
    return data_dir / f"ranker-{dataset.name}-{level}-{docs or 'all'}.json"


def only_vaults(dataset: Dataset, names: Sequence[str] | None) -> Dataset:
    """The dataset with only the named vaults and their questions (all without names): the
    vaults an expensive level has indexed so far."""
    if not names:
        return dataset
    unknown = set(names) - {v.name for v in dataset.vaults}
    if unknown:
        raise SystemExit(f"{dataset.name} has no vault {', '.join(sorted(unknown))}")
    return Dataset(
        dataset.name,
        tuple(v for v in dataset.vaults if v.name in names),
        tuple(q for q in dataset.queries if q.vault in names),
    )


def _asked(dataset: Dataset, kept: Mapping[str, Any]) -> list[Asked]:
    by_qid = {q.qid: q for q in dataset.queries}
    return [
        Asked(
            by_qid[r["qid"]],
            [(file, start, end) for file, start, end in r["spans"]],
            r["labels"],
            np.asarray(r["features"], dtype=np.float64).reshape(-1, len(FEATURES)),
        )
        for r in kept["questions"]
    ]


@dataclass(frozen=True)
class Twins:
    """Where a training dataset's rows under another embedder or level were kept: a data
    directory of an earlier run of this script (`DIR`, or `DIR=LEVEL` for another level)."""

    data_dir: Path
    level: str

    @classmethod
    def parse(cls, value: str) -> Twins:
        folder, _, level = value.partition("=")
        return cls(Path(folder).expanduser(), with_paragraphs(level) if level else LEVEL)


def load_twins(folder: Path, where: Twins) -> tuple[list[Asked], str]:
    """A training dataset's rows kept by an earlier run of this script with another
    embedder or at another level, and what they are of (the embedder, and the level where
    it is not LEVEL); none where that run did not make this dataset's rows."""
    dataset = load_dataset(folder, Limit())
    cache = _kept_rows(where.data_dir, dataset, where.level, None)
    kept = json.loads(cache.read_text()) if cache.exists() else {}
    if not _current(kept):
        print(f"no rows of these features in {cache}: fitted without them", file=sys.stderr)
        return [], ""
    model = kept.get("embed_model", "")
    return _asked(dataset, kept), model if where.level == LEVEL else f"{model} at {where.level}"


def _per_dataset(values: Sequence[str]) -> dict[str, str]:
    """`DATASET=VALUE` options by dataset."""
    return dict(value.partition("=")[::2] for value in values)


def _figures(s: Scores) -> dict[str, float]:
    summary = s.summary()
    return {k: summary[k] for k in ("recall@1", "recall@3", "recall@5", "recall@10", "mrr@3")}


def _commit() -> str:
    found = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, nargs="+", required=True, help="datasets to fit on")
    parser.add_argument(
        "--evaluate", type=Path, nargs="*", default=[], help="datasets to score the models on"
    )
    parser.add_argument(
        "--cross-validate",
        nargs="*",
        default=["docs-rag", "personal-train"],
        help="datasets also scored by grouped cross-validation: an evaluated one fitted on "
        "the training datasets and its other folds, a training one on the others and its own "
        "other folds",
    )
    parser.add_argument(
        "--limit-docs",
        nargs="*",
        default=[],
        metavar="DATASET=N",
        help="index and ask only a dataset's N smallest notes per vault",
    )
    parser.add_argument(
        "--only-vaults",
        nargs="*",
        default=[],
        metavar="DATASET=V1,V2",
        help="make rows of only these vaults of a dataset (those a level has indexed so far)",
    )
    parser.add_argument(
        "--level",
        type=with_paragraphs,
        default="structure",  # argparse passes a string default through `type`
        help="the context level whose indexes give the rows (paragraph vectors on)",
    )
    parser.add_argument("--data-dir", type=Path, default=Path.home() / ".cache/kb/bench")
    parser.add_argument("--fresh", action="store_true", help="search again, not the kept rows")
    parser.add_argument("--rounds", type=int, default=LGB_ROUNDS, help="LightGBM's trees")
    parser.add_argument(
        "--save", type=Path, help="write the LightGBM model and its record as kb's ranker file"
    )
    parser.add_argument(
        "--also-fit-on",
        type=Twins.parse,
        nargs="*",
        default=[],
        metavar="DATA_DIR[=LEVEL]",
        help="also fit on the training datasets' rows kept in these data directories (their "
        "indexes made with other embedders, or at LEVEL): one model for every embedder and "
        "level",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    args.limit = {name: int(docs) for name, docs in _per_dataset(args.limit_docs).items()}
    args.vaults = {name: v.split(",") for name, v in _per_dataset(args.only_vaults).items()}

    env_config = make_config(Vault("", Path.cwd(), ()), args.data_dir, args.level)
    embedder = CachedEmbedder(make_embedder(env_config.llm))
    train: list[Asked] = []
    fitted_on = {}
    by_dataset: dict[str, list[Asked]] = {}
    twins: dict[str, list[Asked]] = {}
    also: set[str] = set()
    for folder in args.train:
        dataset, asked, _, _ = load_asked(folder, args, embedder)
        by_dataset[dataset.name] = asked
        twins[dataset.name] = []
        for other in args.also_fit_on:
            their_rows, model = load_twins(folder, other)
            twins[dataset.name] += their_rows
            if their_rows:
                also.add(model or str(other.data_dir))
        train += asked + twins[dataset.name]
        fitted_on[dataset.name] = _coverage(dataset, asked)
    rankers = [
        fit_lightgbm(train, args.rounds),
        fit_linear(train),
    ]
    report: dict[str, Any] = {
        "level": args.level,
        "embed_model": env_config.llm.embed_model,
        "kb_commit": _commit(),
        "features": list(FEATURES),
        "features_version": FEATURES_VERSION,
        "lightgbm": {"params": LGB_PARAMS, "rounds": args.rounds},
        "fitted_on": fitted_on,
        # The same questions' rows under other embedders or levels, fitted on beside these.
        "also_fitted_on": sorted(also),
        "datasets": {},
    }
    booster = rankers[0].model
    assert isinstance(booster, lgb.Booster)
    # A training set scored in folds (by vault, or by note): what the choices of fitting
    # (the trees, the features) are judged by, never personal-dev.
    folded = {
        name: in_folds(asked, name, by_dataset, twins, args.rounds)
        for name, asked in by_dataset.items()
        if name in args.cross_validate
    }
    for name, folds in folded.items():
        asked = by_dataset[name]
        rows = {"kb fusion": _figures(score(asked, None)), **folds}
        rows["best possible"] = _figures(best_possible(asked))
        report.setdefault("training", {})[name] = {**fitted_on[name], "figures": rows}
    for folder in args.evaluate:
        dataset, asked, search_ms, features_ms = load_asked(folder, args, embedder)
        rows = {"kb fusion": _figures(score(asked, None))}
        for ranker in rankers:
            rows[ranker.name] = _figures(score(asked, ranker))
        if dataset.name in folded:
            rows |= folded[dataset.name]
        elif dataset.name in args.cross_validate:
            rows |= in_folds(asked, dataset.name, by_dataset, twins, args.rounds)
        rows["best possible"] = _figures(best_possible(asked))
        kinds = {"kb fusion": score(asked, None)} | {r.name: score(asked, r) for r in rankers}
        timing = {"kb's trees": inference_ms(asked, booster)}
        report["datasets"][dataset.name] = {
            **_coverage(dataset, asked),
            "figures": rows,
            "recall@5_by_kind": _by_kind(asked, kinds),
            "ms_per_query": {
                **{
                    name: {"p50": statistics.median(t), "p95": percentile(t, 0.95)}
                    for name, t in timing.items()
                },
                "features": {
                    "p50": statistics.median(features_ms),
                    "p95": percentile(features_ms, 0.95),
                },
                "retrieval": {
                    "p50": statistics.median(search_ms),
                    "p95": percentile(search_ms, 0.95),
                },
            },
        }
    report["importance"] = importance(booster)
    _print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    if args.save:
        save(args.save, booster, report)
    return 0


def _by_kind(asked: Sequence[Asked], scored: Mapping[str, Scores]) -> dict[str, Any]:
    """recall@5 of each kind of question the dataset labels, and of those in the first
    person and the others, per ordering: where a ranker gains or loses."""
    kinds: dict[str, list[int]] = {}
    for i, a in enumerate(asked):
        if a.query.category:
            kinds.setdefault(a.query.category, []).append(i)
        kinds.setdefault("first person" if a.query.first_person else "other", []).append(i)
    return {
        kind: {"questions": len(picked)}
        | {name: s.summary(picked)["recall@5"] for name, s in scored.items()}
        for kind, picked in sorted(kinds.items())
    }


def _coverage(dataset: Dataset, asked: Sequence[Asked]) -> dict[str, Any]:
    return {
        "vaults": [v.name or dataset.name for v in dataset.vaults],
        "notes": sum(len(v.files) for v in dataset.vaults),
        "questions": len(asked),
        "candidates": sum(len(a.labels) for a in asked),
        "positives": sum(sum(a.labels) for a in asked),
    }


def lightgbm_trees(booster: lgb.Booster) -> list[list[Any]]:
    """A LightGBM model's trees in kb's ranker file format (kb.search.ranker): each tree's
    split nodes as [feature, threshold, left, right, mean output] (a child below zero is the
    leaf ~child) and its leaf values."""
    trees = []
    for info in booster.dump_model()["tree_info"]:
        nodes: list[list[float]] = []
        leaves: list[float] = []

        def add(node: Mapping[str, Any], nodes: list = nodes, leaves: list = leaves) -> int:
            if "leaf_value" in node:
                leaves.append(node["leaf_value"])
                return ~(len(leaves) - 1)
            # kb's rows hold no missing values, so "<=" is the whole decision.
            assert node["decision_type"] == "<=", node["decision_type"]
            at = len(nodes)
            nodes.append([])
            left, right = add(node["left_child"]), add(node["right_child"])
            nodes[at] = [
                node["split_feature"], node["threshold"], left, right, node["internal_value"]
            ]  # fmt: skip
            return at

        add(info["tree_structure"])
        trees.append([nodes, leaves])
    return trees


def export(booster: lgb.Booster, record: Mapping[str, Any]) -> dict[str, Any]:
    """The trees as kb's search ranker file."""
    return {
        "format": kb_ranker.FORMAT,
        "name": f"lightgbm-{record['level']}-{record['embed_model']}",
        "features": list(FEATURES),
        # Checked when kb loads the file: trees of another version are not used.
        "features_version": FEATURES_VERSION,
        "record": record,
        "trees": lightgbm_trees(booster),
    }


def save(path: Path, booster: lgb.Booster, report: Mapping[str, Any]) -> None:
    """The LightGBM model as kb's ranker file, with the record of what it was fitted on and
    what it measured."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(export(booster, report), separators=(",", ":")) + "\n")


def _print(report: Mapping[str, Any]) -> None:
    head = f"{'':<28}{'R@1':>7}{'R@3':>7}{'R@5':>7}{'R@10':>7}{'MRR@3':>7}"
    for name, d in [*report.get("training", {}).items(), *report["datasets"].items()]:
        print(f"\n== {name}: {d['questions']} questions, {d['notes']} notes")
        print(head)
        for row, f in d["figures"].items():
            print(
                f"{row:<28}{f['recall@1']:>7.3f}{f['recall@3']:>7.3f}{f['recall@5']:>7.3f}"
                f"{f['recall@10']:>7.3f}{f['mrr@3']:>7.3f}"
            )
        for kind, f in d.get("recall@5_by_kind", {}).items():
            cells = ", ".join(f"{k} {v:.3f}" for k, v in f.items() if k != "questions")
            print(f"recall@5 of {kind} ({f['questions']}): {cells}")
        for what, t in d.get("ms_per_query", {}).items():
            print(f"{what}: p50 {t['p50']:.2f} ms, p95 {t['p95']:.2f} ms per query")
    print("\n== LightGBM gain importance")
    for name, share in report["importance"]:
        if share >= 0.005:
            print(f"{name:<28}{share:>7.3f}")


if __name__ == "__main__":
    sys.exit(main())
