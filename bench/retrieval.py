"""Retrieval quality of kb on labelled datasets: recall@k, MRR and cost, per configuration.

A dataset folder is in one of two layouts:

    docs-rag:      corpus_md/<file>.md, documents.jsonl ({"file"} per note, the order of
                   --limit-docs), queries.jsonl ({"qid", "query", "gold": [{"file", "start",
                   "end"}]}, files relative to corpus_md); an optional dataset.json
                   ({"owner": ..., "personal": [globs]}) makes it someone's vault.
    personal-dev:  one vault folder per person, queries.jsonl whose questions name their
                   "vault" and "owner" (and "form": first-person or third-person); gold files
                   are relative to the dataset folder. The owner's folder is personal.

A returned chunk is a hit on a gold section when both are in the same file and their
character spans overlap by at least half of the shorter one. recall@k is the share of a
query's gold sections hit by the top k chunks; MRR@k is 1/rank of the first hit.

Each vault is indexed by kb itself, once per context level, each into its own database on
the embedded server in --data-dir: `none` (the chunk alone), `structure` (title, folder and
header path, no LLM) and `llm` (the model's summaries and first-person rewrite); a level
with `+paragraphs` (`structure+paragraphs`) also gives every chunk its paragraphs in their
writer's voice as vectors of their own (`context.passages`, see kb.context.passage_texts);
its database starts as a copy of its base level's, when that is indexed in the same run, so
only the passages are embedded (its cost is what passages add). Databases
are kept, so a second run (or one that was interrupted) pays only for what is missing: kb's
own content-hash caches. A quick run (--limit-docs) indexes its documents into the same
databases, searches only them and asks only the questions they answer; its work counts
toward the full run.

Every question is searched once per level (as kb does: with the owner's name for full-text
search on first-person questions; and once more without it); the vector and text candidate lists
are then ranked by each mode and by every fusion method, so the whole matrix costs one
search per question and level.

Models come from the environment, as for kb (KB_PROVIDER, KB_CHAT_HOST, KB_EMBED_HOST,
KB_CHAT_MODEL, KB_EMBED_MODEL, KB_LLM_CONCURRENCY); `eval "$(scripts/test-models start)"`
sets them for the local llama.cpp stack.

    .venv/bin/python bench/retrieval.py                                  # every dataset
    .venv/bin/python bench/retrieval.py ../shared/eval/docs-rag --limit-docs 8   # quick
    .venv/bin/python bench/retrieval.py ../shared/eval/docs-rag --so-far  # part of a full run
    .venv/bin/python bench/retrieval.py examples/eval --config examples/kb.toml  # an index as is
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kb import db
from kb.config import Config, SearchMode, load_config, parse_config
from kb.container import Container, open_store
from kb.context.needs import ContextBuild
from kb.fusion import FUSION_METHODS, Fusion
from kb.llm import make_chat, make_embedder
from kb.models.base import ChatModel, Embedder
from kb.note_writing.events import FileEvent
from kb.search import ranker
from kb.search.features import SCHEMA
from kb.search.hybrid import Judge, Retrieved, owner_query, rank, retrieve, run
from kb.search.plan import SearchPlan
from kb.search.rerank import Reranker
from kb.store import NO_FILTER, SearchFilter, SearchHit, Store, databases
from kb.vault import sync_plan
from kb.vault.notes import Scope
from reference import FACTS_FILE, FactFinder, ReferenceWriter, load_facts

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASETS = (
    ROOT.parent / "shared/eval/docs-rag",
    ROOT.parent / "shared/eval/personal-dev",
    ROOT / "examples/eval",
)
KS = (1, 3, 5, 10, 20)
LEVELS = ("none", "structure", "llm")
# The "llm" level with the model writing only each note's voice (context.writes), no summary:
# with "+paragraphs", the passages of notes outside the owner's folders speak in it.
VOICES = "voices"
# The "llm" level with the model writing each note's voice and each chunk's statements; the
# questions each chunk answers instead; or both.
STATEMENTS = "statements"
QUESTIONS = "questions"
BOTH = "both"
# The statements level with the dataset's reference facts as the statements (bench.reference):
# what kb's design finds with a good statement writer.
REFERENCE = "reference"
# What the model writes at each level named for it (context.writes). A level whose writes
# hold another's starts as a copy of its index (see _templates).
MODEL_LEVELS = {
    VOICES: ["voices"],
    STATEMENTS: ["voices", "statements"],
    QUESTIONS: ["voices", "questions"],
    BOTH: ["voices", "statements", "questions"],
    REFERENCE: ["voices", "statements"],
}
# A level's suffix for `context.passages = "paragraphs"`.
PARAGRAPHS = "+paragraphs"
# The fusions compared: every method of kb.fusion at equal weight and leaning toward the
# text list (a small embedder's list is the weaker one on conversational notes).
WEIGHTS = (0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1)


def fusion_label(fusion: Fusion) -> str:
    """A fusion's row name: the method, and the vector weight where it is not equal."""
    if fusion.vector_weight == 0.5:
        return fusion.method
    return f"{fusion.method} w{f'{fusion.vector_weight:g}'.removeprefix('0')}"


FUSIONS: dict[str, Fusion] = {
    fusion_label(f): f for f in (Fusion(m, w) for m in FUSION_METHODS for w in WEIGHTS)
}


@dataclass(frozen=True)
class Gold:
    file: str
    start: int
    end: int


@dataclass(frozen=True)
class Query:
    qid: str
    text: str
    gold: tuple[Gold, ...]
    vault: str = ""  # which of the dataset's vaults it is asked of
    first_person: bool = False
    category: str = ""  # the kind of question, where a dataset labels it (personal-dev)


@dataclass(frozen=True)
class Vault:
    """One vault of a dataset: its notes, its owner and personal folders."""

    name: str  # "" for a dataset of one unnamed corpus
    path: Path
    files: tuple[str, ...]
    owner: str = "Alex Doe"
    personal: tuple[str, ...] = ()

    @property
    def prefix(self) -> str:
        """How gold file names start for this vault's notes."""
        return f"{self.name}/" if self.name else ""


@dataclass(frozen=True)
class Dataset:
    name: str
    vaults: tuple[Vault, ...]
    queries: tuple[Query, ...]


@dataclass
class Scores:
    recall: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    rr: dict[int, list[float]] = field(default_factory=lambda: {3: [], 10: []})
    chars: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, query: Query, spans: Sequence[tuple[str, int, int]], seconds: float) -> None:
        for k in KS:
            found = sum(any(_hit(s, g) for s in spans[:k]) for g in query.gold)
            self.recall[k].append(found / len(query.gold))
        first = next(
            (i for i, s in enumerate(spans, 1) if any(_hit(s, g) for g in query.gold)), None
        )
        for k in self.rr:
            self.rr[k].append(1 / first if first and first <= k else 0.0)
        self.chars.extend(end - start for _, start, end in spans[:5])
        self.seconds.append(seconds)

    def summary(self, picked: Sequence[int] | None = None) -> dict[str, float]:
        def mean(values: list[float]) -> float:
            chosen = values if picked is None else [values[i] for i in picked]
            return statistics.mean(chosen) if chosen else 0.0

        out = {f"recall@{k}": mean(v) for k, v in self.recall.items()}
        out |= {f"mrr@{k}": mean(v) for k, v in self.rr.items()}
        out["chars_per_chunk@5"] = statistics.mean(self.chars) if self.chars else 0.0
        out["seconds_per_query"] = statistics.mean(self.seconds) if self.seconds else 0.0
        return out


def _hit(span: tuple[str, int, int], gold: Gold) -> bool:
    file, start, end = span
    if file != gold.file:
        return False
    overlap = min(end, gold.end) - max(start, gold.start)
    return overlap > 0 and overlap >= 0.5 * min(end - start, gold.end - gold.start)


class Spans:
    """Line spans of returned chunks → character spans in their files, named as gold is."""

    def __init__(self, corpus: Path, prefix: str = "") -> None:
        self.corpus = corpus
        self.prefix = prefix
        self._starts: dict[str, list[int]] = {}

    def __call__(self, hit: SearchHit) -> tuple[str, int, int]:
        starts = self._line_starts(hit.path)
        start = starts[min(hit.start_line - 1, len(starts) - 1)]
        end = starts[hit.end_line] - 1 if hit.end_line < len(starts) else starts[-1]
        return self.prefix + hit.path, start, max(end, start + 1)

    def _line_starts(self, path: str) -> list[int]:
        if path not in self._starts:
            text = (self.corpus / path).read_text(encoding="utf-8")
            starts = [0]
            starts += [i + 1 for i, ch in enumerate(text) if ch == "\n"]
            starts.append(len(text) + 1)  # past the end, so a last line has an end
            self._starts[path] = starts
        return self._starts[path]


class CachedEmbedder:
    """Every level asks for the same query vectors: embed each query once."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self._queries: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> list[float]:
        if text not in self._queries:
            self._queries[text] = self.inner.embed_query(text)
        return self._queries[text]


@dataclass(frozen=True)
class Limit:
    """Which notes of each vault a quick run indexes: the first `docs` of the dataset's
    order, or the `docs` smallest (more questions answered for the same model time)."""

    docs: int | None = None
    smallest: bool = False

    def pick(self, root: Path, files: Sequence[str]) -> tuple[str, ...]:
        if not self.docs:
            return tuple(files)
        order = sorted(files, key=lambda f: (root / f).stat().st_size) if self.smallest else files
        return tuple(order[: self.docs])


def load_dataset(folder: Path, limit: Limit = Limit()) -> Dataset:
    rows = [json.loads(line) for line in _lines(folder / "queries.jsonl")]
    if (folder / "corpus_md").is_dir():
        vaults = [_corpus_vault(folder, limit)]
    else:
        vaults = _person_vaults(folder, rows, limit)
    by_name = {v.name: v for v in vaults}
    queries = []
    for q in rows:
        vault = by_name[q.get("vault", "")]
        form = q.get("form")
        first_person = (
            form == "first-person" if form else owner_query(q["query"], vault.owner) != q["query"]
        )
        gold = tuple(Gold(g["file"], g["start"], g["end"]) for g in q["gold"])
        queries.append(
            Query(q["qid"], q["query"], gold, vault.name, first_person, q.get("category", ""))
        )
    return Dataset(folder.resolve().name, tuple(vaults), tuple(answerable(queries, vaults)))


def _corpus_vault(folder: Path, limit: Limit) -> Vault:
    files = [json.loads(line)["file"] for line in _lines(folder / "documents.jsonl")]
    spec = folder / "dataset.json"
    about = json.loads(spec.read_text()) if spec.exists() else {}
    return Vault(
        name="",
        path=folder / "corpus_md",
        files=limit.pick(folder / "corpus_md", files),
        owner=about.get("owner", Vault.owner),
        personal=tuple(about.get("personal", ())),
    )


def _person_vaults(folder: Path, rows: Sequence[dict], limit: Limit) -> list[Vault]:
    owners = {q["vault"]: q["owner"] for q in rows}
    vaults = []
    for name, owner in sorted(owners.items()):
        files = sorted(
            p.relative_to(folder / name).as_posix() for p in (folder / name).rglob("*.md")
        )
        vaults.append(
            Vault(
                name=name,
                path=folder / name,
                files=limit.pick(folder / name, files),
                owner=owner,
                personal=(f"{owner}/**",),
            )
        )
    return vaults


def answerable(queries: Iterable[Query], vaults: Sequence[Vault]) -> list[Query]:
    """The questions whose gold sections are all among the vaults' files."""
    wanted = {v.prefix + f for v in vaults for f in v.files}
    return [q for q in queries if all(g.file in wanted for g in q.gold)]


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def built_so_far(config: Config, store: Store) -> set[str]:
    """The notes of the config's vault whose context is built as the config asks, none of
    them waiting for enrichment: a level's index may hold notes copied from a smaller
    level's (see _templates) that it has not rebuilt yet."""
    vault = config.vaults[0]
    build = ContextBuild.of(config)
    rules = sync_plan.Rules(build=build.id(False), personal_build=build.id(True), dates=vault.dates)
    queued = store.queue.paths(vault.name)
    return {
        path
        for path, stored in store.documents.states(vault.name).items()
        if not rules.stale(stored) and path not in queued
    }


def make_config(vault: Vault, data_dir: Path, level: str) -> Config:
    base = level.removesuffix(PARAGRAPHS)
    raw = {
        "owner_name": vault.owner,
        "data_dir": str(data_dir),
        "vaults": [
            {
                "name": vault.name or "corpus",
                "path": str(vault.path),
                "personal": list(vault.personal),
            }
        ],
        "context": {
            "summaries": "llm" if base in MODEL_LEVELS else base,
            "writes": MODEL_LEVELS.get(base, ["summaries"]),
            "passages": "paragraphs" if level.endswith(PARAGRAPHS) else "none",
        },
        # The LLM context written while indexing, so each note's cost is counted as it is
        # indexed (and a run cut short resumes from what it wrote).
        "enrich": {"enabled": False},
    }
    return parse_config(raw, base_dir=Path.cwd(), env=dict(os.environ))


@dataclass
class Cost:
    files: int = 0
    chunks: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    embedded: int = 0
    seconds: float = 0.0

    def plus(self, other: Cost) -> Cost:
        return Cost(**{k: getattr(self, k) + getattr(other, k) for k in vars(self)})


def index(
    config: Config,
    store: Store,
    chat: ChatModel,
    embedder: Embedder,
    subset: Sequence[str],
    ledger: Path,
) -> tuple[Cost, Cost]:
    """Index the vault, or only `subset` of it (the rest of the index is left alone, so a
    quick run's work counts toward the full one); returns this run's cost and the cost paid
    in all runs so far, which `ledger` keeps up to date after every note."""
    paid = Cost(**json.loads(ledger.read_text())) if ledger.exists() else Cost()
    run = Cost()
    before = (chat.usage.calls, chat.usage.prompt_tokens, chat.usage.output_tokens)
    started = time.perf_counter()

    def progress(event: FileEvent) -> None:
        if event.action not in ("indexed", "failed"):
            return
        line = f"    {event.action} {event.path}: {event.chunks} chunks, {event.llm_calls} LLM"
        print(line + (f" ({event.error})" if event.error else ""), file=sys.stderr, flush=True)
        if event.action == "indexed":
            run.files += 1
            run.chunks += event.chunks
            run.embedded += event.embedded
            run.llm_calls = chat.usage.calls - before[0]
            run.prompt_tokens = chat.usage.prompt_tokens - before[1]
            run.output_tokens = chat.usage.output_tokens - before[2]
            run.seconds = time.perf_counter() - started
            # Written as it goes: a run that is killed still counts what it paid for.
            ledger.write_text(json.dumps(vars(paid.plus(run))))

    parts = Container(config, store, chat=chat, embedder=embedder)
    with parts.indexer(on_event=progress) as indexer:
        if subset:
            indexer.space.ensure()
            indexer.sync_scope(config.vaults[0], Scope(files=frozenset(subset)))
        else:
            indexer.sync()
    # The vectors too: every question is asked of the whole index.
    parts.worker(until_empty=True, fail_fast=True, speeds=("embed",)).run()
    return run, paid.plus(run)


@dataclass(frozen=True)
class Row:
    """One way of ordering a level's candidates: a mode, its fusion, and whether the learned
    ranker orders the fused candidates (kb's default search)."""

    name: str
    mode: SearchMode
    fusion: Fusion
    learned: bool = False


def configurations(level: str, default: Fusion) -> list[Row]:
    """Every row a level's index is scored in: each single list, every fusion compared with
    the level's `default` among them, and the learned ranker over the default fusion."""
    rows = [Row(f"{level} vector", "vector", default), Row(f"{level} text", "text", default)]
    fusions = {**FUSIONS, fusion_label(default): default}
    rows += [Row(f"{level} hybrid {label}", "hybrid", f) for label, f in fusions.items()]
    return [*rows, Row(f"{level} learned ranker", "hybrid", default, learned=True)]


@dataclass
class Matrix:
    """Scores per row name, with the owner's name on first-person questions (as kb does)
    and without it."""

    owner: dict[str, Scores] = field(default_factory=dict)
    plain: dict[str, Scores] = field(default_factory=dict)


def score_level(
    level: str,
    stores: dict[str, Store],
    embedder: Embedder,
    dataset: Dataset,
    spans: Mapping[str, Callable[[SearchHit], tuple[str, int, int]]],
    filters: dict[str, SearchFilter],
    matrix: Matrix,
    *,
    fusion: Fusion,
    learned: ranker.Ranker,
    voiced_queries: bool = False,
    dated_queries: bool = True,
) -> None:
    """Search every question once (twice if in the first person) and score every row;
    `fusion` is the level's own (kb's default for its index), `learned` kb's ranker."""
    rows = configurations(level, fusion)
    for table in (matrix.owner, matrix.plain):
        for row in rows:
            table.setdefault(row.name, Scores())
    owners = {v.name: v.owner for v in dataset.vaults}
    for q in dataset.queries:
        store = stores[q.vault]
        # As kb searches: full-text search reads a first-person question with the owner's
        # name; the embedder reads it as asked, or in the owner's voice where the level's
        # passages speak in writers' voices (`voiced_queries`, see kb.search.hybrid.retrieve).
        plain = SearchPlan(
            q.text,
            top_k=max(KS),
            fusion=fusion,
            filters=filters[q.vault],
            voiced_index=voiced_queries,
        )
        plans = {"plain": plain, "owner": replace(plain, owner=owners[q.vault])}
        found_by: dict[str, tuple[Retrieved, float]] = {}
        for variant, plan in plans.items():
            # A question the owner's name leaves as it is was found once, without it.
            if variant == "owner" and owner_query(q.text, owners[q.vault]) == q.text:
                found_by["owner"] = found_by["plain"]
                continue
            started = time.perf_counter()
            got = retrieve(
                embedder,
                plan,
                candidates=store.candidates,
                vectors=store.vectors,
                queue=store.queue,
            )
            found_by[variant] = got, time.perf_counter() - started
        for variant, table in (("owner", matrix.owner), ("plain", matrix.plain)):
            got, seconds = found_by[variant]
            period = got.period if dated_queries else None
            judge = Judge(learned, q.text, plans[variant].owner)
            for row in rows:
                hits = rank(
                    got.found, row.mode, row.fusion, period, judge=judge if row.learned else None
                )[: max(KS)]
                table[row.name].add(q, [spans[q.vault](h) for h in hits], seconds)


def rerank_row(
    stores: dict[str, Store],
    embedder: Embedder,
    reranker: Reranker,
    dataset: Dataset,
    spans: Mapping[str, Callable[[SearchHit], tuple[str, int, int]]],
    filters: dict[str, SearchFilter],
    fusion: Fusion,
    learned: ranker.Ranker,
) -> Scores:
    """The chat model's judgement of kb's default order (the learned ranker's)."""
    scores = Scores()
    owners = {v.name: v.owner for v in dataset.vaults}
    for q in dataset.queries:
        started = time.perf_counter()
        judged = SearchPlan(
            q.text,
            owner=owners[q.vault],
            top_k=max(KS),
            reranker=reranker,
            learned=learned,
            fusion=fusion,
            filters=filters[q.vault],
        )
        store = stores[q.vault]
        hits = run(
            embedder, judged, candidates=store.candidates, vectors=store.vectors, queue=store.queue
        ).hits
        scores.add(q, [spans[q.vault](h) for h in hits], time.perf_counter() - started)
    return scores


def latency(
    store: Store,
    embedder: Embedder,
    queries: Sequence[Query],
    filters: SearchFilter,
    fusion: Fusion,
    learned: ranker.Ranker | None = None,
) -> tuple[float, float]:
    """Milliseconds of one hybrid top-10 search in the database (candidates and fusion, and
    the `learned` ranker's features and order with one), p50 and p95: the query's vector
    is made beforehand."""
    times = []
    for q in queries:
        plan = SearchPlan(q.text, fusion=fusion, filters=filters)
        embedder.embed_query(q.text)
        started = time.perf_counter()
        got = retrieve(
            embedder, plan, candidates=store.candidates, vectors=store.vectors, queue=store.queue
        )
        judge = Judge(learned, q.text, None) if learned else None
        rank(got.found, "hybrid", fusion, got.period, judge=judge)[:10]
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]


def _templates(level: str) -> list[str]:
    """The levels whose index a new index of `level` may start as a copy of, best first:
    a model level holds what each level whose writes are a part of its own paid for (the
    most writes first: "both" starts from the statements level, with its voices and
    statements), a "+paragraphs" level what its base level did."""
    base = level.removesuffix(PARAGRAPHS)
    writes = set(MODEL_LEVELS.get(base, []))
    # The reference level's statements are a dataset's facts, not the model's: no other
    # level starts from its index.
    smaller = [o for o, its in MODEL_LEVELS.items() if o != REFERENCE and set(its) < writes]
    smaller.sort(key=lambda other: -len(MODEL_LEVELS[other]))
    found = [name for other in smaller for name in (f"{other}{PARAGRAPHS}", other)]
    return [*found, base] if base != level else found


def _database(dataset: str, vault: str, level: str) -> str:
    parts = ["bench", dataset, vault, level] if vault else ["bench", dataset, level]
    return "_".join(parts).replace("-", "_").replace("+", "_")


@dataclass
class DatasetResult:
    dataset: Dataset
    matrix: Matrix = field(default_factory=Matrix)
    # Each level's own fusion (kb's default for its index): its hybrid row is the one shown.
    fusions: dict[str, Fusion] = field(default_factory=dict)
    costs: dict[str, dict[str, Cost]] = field(default_factory=dict)
    rerank: Scores | None = None
    # Per level: hybrid top-10 in the database, p50 and p95 ms; the vectors the index holds
    # (chunks, passages).
    latency_ms: dict[str, tuple[float, float]] = field(default_factory=dict)
    # The same with the learned ranker's features and order.
    ranker_ms: dict[str, tuple[float, float]] = field(default_factory=dict)
    vectors: dict[str, tuple[int, int]] = field(default_factory=dict)


def run_dataset(
    folder: Path,
    args: argparse.Namespace,
    chat: ChatModel,
    embedder: Embedder,
) -> DatasetResult:
    dataset = load_dataset(folder, Limit(args.limit_docs, args.smallest_docs))
    levels = [lv for lv in args.levels.split(",") if lv]
    stores: dict[str, dict[str, Store]] = {}
    configs = {level: make_config(dataset.vaults[0], args.data_dir, level) for level in levels}
    # Whether kb embeds a first-person question in the owner's voice, by level: where its
    # passages speak in writers' voices (ContextConfig.voiced_passages).
    voiced = {level: c.context.voiced_passages() for level, c in configs.items()}
    fusions = {level: c.query.fusion for level, c in configs.items()}
    subset = bool(args.limit_docs or args.so_far)
    if args.config:
        base = load_config(args.config)
        voiced[args.config_level] = base.context.voiced_passages()
        fusions[args.config_level] = base.query.fusion
        vault = dataset.vaults[0]
        dataset = Dataset(
            dataset.name,
            (Vault(vault.name, base.vaults[0].path, vault.files, base.owner_name, vault.personal),),
            dataset.queries,
        )
        stores[args.config_level] = {
            vault.name: open_store(db.database_url(base.database_url, base.data_dir))
        }
        levels = []
    else:
        server = db.embedded_url(args.data_dir)
    if args.so_far and not args.config:
        # A full run indexes its levels in order: the last one is the one still under way.
        last = levels[-1]
        vaults = []
        for vault in dataset.vaults:
            config = make_config(vault, args.data_dir, last)
            with open_store(
                databases.database_on(server, _database(dataset.name, vault.name, last))
            ) as s:
                done = built_so_far(config, s)
            vaults.append(
                Vault(
                    vault.name,
                    vault.path,
                    tuple(f for f in vault.files if f in done),
                    vault.owner,
                    vault.personal,
                )
            )
        dataset = Dataset(dataset.name, tuple(vaults), tuple(answerable(dataset.queries, vaults)))
    if args.limit_queries:
        dataset = Dataset(dataset.name, dataset.vaults, dataset.queries[: args.limit_queries])
    print(
        f"dataset {dataset.name}: {sum(len(v.files) for v in dataset.vaults)} documents in "
        f"{len(dataset.vaults)} vault(s), {len(dataset.queries)} questions",
        file=sys.stderr,
    )
    result = DatasetResult(dataset, fusions=fusions)
    facts = load_facts(folder)
    if not facts and any(lv.removesuffix(PARAGRAPHS) == REFERENCE for lv in levels):
        print(f"dataset {dataset.name}: no {FACTS_FILE}, no reference level", file=sys.stderr)
        levels = [lv for lv in levels if lv.removesuffix(PARAGRAPHS) != REFERENCE]
    for level in levels:
        stores[level] = {}
        total_run, total_paid = Cost(), Cost()
        for vault in dataset.vaults:
            name = _database(dataset.name, vault.name, level)
            template = next((t for t in _templates(level) if t in stores), None)
            if template is not None:
                # A copy of an index this run holds (when there is none yet): its notes are
                # rebuilt, their chunks' vectors and model outputs found again, only what
                # is new asked for and embedded.
                stores[template][vault.name].close()
                url = databases.database_on(
                    server, name, template=_database(dataset.name, vault.name, template)
                )
                stores[template][vault.name] = open_store(
                    databases.database_on(server, _database(dataset.name, vault.name, template))
                )
            else:
                url = databases.database_on(server, name)
            store = stores[level][vault.name] = open_store(url)
            print(f"indexing with context level '{level}' into {name}", file=sys.stderr)
            config = make_config(vault, args.data_dir, level)
            ledger = args.data_dir / f"{name}.cost.json"
            writer = (
                ReferenceWriter(chat, FactFinder(vault.path, vault.prefix, vault.files, facts))
                if level.removesuffix(PARAGRAPHS) == REFERENCE
                else chat
            )
            this_run, paid = index(
                config, store, writer, embedder, vault.files if subset else (), ledger
            )
            total_run, total_paid = total_run.plus(this_run), total_paid.plus(paid)
        result.costs[level] = {"this run": total_run, "paid in all runs": total_paid}
    if args.index_only:
        _close(stores)
        return result

    spans = {v.name: Spans(v.path, v.prefix) for v in dataset.vaults}
    filters = {v.name: SearchFilter(paths=v.files) if subset else NO_FILTER for v in dataset.vaults}
    learned = ranker.load(args.ranker_file or ranker.DEFAULT_MODEL, SCHEMA)
    if learned.unfit:
        raise SystemExit(learned.unfit)
    for level, by_vault in stores.items():
        print(f"querying: {level}", file=sys.stderr)
        score_level(
            level,
            by_vault,
            embedder,
            dataset,
            spans,
            filters,
            result.matrix,
            fusion=fusions[level],
            learned=learned,
            voiced_queries=voiced[level],
            dated_queries=not args.undated,
        )
    top = next((lv for lv in ("llm", "structure", "none") if lv in stores), None)
    if args.rerank and top:
        print("querying: re-ranking", file=sys.stderr)
        reranker = Reranker(
            chat,
            next(iter(stores[top].values())).caches,
            candidates=args.rerank_candidates,
            chars=args.rerank_chars,
            context_window=4096,
            concurrency=1,
        )
        result.rerank = rerank_row(
            stores[top], embedder, reranker, dataset, spans, filters, fusions[top], learned
        )
    biggest = max(dataset.vaults, key=lambda v: len(v.files))
    for level, by_vault in stores.items():
        asked = [q for q in dataset.queries if q.vault == biggest.name]
        store, only = by_vault[biggest.name], filters[biggest.name]
        result.latency_ms[level] = latency(store, embedder, asked, only, fusions[level])
        result.ranker_ms[level] = latency(store, embedder, asked, only, fusions[level], learned)
        result.vectors[level] = (
            sum(s.state.status().chunks for s in by_vault.values()),
            sum(s.passages.count() for s in by_vault.values()),
        )
    _close(stores)
    return result


def _close(stores: dict[str, dict[str, Store]]) -> None:
    for by_vault in stores.values():
        for store in by_vault.values():
            store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "datasets",
        type=Path,
        nargs="*",
        default=[d for d in DEFAULT_DATASETS if d.exists()],
        help="dataset folders (default: docs-rag, personal-dev and the example vault's)",
    )
    parser.add_argument(
        "--limit-docs",
        type=int,
        help="index only the first N notes per vault, ask only what they answer",
    )
    parser.add_argument(
        "--smallest-docs",
        action="store_true",
        help="with --limit-docs: the N smallest notes, not the first N",
    )
    parser.add_argument("--limit-queries", type=int, help="run only the first N questions")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("KB_BENCH_DIR", Path.home() / ".cache/kb/bench")),
        help="where the benchmark's PostgreSQL and its indexes live (kept between runs)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="evaluate the index of this kb config as it stands (no indexing; its first vault "
        "is the corpus, its owner the owner): your own index, with your own questions",
    )
    parser.add_argument("--config-level", default="index", help=argparse.SUPPRESS)
    parser.add_argument("--levels", default=",".join(LEVELS), help="context levels to index")
    parser.add_argument("--rerank", action="store_true", help="add the re-ranking row")
    parser.add_argument(
        "--ranker-file", type=Path, help="a learned ranker's file (default: the one kb ships)"
    )
    parser.add_argument("--rerank-candidates", type=int, default=10)
    parser.add_argument("--rerank-chars", type=int, default=600)
    parser.add_argument(
        "--so-far",
        action="store_true",
        help="only the notes the last of --levels has built so far, when a full run has "
        "not finished: they are synced again (no model calls) and searched alone",
    )
    parser.add_argument("--index-only", action="store_true", help="index, then stop")
    parser.add_argument(
        "--undated",
        action="store_true",
        help="score as if questions named no time (kb puts the notes of a time a question "
        "names first, see kb.search.when)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if not args.datasets:
        parser.error("no dataset folder given and none of the default ones exists")

    # The models are those of --config, or come from the environment.
    env_config = (
        load_config(args.config)
        if args.config
        else make_config(Vault("", Path.cwd(), ()), args.data_dir, "llm")
    )
    chat = make_chat(env_config.llm)
    embedder = CachedEmbedder(make_embedder(env_config.llm))
    print(
        f"chat {env_config.llm.chat_model}, embeddings {env_config.llm.embed_model}",
        file=sys.stderr,
    )
    results = [run_dataset(folder, args, chat, embedder) for folder in args.datasets]
    if not args.index_only:
        for result in results:
            _print_dataset(result)
        _print_fusions(results)
        _print_summary(results)
        _print_first_person(results)
        _print_categories(results)
    for result in results:
        if result.costs:
            _print_costs(result)
    if args.json:
        args.json.write_text(json.dumps(_report(results, env_config), indent=2))
    return 0


def _report(results: Sequence[DatasetResult], config: Config) -> dict:
    return {
        "chat_model": config.llm.chat_model,
        "embed_model": config.llm.embed_model,
        "datasets": {
            r.dataset.name: {
                "documents": sum(len(v.files) for v in r.dataset.vaults),
                "queries": len(r.dataset.queries),
                "results": {n: s.summary() for n, s in r.matrix.owner.items()},
                "fusions": {level: fusion_label(f) for level, f in r.fusions.items()},
                "first_person": _first_person_figures(r),
                "categories": _category_figures(r),
                "rerank": r.rerank.summary() if r.rerank else None,
                "costs": {lv: {k: vars(c) for k, c in v.items()} for lv, v in r.costs.items()},
                "hybrid_latency_ms": r.latency_ms,
                "ranker_latency_ms": r.ranker_ms,
                "vectors": r.vectors,
            }
            for r in results
        },
        "mean": {name: _mean_row(results, name) for name in _row_names(results)},
    }


def _row_names(results: Sequence[DatasetResult]) -> list[str]:
    return list(dict.fromkeys(n for r in results for n in r.matrix.owner))


def _mean_row(results: Sequence[DatasetResult], name: str) -> dict[str, float]:
    rows = [r.matrix.owner[name].summary() for r in results if name in r.matrix.owner]
    return {key: statistics.mean(row[key] for row in rows) for key in rows[0]}


_HEAD = "".join(f"{f'R@{k}':>7}" for k in KS) + f"{'MRR@3':>7}{'MRR@10':>8}{'chars':>7}"


def _row(s: dict[str, float]) -> str:
    row = "".join(f"{s[f'recall@{k}']:>7.3f}" for k in KS)
    return row + f"{s['mrr@3']:>7.3f}{s['mrr@10']:>8.3f}{s['chars_per_chunk@5']:>7.0f}"


def _print_dataset(result: DatasetResult) -> None:
    d = result.dataset
    print(f"\n== {d.name} ({len(d.queries)} questions)")
    print(f"{'configuration':<30}{_HEAD}")
    for name, scores in result.matrix.owner.items():
        if not _shown(name, result.fusions):
            continue
        print(f"{name:<30}{_row(scores.summary())}")
    if result.rerank:
        print(f"{'+ re-ranking':<30}{_row(result.rerank.summary())}")
    for level, (p50, p95) in result.latency_ms.items():
        chunks, passages = result.vectors.get(level, (0, 0))
        print(
            f"{level}: hybrid top-10 in the database p50 {p50:.1f} ms, p95 {p95:.1f} ms; "
            f"{chunks} chunks, {passages} passages"
        )
        if level in result.ranker_ms:
            p50, p95 = result.ranker_ms[level]
            print(f"{level}: with the learned ranker p50 {p50:.1f} ms, p95 {p95:.1f} ms")


def _shown(name: str, fusions: Mapping[str, Fusion]) -> bool:
    """Whether a row is one the tables show: a single list, or its level's own fusion."""
    level, _, label = name.partition(" hybrid ")
    return not label or label == fusion_label(fusions[level])


def _print_fusions(results: Sequence[DatasetResult]) -> None:
    """recall@5 of every mode and fusion on every dataset, their mean, and a hybrid row's
    worst difference from the better single mode of its level on any dataset."""
    names = [r.dataset.name for r in results]
    print(
        "\n== recall@5 by mode and fusion"
        + " " * 6
        + "".join(f"{n[:14]:>15}" for n in names)
        + f"{'mean':>8}{'worst':>8}"
    )

    def recall5(result: DatasetResult, name: str) -> float:
        scores = result.matrix.owner.get(name)
        return scores.summary()["recall@5"] if scores else float("nan")

    for name in _row_names(results):
        values = [recall5(r, name) for r in results]
        level, mode = name.split()[:2]
        worst = ""
        if mode == "hybrid":
            best = [
                max(recall5(r, f"{level} vector"), recall5(r, f"{level} text")) for r in results
            ]
            worst = f"{min(v - b for v, b in zip(values, best, strict=True)):>+8.3f}"
        print(
            f"{name:<36}"
            + "".join(f"{v:>15.3f}" for v in values)
            + f"{statistics.mean(values):>8.3f}{worst}"
        )


def _print_summary(results: Sequence[DatasetResult]) -> None:
    if len(results) < 2:
        return
    print(f"\n== mean over {len(results)} datasets")
    print(f"{'configuration':<30}{_HEAD}")
    fusions = {level: f for r in results for level, f in r.fusions.items()}
    for name in _row_names(results):
        if not _shown(name, fusions):
            continue
        print(f"{name:<30}{_row(_mean_row(results, name))}")


def _first_person_figures(result: DatasetResult) -> dict[str, dict[str, float]]:
    """recall@5 and MRR@10 of first-person questions with and without the owner's name,
    and of the other questions, per row; recall@5 of their twins too, the others that ask
    for the same passages (the same question in the third person, where a dataset has it)."""
    queries = result.dataset.queries
    mine = [i for i, q in enumerate(queries) if q.first_person]
    others = [i for i, q in enumerate(queries) if not q.first_person]
    asked = {queries[i].gold for i in mine}
    twins = [i for i in others if queries[i].gold in asked]
    figures = {}
    for name, scores in result.matrix.owner.items():
        plain = result.matrix.plain[name]
        figures[name] = {
            "first_owner_r5": scores.summary(mine)["recall@5"],
            "first_plain_r5": plain.summary(mine)["recall@5"],
            "other_r5": scores.summary(others)["recall@5"],
            "twin_r5": scores.summary(twins)["recall@5"] if twins else float("nan"),
            "first_owner_mrr10": scores.summary(mine)["mrr@10"],
            "first_plain_mrr10": plain.summary(mine)["mrr@10"],
            "other_mrr10": scores.summary(others)["mrr@10"],
        }
    return figures


def _print_first_person(results: Sequence[DatasetResult]) -> None:
    for result in results:
        mine = sum(q.first_person for q in result.dataset.queries)
        if not mine:
            continue
        others = len(result.dataset.queries) - mine
        print(
            f"\n== {result.dataset.name}: first-person questions ({mine}) with and without the "
            f"owner's name, and the others ({others})"
        )
        print(
            f"{'configuration':<30}{'R@5 owner':>10}{'R@5 plain':>10}{'R@5 other':>10}"
            f"{'R@5 twin':>10}{'MRR owner':>10}{'MRR plain':>10}{'MRR other':>10}"
        )
        for name, f in _first_person_figures(result).items():
            if not _shown(name, result.fusions):
                continue
            print(
                f"{name:<30}{f['first_owner_r5']:>10.3f}{f['first_plain_r5']:>10.3f}"
                f"{f['other_r5']:>10.3f}{f['twin_r5']:>10.3f}{f['first_owner_mrr10']:>10.3f}"
                f"{f['first_plain_mrr10']:>10.3f}{f['other_mrr10']:>10.3f}"
            )


def _category_figures(result: DatasetResult) -> dict[str, dict[str, dict[str, float]]]:
    """recall@5 and recall@20 of each kind of question the dataset labels, per row: where
    the misses are."""
    queries = result.dataset.queries
    kinds: dict[str, list[int]] = {}
    for i, q in enumerate(queries):
        if q.category:
            kinds.setdefault(q.category, []).append(i)
    if not kinds:
        return {}

    def figures(scores: Scores, picked: list[int]) -> dict[str, float]:
        summary = scores.summary(picked)
        return {
            "questions": len(picked),
            "recall@5": summary["recall@5"],
            "recall@20": summary["recall@20"],
        }

    return {
        name: {kind: figures(scores, picked) for kind, picked in sorted(kinds.items())}
        for name, scores in result.matrix.owner.items()
    }


def _print_categories(results: Sequence[DatasetResult]) -> None:
    for result in results:
        figures = _category_figures(result)
        if not figures:
            continue
        kinds = next(iter(figures.values()))
        print(f"\n== {result.dataset.name}: recall@5 / recall@20 by kind of question")
        print(
            f"{'configuration':<30}"
            + "".join(f"{k + ' (' + str(v['questions']) + ')':>22}" for k, v in kinds.items())
        )
        for name, by_kind in figures.items():
            if not _shown(name, result.fusions):
                continue
            cells = (f"{f['recall@5']:.3f} / {f['recall@20']:.3f}" for f in by_kind.values())
            print(f"{name:<30}" + "".join(f"{c:>22}" for c in cells))


def _print_costs(result: DatasetResult) -> None:
    print(
        f"\n{result.dataset.name + ': indexing cost':<36}{'files':>7}{'chunks':>8}"
        f"{'LLM calls':>11}{'prompt tok':>12}{'output tok':>12}{'embedded':>10}{'seconds':>9}"
    )
    for level, by_run in result.costs.items():
        for when, c in by_run.items():
            print(
                f"{f'{level}, {when}':<36}{c.files:>7}{c.chunks:>8}{c.llm_calls:>11}"
                f"{c.prompt_tokens:>12}{c.output_tokens:>12}{c.embedded:>10}{c.seconds:>9.0f}"
            )


if __name__ == "__main__":
    sys.exit(main())
