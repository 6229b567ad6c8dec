"""A learned ranker over kb's own signals: does it order the candidates kb already finds
better than kb's fusion does?

Every question is searched as kb searches (bench/retrieval.py: the owner's name for
full-text search on a first-person question, the question in the owner's voice for the
embedder where the level's passages speak in writers' voices), and every chunk of its two
candidate lists (CANDIDATES each) becomes a row of FEATURES: what each list said of it,
kb's fused score and place, its own and its paragraphs' similarity, its note's other
candidates, the owner and first-person rule, the time the question names against the
note's date, its words against the question's (found, by BM25 in each field, weighted by
their rarity in the vault), the question's names against the note's writer, and its words
against the other candidates'. Its label: the chunk hits a gold section (retrieval._hit).

Two models are fitted on personal-train only (personal-dev is never fitted or tuned on):
gradient-boosted trees with LightGBM's lambdarank objective, and a logistic regression over
the standardised features, for comparison. Each orders the candidates of every question of
the evaluated datasets; recall@k and MRR@3 are scored as bench/retrieval.py scores them,
against kb's own order of the same candidates. docs-rag is also scored by cross-validation
(its folds grouped by the note of each question's gold, each fold's model fitted on
personal-train and the other folds).

    .venv/bin/python bench/ranker.py --train ../shared/eval/personal-train \\
        --evaluate ../shared/eval/personal-dev ../shared/eval/docs-rag \\
        --save bench/models/ranker-structure-minilm
    .venv/bin/python bench/ranker.py ... --limit-docs docs-rag=25   # its 25 smallest notes

The indexes are bench/retrieval.py's (the same databases in --data-dir, indexed here if
they are not yet). Models come from the environment, as for bench/retrieval.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
from psycopg import sql
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from kb import db
from kb.container import open_store
from kb.fusion import Fusion
from kb.llm import make_chat, make_embedder
from kb.llm.base import Embedder
from kb.results import SearchHit
from kb.search.query import CANDIDATES, owner_query, rank
from kb.search.when import Period, question_period
from kb.store import NO_FILTER, Candidate, Candidates, SearchFilter, Store
from kb.store.pool import vector_param
from kb.voices import FIRST_PERSON, voiced
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
LEVEL = f"structure{PARAGRAPHS}"

# Where a chunk is missing from a list: one place past its end, and no score.
ABSENT = CANDIDATES + 1
# A passage kind the level does not write, or a chunk without such a passage.
NO_SIMILARITY = -1.0
PASSAGE_KINDS = ("paragraph", "statement", "question")

FEATURES: tuple[str, ...] = (
    # What each list said of it.
    "vector_rank",
    "vector_inverse_rank",
    "similarity",
    "similarity_gap",  # below the query's best similarity
    "text_rank",
    "text_inverse_rank",
    "text_score",
    "text_share",  # of the query's best BM25
    "in_both",
    # kb's order: the fused score under the level's fusion, and its place after the time
    # the question names (kb.search.query.rank).
    "fused_score",
    "fused_share",
    "fused_rank",
    # The chunk's own vector and its best passage of each kind.
    "own_similarity",
    *(f"{kind}_similarity" for kind in PASSAGE_KINDS),
    "passages",
    # The chunk in its note.
    "chars",
    "header_depth",
    "position",
    "relative_position",
    "note_chunks",
    # Its note among the candidates: how many, the best place, whether this is that one,
    # and its neighbours' fused score (the chunk before or after it, when a candidate).
    "note_candidates",
    "note_best_rank",
    "note_best",
    "note_rank",
    "neighbour_score",
    # The owner and the first person: kb's rule reads a first-person question as the owner's.
    "first_person",
    "personal",
    "first_person_personal",
    "owner_named",
    # A time the question names, against the note's own date.
    "dated",
    "note_dated",
    "in_period",
    "log_days_apart",
    # The question's words in the chunk, its names (capitalised words) and its title path.
    "word_overlap",
    "name_overlap",
    "names",
    "header_overlap",
    "query_words",
    # BM25 of the question's words in each field of the chunk (its note's file name and
    # title, its header path, its text), their document frequencies over the vault's chunks;
    # and the question's words found, weighted by their rarity (idf) in the vault.
    "bm25_title",
    "bm25_header",
    "bm25_body",
    "idf_coverage",  # share of the question's idf found in the chunk
    "idf_found",  # the idf found, summed
    # Names: the question's names in the header path and file name (the writer of a letter,
    # the person a note is about), how many in the chunk, and the owner as the writer.
    "name_header",
    "names_found",
    "owner_header",
    "first_person_owner_header",
    # Across the candidates: how rare the chunk's words are among the first TOP candidates,
    # the words no better-placed candidate has, and how spread its note's chunks are.
    "candidate_rarity",
    "novel_words",
    "shared_top",
    "note_spread",
    "top_notes",
)

_WORD = re.compile(r"[A-Za-z0-9']+")
# Words too common to tell chunks apart: a short list, as BM25's idf already weighs the rest.
_COMMON = frozenset(
    "the a an and or of to in on at for with from by about is are was were be been did do "
    "does what when where who whom which why how that this these those it its as has have "
    "had he she they them his her their you your we our any some ever".split()
)


@dataclass(frozen=True)
class ChunkFacts:
    """What the index knows of one candidate beyond the candidate row."""

    position: int
    note_chunks: int
    personal: bool
    own_similarity: float
    kinds: Mapping[str, float]  # best similarity of each passage kind it has
    passages: int


_FACTS = """
    SELECT c.id, c.position, d.personal,
           (SELECT count(*) FROM chunks o WHERE o.document_id = c.document_id) AS note_chunks,
           1 - (c.embedding::vector({dim}) <=> %(v)s::vector({dim})) AS own_similarity,
           (SELECT count(*) FROM passages p WHERE p.chunk_id = c.id) AS passages,
           (SELECT jsonb_object_agg(k.kind, k.similarity) FROM (
                SELECT p.kind, max(1 - (p.embedding::vector({dim}) <=> %(v)s::vector({dim})))
                       AS similarity
                  FROM passages p
                 WHERE p.chunk_id = c.id AND p.embed_model = %(model)s
                 GROUP BY p.kind) AS k) AS kinds
      FROM chunks c JOIN documents d ON d.id = c.document_id
     WHERE c.id = ANY(%(ids)s::bigint[])
"""


def chunk_facts(
    store: Store, ids: Sequence[int], vector: Sequence[float], model: str, dimensions: int
) -> dict[int, ChunkFacts]:
    """The facts of the candidates `ids`, in one round trip. The candidates query computes
    the same similarities but returns only their best: until the ranker is wired into kb,
    the benchmark asks again."""
    query = sql.SQL(_FACTS).format(dim=sql.Literal(dimensions))
    with store.pool.connection() as conn:
        rows = conn.execute(
            query, {"v": vector_param(vector), "model": model, "ids": list(ids)}, prepare=False
        ).fetchall()
    return {
        r["id"]: ChunkFacts(
            position=r["position"],
            note_chunks=r["note_chunks"],
            personal=r["personal"],
            own_similarity=r["own_similarity"],
            kinds=r["kinds"] or {},
            passages=r["passages"],
        )
        for r in rows
    }


@dataclass(frozen=True)
class VaultStats:
    """What BM25 and idf need of a vault: its chunks, each word's count of chunks that hold
    it (in any field) and each field's mean length in characters."""

    chunks: int
    frequency: Mapping[str, int]
    mean_title: float
    mean_header: float
    mean_body: float

    def idf(self, word: str) -> float:
        df = self.frequency.get(word, 0)
        return math.log(1 + (self.chunks - df + 0.5) / (df + 0.5))


NO_STATS = VaultStats(0, {}, 1.0, 1.0, 1.0)
# BM25's constants, as commonly set.
BM25_K1 = 1.2
BM25_B = 0.75
# The candidates the cross-candidate features compare a chunk with: kb's first TOP.
TOP = 10


def _title(path: str, header_path: Sequence[str]) -> str:
    """A chunk's title field: its note's file name and first header."""
    return " ".join([Path(path).stem, *header_path[:1]])


def vault_stats(store: Store) -> VaultStats:
    """The stats of the vault of `store`, read from its chunks."""
    with store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT d.path, c.header_path, c.content FROM chunks c "
            "JOIN documents d ON d.id = c.document_id"
        ).fetchall()
    frequency: dict[str, int] = {}
    title = header = body = 0
    for r in rows:
        path, headers, content = r["path"], r["header_path"] or [], r["content"]
        fields = (_title(path, headers), " ".join([*headers, path]), content)
        for word in set().union(*(_words(f) for f in fields)):
            frequency[word] = frequency.get(word, 0) + 1
        title, header, body = (
            title + len(fields[0]),
            header + len(fields[1]),
            body + len(fields[2]),
        )
    n = max(1, len(rows))
    return VaultStats(len(rows), frequency, title / n or 1.0, header / n or 1.0, body / n or 1.0)


def _counts(pattern: re.Pattern[str] | None, text: str) -> Counter[str]:
    """How often each of the words `pattern` finds occurs in `text`: one scan."""
    return Counter(pattern.findall(text.lower())) if pattern else Counter()


def _bm25(counts: Mapping[str, int], length: int, mean: float, idf: Mapping[str, float]) -> float:
    """BM25 of the words `idf` weighs, counted in a field of `length` characters (the
    vault's mean length of that field: `mean`)."""
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / mean)
    return sum(
        w * c * (BM25_K1 + 1) / (c + norm) for word, w in idf.items() if (c := counts.get(word, 0))
    )


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _matcher(words: set[str]) -> re.Pattern[str] | None:
    """A pattern that finds any of `words` (lower case) as a whole word of a lower-cased text,
    as _WORD splits it: one scan of a chunk, not a set of all its words (most of the rows'
    cost when they were made so)."""
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9'])(?:{alternatives})(?![A-Za-z0-9'])")


def _found(pattern: re.Pattern[str] | None, text: str) -> set[str]:
    return set(pattern.findall(text.lower())) if pattern else set()


def _names(question: str) -> set[str]:
    """The question's capitalised words past its first: names of people, places, things."""
    words = _WORD.findall(question)[1:]
    return {w.lower() for w in words if w[0].isupper() and w.lower() not in ("i", "i'm")}


def features(
    question: str,
    owner: str,
    found: Candidates,
    order: Sequence[SearchHit],
    facts: Mapping[int, ChunkFacts],
    period: Period | None,
    stats: VaultStats = NO_STATS,
) -> tuple[list[int], np.ndarray]:
    """Each candidate's row of FEATURES, in kb's order (`order`, as kb.search.query.rank
    returns it); the candidates' ids in that order. `stats` are the vault's, for BM25 and
    idf."""
    by_place = {(h.vault, h.path, h.start_line, h.end_line): h for h in order}
    place = {key: i for i, key in enumerate(by_place, 1)}
    rows = list(found.rows.values())
    ids = sorted(
        (r.id for r in rows),
        key=lambda i: place[_key(found.rows[i])],
    )
    best_similarity = max((r.similarity or 0.0) for r in rows) if rows else 0.0
    best_text = max((r.text_score or 0.0) for r in rows) if rows else 0.0
    fused = {i: by_place[_key(found.rows[i])].score for i in ids}
    best_fused = max(fused.values(), default=0.0) or 1.0
    notes: dict[tuple[str, str], list[int]] = {}
    for i in ids:
        notes.setdefault((found.rows[i].vault, found.rows[i].path), []).append(i)
    note_order = {note: n for n, note in enumerate(notes, 1)}  # by their best chunk
    place_of = {i: n for n, i in enumerate(ids, 1)}
    positions = {
        (found.rows[i].vault, found.rows[i].path, facts[i].position): i for i in ids if i in facts
    }
    asked = _words(question) - _COMMON - {"i", "me", "my", "mine", "myself"}
    names = _names(question)
    first_person = bool(FIRST_PERSON.search(question))
    owner_words = _words(owner)
    matcher = _matcher(asked | names | owner_words)
    middle = period.first + (period.last - period.first) / 2 if period else None
    idf = {w: stats.idf(w) for w in asked}
    total_idf = sum(idf.values())
    counted = {i: _counts(matcher, found.rows[i].content) for i in ids}
    found_words = {i: set(counted[i]) for i in ids}
    top = ids[:TOP]
    # How many of the first TOP candidates hold each word; each chunk's words that none
    # placed before it holds.
    in_top: dict[str, int] = {}
    for i in top:
        for w in found_words[i] & (asked | names):
            in_top[w] = in_top.get(w, 0) + 1
    seen: set[str] = set()
    novel: dict[int, int] = {}
    for i in ids:
        mine = found_words[i] & (asked | names)
        novel[i] = len(mine - seen)
        if place_of[i] <= TOP:
            seen |= mine
    top_notes = len({(found.rows[i].vault, found.rows[i].path) for i in top})

    matrix = []
    for rank_, i in enumerate(ids, 1):
        row = found.rows[i]
        fact = facts.get(i)
        note = (row.vault, row.path)
        siblings = notes[note]
        words = found_words[i]
        header_text = " ".join([*row.header_path, row.path])
        header_counts = _counts(matcher, header_text)
        header = set(header_counts)
        title = _title(row.path, row.header_path)
        mine = words & (asked | names)
        shared = [in_top.get(w, 0) - (1 if i in top else 0) for w in mine]
        owner_header = bool(owner_words & header)
        neighbours = (
            [positions.get((row.vault, row.path, fact.position + d)) for d in (-1, 1)]
            if fact
            else []
        )
        note_day = row.own_date
        matrix.append(
            [
                row.vector_rank or ABSENT,
                1 / row.vector_rank if row.vector_rank else 0.0,
                row.similarity or 0.0,
                best_similarity - (row.similarity or 0.0),
                row.text_rank or ABSENT,
                1 / row.text_rank if row.text_rank else 0.0,
                row.text_score or 0.0,
                (row.text_score or 0.0) / best_text if best_text else 0.0,
                float(bool(row.vector_rank and row.text_rank)),
                fused[i],
                fused[i] / best_fused,
                rank_,
                fact.own_similarity if fact else NO_SIMILARITY,
                *(
                    fact.kinds.get(k, NO_SIMILARITY) if fact else NO_SIMILARITY
                    for k in PASSAGE_KINDS
                ),
                fact.passages if fact else 0,
                math.log1p(len(row.content)),
                len(row.header_path),
                fact.position if fact else 0,
                fact.position / max(1, fact.note_chunks - 1) if fact else 0.0,
                fact.note_chunks if fact else 1,
                len(siblings),
                place_of[siblings[0]],
                float(siblings[0] == i),
                note_order[note],
                max((fused[n] for n in neighbours if n is not None), default=0.0),
                float(first_person),
                float(bool(fact and fact.personal)),
                float(first_person and bool(fact and fact.personal)),
                float(bool(owner_words & words)),
                float(period is not None),
                float(note_day is not None),
                float(period is not None and period.holds(note_day)),
                math.log1p(abs((note_day - middle).days))
                if middle is not None and note_day is not None
                else -1.0,
                len(asked & words) / len(asked) if asked else 0.0,
                len(names & words) / len(names) if names else 0.0,
                len(names),
                len(asked & header) / len(asked) if asked else 0.0,
                len(asked),
                _bm25(_counts(matcher, title), len(title), stats.mean_title, idf),
                _bm25(header_counts, len(header_text), stats.mean_header, idf),
                _bm25(counted[i], len(row.content), stats.mean_body, idf),
                sum(idf[w] for w in asked & words) / total_idf if total_idf else 0.0,
                sum(idf[w] for w in asked & words),
                len(names & header) / len(names) if names else 0.0,
                len(names & words),
                float(owner_header),
                float(first_person and owner_header),
                sum(math.log((TOP + 1) / (1 + in_top.get(w, 0))) for w in mine),
                novel[i] / len(asked | names) if asked | names else 0.0,
                sum(shared) / len(shared) if shared else 0.0,
                place_of[siblings[-1]] - place_of[siblings[0]],
                top_notes,
            ]
        )
    return ids, np.asarray(matrix, dtype=np.float64).reshape(len(ids), len(FEATURES))


def _key(row: Candidate) -> tuple[str, str, int, int]:
    return row.vault, row.path, row.start_line, row.end_line


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
    """Every question searched as kb searches it, its candidates as feature rows; and the
    milliseconds per question of the extra facts' query and of the feature rows."""
    owners = {v.name: v.owner for v in dataset.vaults}
    spans = {v.name: Spans(v.path, v.prefix) for v in dataset.vaults}
    asked: list[Asked] = []
    facts_ms: list[float] = []
    features_ms: list[float] = []
    stats = {name: vault_stats(store) for name, store in stores.items()}
    for n, q in enumerate(dataset.queries, 1):
        store, owner = stores[q.vault], owners[q.vault]
        space = store.vectors.space()
        assert space is not None, "an indexed vault has an embedding space"
        vector = embedder.embed_query(voiced(q.text, owner) if voiced_queries else q.text)
        found = store.search.candidates(
            vector,
            owner_query(q.text, owner),
            model=space[0],
            dimensions=space[1],
            depth=CANDIDATES,
            filters=filters[q.vault],
        )
        period = question_period(q.text, today)
        order = rank(found, "hybrid", fusion, period)
        started = time.perf_counter()
        facts = chunk_facts(store, list(found.rows), vector, *space)
        facts_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        ids, matrix = features(q.text, owner, found, order, facts, period, stats[q.vault])
        features_ms.append((time.perf_counter() - started) * 1000)
        chunk_spans = [spans[q.vault](_as_hit(found.rows[i])) for i in ids]
        labels = [int(any(_hit(s, g) for g in q.gold)) for s in chunk_spans]
        asked.append(Asked(q, chunk_spans, labels, matrix))
        if n % 100 == 0:
            print(f"    {n} questions", file=sys.stderr, flush=True)
    return asked, facts_ms, features_ms


def _as_hit(row: Candidate) -> SearchHit:
    """A candidate as Spans reads a hit: its note and lines."""
    return SearchHit(
        row.vault, row.path, row.header_path, row.content, 0.0, row.similarity,
        row.start_line, row.end_line,
    )  # fmt: skip


def open_indexes(
    dataset: Dataset, data_dir: Path, embedder: Embedder, *, subset: bool
) -> dict[str, Store]:
    """Each vault's index at LEVEL in bench/retrieval.py's database, indexed (or brought up
    to date) first; with `subset`, only the vault's files of the dataset."""
    server = db.embedded_url(data_dir)
    chat = make_chat(make_config(dataset.vaults[0], data_dir, LEVEL).llm)
    stores = {}
    for vault in dataset.vaults:
        name = _database(dataset.name, vault.name, LEVEL)
        store = stores[vault.name] = open_store(db.database_on(server, name))
        # Its cost is counted in bench/retrieval.py's ledger of the same database.
        config = make_config(vault, data_dir, LEVEL)
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
    asked: Sequence[Asked], extra: Sequence[Asked], fit: Callable[[Sequence[Asked]], Ranker]
) -> Scores:
    """`asked` scored in folds grouped by the note of each question's gold, each fold by a
    model fitted on `extra` and the other folds."""
    folds = min(5, len({a.group for a in asked}))
    ordered: dict[str, list[tuple[str, int, int]]] = {}
    for train, test in GroupKFold(folds).split(
        np.zeros(len(asked)), groups=[a.group for a in asked]
    ):
        ranker = fit([*extra, *(asked[i] for i in train)])
        for i in test:
            ordered[asked[i].query.qid] = [asked[i].spans[j] for j in order_by(ranker, asked[i])]
    scores = Scores()
    for a in asked:
        scores.add(a.query, ordered[a.query.qid], 0.0)
    return scores


def inference_ms(asked: Sequence[Asked], ranker: Ranker) -> list[float]:
    """Milliseconds to order each question's candidates from their feature rows: the
    ranker's scoring and the sort (the rows' own cost is measured as they are made)."""
    times = []
    for a in asked:
        started = time.perf_counter()
        order_by(ranker, a)
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
    and the milliseconds per question of the extra facts' query and of the feature rows."""
    docs = args.limit.get(folder.resolve().name)
    dataset = load_dataset(folder, Limit(docs, smallest=bool(docs)))
    cache = args.data_dir / f"ranker-{dataset.name}-{LEVEL}-{docs or 'all'}.json"
    kept = json.loads(cache.read_text()) if cache.exists() and not args.fresh else {}
    if kept.get("features") == list(FEATURES):
        by_qid = {q.qid: q for q in dataset.queries}
        asked = [
            Asked(
                by_qid[r["qid"]],
                [(file, start, end) for file, start, end in r["spans"]],
                r["labels"],
                np.asarray(r["features"], dtype=np.float64).reshape(-1, len(FEATURES)),
            )
            for r in kept["questions"]
        ]
        return dataset, asked, kept["facts_ms"], kept["features_ms"]
    print(f"{dataset.name}: {len(dataset.queries)} questions", file=sys.stderr)
    stores = open_indexes(dataset, args.data_dir, embedder, subset=bool(docs))
    config = make_config(dataset.vaults[0], args.data_dir, LEVEL)
    filters = {v.name: SearchFilter(paths=v.files) if docs else NO_FILTER for v in dataset.vaults}
    try:
        started = time.perf_counter()
        asked, facts_ms, features_ms = ask_all(
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
                "facts_ms": facts_ms,
                "features_ms": features_ms,
                "questions": [a.to_json() for a in asked],
            }
        )
    )
    return dataset, asked, facts_ms, features_ms


def _limits(values: Sequence[str]) -> dict[str, int]:
    limits = {}
    for value in values:
        name, _, docs = value.partition("=")
        limits[name] = int(docs)
    return limits


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
        dest="limit_docs",
        nargs="*",
        default=[],
        metavar="DATASET=N",
        help="index and ask only a dataset's N smallest notes per vault",
    )
    parser.add_argument("--data-dir", type=Path, default=Path.home() / ".cache/kb/bench")
    parser.add_argument("--fresh", action="store_true", help="search again, not the kept rows")
    parser.add_argument("--rounds", type=int, default=LGB_ROUNDS, help="LightGBM's trees")
    parser.add_argument("--save", type=Path, help="write the models and their record here")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    args.limit = _limits(args.limit_docs)

    env_config = make_config(Vault("", Path.cwd(), ()), args.data_dir, LEVEL)
    embedder = CachedEmbedder(make_embedder(env_config.llm))
    train: list[Asked] = []
    fitted_on = {}
    by_dataset: dict[str, list[Asked]] = {}
    for folder in args.train:
        dataset, asked, _, _ = load_asked(folder, args, embedder)
        train += asked
        by_dataset[dataset.name] = asked
        fitted_on[dataset.name] = _coverage(dataset, asked)
    rankers = [
        fit_lightgbm(train, args.rounds),
        fit_linear(train),
    ]
    report: dict[str, Any] = {
        "level": LEVEL,
        "embed_model": env_config.llm.embed_model,
        "kb_commit": _commit(),
        "features": list(FEATURES),
        "lightgbm": {"params": LGB_PARAMS, "rounds": args.rounds},
        "fitted_on": fitted_on,
        "datasets": {},
    }
    booster = rankers[0].model
    assert isinstance(booster, lgb.Booster)
    for name, asked in by_dataset.items():
        if name not in args.cross_validate:
            continue
        # A training set scored in folds (by vault, or by note): what the choices of fitting
        # (the trees, the features) are judged by, never personal-dev.
        others = [a for other, rows in by_dataset.items() if other != name for a in rows]
        rows = {"kb fusion": _figures(score(asked, None))}
        rows["lightgbm, cross-validated"] = _figures(
            cross_validated(asked, others, lambda a: fit_lightgbm(a, args.rounds))
        )
        rows["linear, cross-validated"] = _figures(cross_validated(asked, others, fit_linear))
        rows["best possible"] = _figures(best_possible(asked))
        report.setdefault("training", {})[name] = {**fitted_on[name], "figures": rows}
    for folder in args.evaluate:
        dataset, asked, facts_ms, features_ms = load_asked(folder, args, embedder)
        rows = {"kb fusion": _figures(score(asked, None))}
        for ranker in rankers:
            rows[ranker.name] = _figures(score(asked, ranker))
        if dataset.name in args.cross_validate:
            rows["lightgbm, cross-validated"] = _figures(
                cross_validated(asked, train, lambda a: fit_lightgbm(a, args.rounds))
            )
            rows["linear, cross-validated"] = _figures(cross_validated(asked, train, fit_linear))
        rows["best possible"] = _figures(best_possible(asked))
        kinds = {"kb fusion": score(asked, None)} | {r.name: score(asked, r) for r in rankers}
        timing = {ranker.name: inference_ms(asked, ranker) for ranker in rankers}
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
                "facts query": {
                    "p50": statistics.median(facts_ms),
                    "p95": percentile(facts_ms, 0.95),
                },
            },
        }
    report["importance"] = importance(booster)
    _print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    if args.save:
        save(args.save, rankers, report)
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


def save(prefix: Path, rankers: Sequence[Ranker], report: Mapping[str, Any]) -> None:
    """The LightGBM model as its text file, the linear one as its coefficients, and the
    record of what they were fitted on and what they measured, beside them."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for ranker in rankers:
        if isinstance(ranker.model, lgb.Booster):
            ranker.model.save_model(f"{prefix}.lightgbm.txt")
        else:
            scaler, logistic = ranker.model[0], ranker.model[-1]
            Path(f"{prefix}.linear.json").write_text(
                json.dumps(
                    {
                        "features": list(FEATURES),
                        "mean": scaler.mean_.tolist(),
                        "scale": scaler.scale_.tolist(),
                        "weights": logistic.coef_[0].tolist(),
                        "intercept": float(logistic.intercept_[0]),
                    },
                    indent=1,
                )
            )
    Path(f"{prefix}.json").write_text(json.dumps(report, indent=2) + "\n")


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
