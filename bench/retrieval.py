"""Retrieval quality of kb on a labelled dataset: recall@k, MRR and cost, per configuration.

The dataset folder holds a Markdown corpus and its questions, in the layout of docs-rag:

    corpus_md/<file>.md    the notes
    documents.jsonl        {"file": ...} per note (its order is the order of --limit-docs)
    queries.jsonl          {"qid", "query", "gold": [{"file", "start", "end"}, ...]}

A returned chunk is a hit on a gold section when both are in the same file and their
character spans overlap by at least half of the shorter one. recall@k is the share of a
query's gold sections hit by the top k chunks; MRR@k is 1/rank of the first hit.

The corpus is indexed by kb itself, once per context level, each into its own database on
the embedded server in --data-dir: `none` (the chunk alone), `structure` (title and header
path, no LLM) and `llm` (the product's default). Databases are kept, so a second run (or
one that was interrupted) pays only for what is missing: kb's own content-hash caches. A
quick run (--limit-docs) indexes its documents into the same databases and searches only
them, so its work counts toward the full run.

Models come from the environment, as for kb (KB_PROVIDER, KB_CHAT_HOST, KB_EMBED_HOST,
KB_CHAT_MODEL, KB_EMBED_MODEL, KB_LLM_CONCURRENCY); `eval "$(scripts/test-models start)"`
sets them for the local llama.cpp stack.

    .venv/bin/python bench/retrieval.py ../shared/eval/docs-rag              # full run
    .venv/bin/python bench/retrieval.py ../shared/eval/docs-rag --limit-docs 8   # quick
    .venv/bin/python bench/retrieval.py ../shared/eval/docs-rag --so-far  # part of a full run
    .venv/bin/python bench/retrieval.py examples/eval --config examples/kb.toml  # an index as is

examples/eval holds sixteen questions about the example vault, half of them in the first
person about its owner, to measure what the owner's name does to a query.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kb import db
from kb.config import Config, load_config, parse_config
from kb.indexer import FileEvent, Indexer, Scope
from kb.llm import make_chat, make_embedder
from kb.llm.base import ChatModel, Embedder
from kb.query import owner_query, search
from kb.rerank import Reranker
from kb.store import NO_FILTER, SearchFilter, SearchHit, Store

KS = (1, 3, 5, 10, 20)
LEVELS = ("none", "structure", "llm")


@dataclass(frozen=True)
class Setup:
    """One row of the table: an index (context level) and how it is searched."""

    name: str
    level: str
    mode: str
    rerank: bool = False
    owner: bool = False


SETUPS = (
    Setup("1 raw chunks (vector)", "none", "vector"),
    Setup("2 structure only (vector)", "structure", "vector"),
    Setup("3 LLM context (vector)", "llm", "vector"),
    Setup("  LLM context (text only)", "llm", "text"),
    Setup("4 LLM context + hybrid", "llm", "hybrid"),
    Setup("  4 + owner name on first-person queries", "llm", "hybrid", owner=True),
    Setup("5 4 + re-ranking", "llm", "hybrid", rerank=True),
)


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


def _hit(span: tuple[str, int, int], gold: Gold) -> bool:
    file, start, end = span
    if file != gold.file:
        return False
    overlap = min(end, gold.end) - max(start, gold.start)
    return overlap > 0 and overlap >= 0.5 * min(end - start, gold.end - gold.start)


class Spans:
    """Line spans of returned chunks → character spans in their files."""

    def __init__(self, corpus: Path) -> None:
        self.corpus = corpus
        self._starts: dict[str, list[int]] = {}

    def __call__(self, hit: SearchHit) -> tuple[str, int, int]:
        starts = self._line_starts(hit.path)
        start = starts[min(hit.start_line - 1, len(starts) - 1)]
        end = starts[hit.end_line] - 1 if hit.end_line < len(starts) else starts[-1]
        return hit.path, start, max(end, start + 1)

    def _line_starts(self, path: str) -> list[int]:
        if path not in self._starts:
            text = (self.corpus / path).read_text(encoding="utf-8")
            starts = [0]
            starts += [i + 1 for i, ch in enumerate(text) if ch == "\n"]
            starts.append(len(text) + 1)  # past the end, so a last line has an end
            self._starts[path] = starts
        return self._starts[path]


class CachedEmbedder:
    """Every configuration asks for the same query vectors: embed each text once."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self._seen: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if missing:
            self._seen.update(zip(missing, self.inner.embed(missing), strict=True))
        return [self._seen[t] for t in texts]


def load_dataset(folder: Path, limit_docs: int | None) -> tuple[list[str], list[Query]]:
    files = [json.loads(line)["file"] for line in _lines(folder / "documents.jsonl")]
    if limit_docs:
        files = files[:limit_docs]
    queries = []
    for line in _lines(folder / "queries.jsonl"):
        q = json.loads(line)
        gold = tuple(Gold(g["file"], g["start"], g["end"]) for g in q["gold"])
        queries.append(Query(q["qid"], q["query"], gold))
    return files, answerable(queries, files)


def answerable(queries: Sequence[Query], files: Sequence[str]) -> list[Query]:
    """The questions whose gold sections are all in `files`: what a subset can be asked."""
    wanted = set(files)
    return [q for q in queries if all(g.file in wanted for g in q.gold)]


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def make_config(corpus: Path, data_dir: Path, level: str) -> Config:
    raw = {
        # Nobody's personal notes here: the owner only matters to the owner-name row.
        "owner_name": "Alex Doe",
        "data_dir": str(data_dir),
        "vaults": [{"name": "corpus", "path": str(corpus)}],
        "context": {"summaries": level},
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
    """Index the corpus, or only `subset` of it (the rest of the index is left alone, so a
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

    with Indexer(config, store, chat, embedder, on_event=progress) as indexer:
        if subset:
            indexer.ensure_embedding_space()
            indexer.sync_scope(config.vaults[0], Scope(files=frozenset(subset)))
        else:
            indexer.sync()
    return run, paid.plus(run)


def run_setup(
    setup: Setup,
    store: Store,
    embedder: Embedder,
    queries: Sequence[Query],
    spans: Callable[[SearchHit], tuple[str, int, int]],
    reranker: Reranker | None,
    filters: SearchFilter,
    owner: str,
) -> Scores:
    scores = Scores()
    for q in queries:
        started = time.perf_counter()
        hits = search(
            store,
            embedder,
            q.text,
            owner=owner if setup.owner else None,
            top_k=max(KS),
            mode=setup.mode,
            reranker=reranker if setup.rerank else None,
            filters=filters,
        )
        scores.add(q, [spans(h) for h in hits], time.perf_counter() - started)
    return scores


def latency(
    store: Store, embedder: Embedder, queries: Sequence[Query], filters: SearchFilter
) -> tuple[float, float]:
    """Milliseconds of one hybrid top-10 search (the SQL round trip), p50 and p95."""
    space = store.embedding_space()
    assert space is not None
    times = []
    for q in queries:
        [vector] = embedder.embed([q.text])
        started = time.perf_counter()
        store.search(vector, q.text, model=space[0], dimensions=space[1], top_k=10, filters=filters)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="folder with corpus_md/ and queries.jsonl")
    parser.add_argument("--limit-docs", type=int, help="index only the first N documents")
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
    parser.add_argument("--levels", default=",".join(LEVELS), help="context levels to index")
    parser.add_argument("--no-rerank", action="store_true", help="skip the re-ranking row")
    parser.add_argument("--rerank-candidates", type=int, default=10)
    parser.add_argument("--rerank-chars", type=int, default=600)
    parser.add_argument(
        "--so-far",
        action="store_true",
        help="only the documents the LLM level has indexed so far, when a full run has not "
        "finished: they are synced again (no model calls) and searched alone",
    )
    parser.add_argument("--index-only", action="store_true", help="index, then stop")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    files, queries = load_dataset(args.dataset, args.limit_docs)
    levels = [lv for lv in args.levels.split(",") if lv]
    if args.config:
        base = load_config(args.config)
        corpus = base.vaults[0].path
    else:
        corpus = args.dataset / "corpus_md"
        base = make_config(corpus, args.data_dir, "llm")
        server = db.embedded_url(args.data_dir)
    if args.so_far and not args.config:
        with Store(db.database_on(server, _database(args.dataset, "llm"))) as store:
            done = store.documents(base.vaults[0].name)
        files = [f for f in files if f in done]
        if not files:
            parser.error("--so-far: the LLM level has indexed none of these documents yet")
        queries = answerable(queries, files)
    if args.limit_queries:
        queries = queries[: args.limit_queries]
    # A quick run indexes its documents into the full run's index and searches only them.
    subset = files if args.limit_docs or args.so_far else []
    filters = SearchFilter(paths=tuple(subset)) if subset else NO_FILTER
    chat = make_chat(base.llm)
    embedder = CachedEmbedder(make_embedder(base.llm))
    print(
        f"dataset {args.dataset}: {len(files)} documents, {len(queries)} questions; "
        f"chat {base.llm.chat_model}, embeddings {base.llm.embed_model}",
        file=sys.stderr,
    )

    stores: dict[str, Store] = {}
    costs: dict[str, dict[str, Cost]] = {}
    if args.config:
        stores["llm"] = Store(db.database_url(base.database_url, base.data_dir))
        levels = []
    for level in levels:
        name = _database(args.dataset, level)
        store = stores[level] = Store(db.database_on(server, name))
        print(f"indexing with context level '{level}' into {name}", file=sys.stderr)
        config = make_config(corpus, args.data_dir, level)
        ledger = args.data_dir / f"{name}.cost.json"
        this_run, paid = index(config, store, chat, embedder, subset, ledger)
        costs[level] = {"this run": this_run, "paid in all runs": paid}
    if costs:
        _print_costs(costs)
    if args.index_only:
        return 0

    spans = Spans(corpus)
    reranker = None
    if not args.no_rerank and "llm" in stores:
        reranker = Reranker(
            chat,
            stores["llm"],
            candidates=args.rerank_candidates,
            chars=args.rerank_chars,
            context_window=base.llm.context_window,
            concurrency=base.llm.concurrency,
        )
    results: dict[str, Scores] = {}
    rerank_usage = (0, 0, 0)
    for setup in SETUPS:
        if setup.level not in stores or (setup.rerank and reranker is None):
            continue
        before = (chat.usage.calls, chat.usage.prompt_tokens, chat.usage.output_tokens)
        print(f"querying: {setup.name.strip()}", file=sys.stderr)
        results[setup.name] = run_setup(
            setup, stores[setup.level], embedder, queries, spans, reranker, filters, base.owner_name
        )
        if setup.rerank:
            rerank_usage = (
                chat.usage.calls - before[0],
                chat.usage.prompt_tokens - before[1],
                chat.usage.output_tokens - before[2],
            )
    _print_table(results, queries)
    if reranker is not None and SETUPS[-1].name in results:
        calls, prompt_tokens, output_tokens = rerank_usage
        per_query = statistics.mean(results[SETUPS[-1].name].seconds)
        print(
            f"\nre-ranking: top {args.rerank_candidates} candidates, {args.rerank_chars} "
            f"characters each; {calls} model calls this run ({prompt_tokens} prompt, "
            f"{output_tokens} output tokens), {per_query:.2f} s per query"
        )
    latency_ms = None
    if "llm" in stores:
        latency_ms = latency(stores["llm"], embedder, queries, filters)
        print(
            f"hybrid top-10 search in the database: p50 {latency_ms[0]:.1f} ms, "
            f"p95 {latency_ms[1]:.1f} ms"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "dataset": str(args.dataset),
                    "documents": len(files),
                    "queries": len(queries),
                    "chat_model": base.llm.chat_model,
                    "embed_model": base.llm.embed_model,
                    "results": {n: _summary(s) for n, s in results.items()},
                    "costs": {lv: {k: vars(c) for k, c in v.items()} for lv, v in costs.items()},
                    "hybrid_latency_ms": latency_ms,
                },
                indent=2,
            )
        )
    for store in stores.values():
        store.close()
    return 0


def _database(dataset: Path, level: str) -> str:
    return f"bench_{dataset.resolve().name}_{level}".replace("-", "_")


def _summary(s: Scores) -> dict[str, float]:
    out = {f"recall@{k}": statistics.mean(v) for k, v in s.recall.items()}
    out |= {f"mrr@{k}": statistics.mean(v) for k, v in s.rr.items()}
    out["chars_per_chunk@5"] = statistics.mean(s.chars) if s.chars else 0.0
    out["seconds_per_query"] = statistics.mean(s.seconds)
    return out


def _print_table(results: dict[str, Scores], queries: Sequence[Query]) -> None:
    head = "".join(f"{f'R@{k}':>7}" for k in KS) + f"{'MRR@3':>7}{'MRR@10':>8}{'chars':>7}"
    print(f"\n{'configuration':<44}{head}   ({len(queries)} questions)")
    for name, scores in results.items():
        s = _summary(scores)
        row = "".join(f"{s[f'recall@{k}']:>7.3f}" for k in KS)
        row += f"{s['mrr@3']:>7.3f}{s['mrr@10']:>8.3f}{s['chars_per_chunk@5']:>7.0f}"
        print(f"{name:<44}{row}")
    first, hybrid = SETUPS[0].name, SETUPS[4].name
    if first in results and hybrid in results:
        miss_before = 1 - _summary(results[first])["recall@5"]
        miss_after = 1 - _summary(results[hybrid])["recall@5"]
        if miss_before > 0:
            cut = 1 - miss_after / miss_before
            print(f"\nmisses at recall@5, configuration 4 against 1: {cut:+.0%} fewer")
    _print_first_person(results, queries)


def _print_first_person(results: dict[str, Scores], queries: Sequence[Query]) -> None:
    """The owner's name only changes first-person questions: show them apart from the rest."""
    mine = [owner_query(q.text, "Owner") != q.text for q in queries]
    if not any(mine):
        return
    print(f"\n{'by question':<44}{'first person (' + str(sum(mine)) + ')':>23}", end="")
    print(f"{'others (' + str(len(mine) - sum(mine)) + ')':>23}")
    print(f"{'':<44}{'R@3':>7}{'R@5':>7}{'MRR@10':>8}{'R@3':>7}{'R@5':>7}{'MRR@10':>8}")
    for name in (SETUPS[4].name, SETUPS[5].name):
        if name not in results:
            continue
        s = results[name]
        row = ""
        for want in (True, False):
            picked = [i for i, m in enumerate(mine) if m is want]
            for values in (s.recall[3], s.recall[5], s.rr[10]):
                row += f"{statistics.mean(values[i] for i in picked) if picked else 0:>7.3f}"
            row += " "
        print(f"{name:<44}{row}")


def _print_costs(costs: dict[str, dict[str, Cost]]) -> None:
    print(
        f"\n{'indexing cost':<30}{'files':>7}{'chunks':>8}{'LLM calls':>11}"
        f"{'prompt tok':>12}{'output tok':>12}{'embedded':>10}{'seconds':>9}"
    )
    for level, by_run in costs.items():
        for when, c in by_run.items():
            print(
                f"{f'{level}, {when}':<30}{c.files:>7}{c.chunks:>8}{c.llm_calls:>11}"
                f"{c.prompt_tokens:>12}{c.output_tokens:>12}{c.embedded:>10}{c.seconds:>9.0f}"
            )


if __name__ == "__main__":
    sys.exit(main())
