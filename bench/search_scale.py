"""Search latency at scale: vector, text and hybrid top-10 over a vault of ~100k chunks.

    python bench/search_scale.py [--notes 12000] [--seed 0] [--queries 200] [--cli-queries 20]

builds (or reuses) a synthetic vault (`bench/vaultgen.py`) and its kb index at the
`structure` context level with the offline fake provider (`kb.llm.fake`: no model server,
hashed bag-of-words vectors of 384 dimensions, the size of MiniLM's), each paragraph a vector
of its own as kb's default has it (`--passages none`: the chunks' vectors alone; `--writes
statements`: the fake model's statements too), then measures:

- in the database: `kb.search.hybrid.retrieve` as `kb query` calls it (the index's state,
  then the candidate lists fusion reads, 40 deep) in each mode, the query's vector made
  beforehand, plus the fusion for hybrid, and hybrid again with the learned
  ranker kb ships ordering its candidates (`hybrid+ranker`, as `kb query` searches by
  default), p50 and p95 over `--queries` queries (`--repeat N`: each query's fastest of N
  runs, which keeps a busy machine's stalls out of the figures);
- end to end: `kb query --mode M --top-k 10 --json` as a subprocess per query (Python start,
  config, embedding of the query, search, output), with the database server already
  running, p50 and p95 over `--cli-queries` queries per mode.

Queries are 2 to 8 words of the vault's own vocabulary, seeded: function words ("the", "of":
dropped by full-text search), words drawn as often as the text uses them (common), and words
of the vocabulary's long tail (rare).

The vault and the database are kept in --data-dir (default ~/.cache/kb/bench, or
KB_BENCH_DIR): indexing is kb's own (about 100 chunks/s on two busy cores), so a first run
takes a quarter of an hour or more, an interrupted one resumes where it stopped (kb skips
notes already indexed), and later runs only measure. The database lives on the embedded server of
--data-dir, or on the server of KB_BENCH_DATABASE_URL (a database named after the vault is
created there).

`--exactness N` also compares the text and hybrid top-10 of the first N queries with those of
exact BM25 (every posting of every query word read and every chunk found scored: up to
seconds per query at 100k chunks), and prints the share of the exact top 10 that was found.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import vaultgen
from kb import db
from kb.config import PASSAGE_MODES, Config, ContextConfig, PassageMode, SearchMode, parse_config
from kb.container import Container, open_store
from kb.llm import make_embedder
from kb.note_writing.events import FileEvent
from kb.search.hybrid import Judge, rank, retrieve
from kb.search.plan import SearchPlan
from kb.search.ranker import Ranker
from kb.store import Store, databases
from kb.store import candidates as store_module
from retrieval import CachedEmbedder

MODES: tuple[SearchMode, ...] = ("vector", "text", "hybrid")
# Hybrid search as kb runs it by default: its candidates ordered by the learned ranker.
JUDGED = "hybrid+ranker"
EMBED_MODEL = "hash-384"
TOP_K = 10
DEFAULT_PASSAGES = ContextConfig().passages


@dataclass(frozen=True)
class Latency:
    p50: float  # milliseconds
    p95: float


def percentiles(millis: Sequence[float]) -> Latency:
    ordered = sorted(millis)
    return Latency(
        statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    )


def make_queries(count: int, seed: int) -> list[str]:
    """2-8 word queries over the vault's vocabulary: function, common and rare words."""
    words = vaultgen.vocabulary(seed)
    function = len(vaultgen.FUNCTION_WORDS)
    rng = random.Random(seed + 1)
    queries = []
    for _ in range(count):
        picked = []
        for _ in range(rng.randint(2, 8)):
            roll = rng.random()
            if roll < 0.25:
                picked.append(words[rng.randrange(function)])
            elif roll < 0.7:
                # log-uniform over the content words: as often as the text uses them
                picked.append(words[int(function * (len(words) / function) ** rng.random())])
            else:
                picked.append(words[rng.randrange(len(words) // 2, len(words))])
        queries.append(" ".join(picked))
    return queries


def context_table(
    writes: Sequence[str], passages: PassageMode = DEFAULT_PASSAGES
) -> dict[str, object]:
    """The context level indexed: `structure`, or the LLM level with the fake model writing
    `writes` (its statements are a chunk's sentences: about as many as a model writes),
    written while indexing rather than queued; `passages` as `context.passages`."""
    if not writes:
        return {"summaries": "structure", "passages": passages}
    return {"summaries": "llm", "writes": list(writes), "passages": passages}


def raw_config(
    vault: Path,
    data_dir: Path,
    url: str,
    writes: Sequence[str] = (),
    passages: PassageMode = DEFAULT_PASSAGES,
) -> dict[str, object]:
    """The benchmark's kb config, as a config file holds it."""
    return {
        "owner_name": "Alex Doe",
        "data_dir": str(data_dir),
        "database": {"url": url},
        "vaults": [{"name": "scale", "path": str(vault), "personal": ["Journal/**"]}],
        "context": context_table(writes, passages),
        # The model's outputs written while indexing, as `kb index --wait` leaves them.
        "enrich": {"enabled": not writes},
        "llm": {"provider": "fake", "embed_model": EMBED_MODEL, "chat_model": "fake-chat"},
    }


def vault_config(raw: Mapping[str, object]) -> Config:
    # The environment's model settings are not this benchmark's: it always runs offline.
    return parse_config(dict(raw), base_dir=Path.cwd(), env={})


def config_toml(raw: Mapping[str, object]) -> str:
    """`raw` as a config file for `kb query --config`: its keys, then its tables, then its
    arrays of tables (a JSON string, number, boolean or list of them is TOML too)."""
    lines = [f"{k} = {json.dumps(v)}" for k, v in raw.items() if not isinstance(v, dict | list)]
    for key, value in raw.items():
        if isinstance(value, dict):
            lines += [f"[{key}]", *(f"{k} = {json.dumps(v)}" for k, v in value.items())]
    for key, value in raw.items():
        if isinstance(value, list):
            for item in value:
                lines += [f"[[{key}]]", *(f"{k} = {json.dumps(v)}" for k, v in item.items())]
    return "\n".join([*lines, ""])


def build(config: Config, store: Store) -> None:
    """Index the vault with kb itself; notes already indexed are skipped, so this resumes."""
    started = time.perf_counter()
    done = {"files": 0, "chunks": 0}

    def progress(event: FileEvent) -> None:
        if event.action != "indexed":
            return
        done["files"] += 1
        done["chunks"] += event.chunks
        if done["files"] % 500 == 0:
            rate = done["chunks"] / (time.perf_counter() - started)
            print(
                f"  indexed {done['files']} notes, {done['chunks']} chunks ({rate:.0f} chunks/s)",
                file=sys.stderr,
                flush=True,
            )

    parts = Container(config, store)
    with parts.indexer(on_event=progress) as indexer:
        indexer.sync()
    parts.worker(until_empty=True, fail_fast=True, speeds=("embed",)).run()
    if done["files"]:
        seconds = time.perf_counter() - started
        print(
            f"  indexed {done['files']} notes, {done['chunks']} chunks in {seconds:.0f} s "
            f"({done['chunks'] / seconds:.0f} chunks/s)",
            file=sys.stderr,
        )


def in_database(
    store: Store,
    config: Config,
    queries: Sequence[str],
    modes: Sequence[SearchMode] = MODES,
    repeat: int = 1,
    learned: Ranker | None = None,
) -> dict[str, tuple[Latency, list[list[tuple[str, int]]]]]:
    """Each mode's latency (each query's fastest of `repeat` runs) and each query's top 10
    (path, first line); with a `learned` ranker, hybrid search ordered by it too (JUDGED).
    A search is timed as kb runs it, its query's vector made beforehand."""
    embedder = CachedEmbedder(make_embedder(config.llm))
    for text in queries:
        embedder.embed_query(text)
    runs: list[tuple[str, SearchMode, Ranker | None]] = [(m, m, None) for m in modes]
    if learned is not None and "hybrid" in modes:
        runs.append((JUDGED, "hybrid", learned))
    results: dict[str, tuple[Latency, list[list[tuple[str, int]]]]] = {}
    for label, mode, judged_by in runs:
        millis, tops = [], []
        for text in queries:
            plan = SearchPlan(
                text,
                owner=config.owner_name,
                mode=mode,
                fusion=config.query.fusion,
                voiced_index=config.context.voiced_passages(),
            )
            judge = Judge(judged_by, text, config.owner_name) if judged_by else None
            fastest = float("inf")
            for _ in range(repeat):
                started = time.perf_counter()
                got = retrieve(
                    embedder,
                    plan,
                    candidates=store.candidates,
                    vectors=store.vectors,
                    queue=store.queue,
                )
                hits = rank(got.found, mode, plan.fusion, got.period, judge=judge)[:TOP_K]
                fastest = min(fastest, (time.perf_counter() - started) * 1000)
            millis.append(fastest)
            tops.append([(h.path, h.start_line) for h in hits])
        results[label] = (percentiles(millis), tops)
    return results


def exactness(
    store: Store,
    config: Config,
    queries: Sequence[str],
    tops: Mapping[str, list[list[tuple[str, int]]]],
) -> dict[str, float]:
    """Share of each mode's exact top 10 (every posting read, every chunk scored) that the
    measured search found, over `queries`."""
    saved = store_module.TEXT_POSTINGS_PER_WORD, store_module.TEXT_RESCORED
    store_module.TEXT_POSTINGS_PER_WORD = store_module.TEXT_RESCORED = 2**31 - 1
    try:
        exact = in_database(store, config, queries, modes=("text", "hybrid"))
    finally:
        store_module.TEXT_POSTINGS_PER_WORD, store_module.TEXT_RESCORED = saved
    shares: dict[str, float] = {}
    for mode, (_, exact_tops) in exact.items():
        found = [
            len(set(mine) & set(best)) / len(best)
            for mine, best in zip(tops[mode], exact_tops, strict=False)
            if best
        ]
        shares[mode] = statistics.mean(found) if found else 1.0
    return shares


def end_to_end(config_file: Path, queries: Sequence[str]) -> dict[SearchMode, Latency]:
    results: dict[SearchMode, Latency] = {}
    for mode in MODES:
        millis = []
        for text in queries:
            started = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "kb",
                    "--config",
                    str(config_file),
                    "query",
                    text,
                    "--mode",
                    mode,
                    "--top-k",
                    str(TOP_K),
                    "--json",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            millis.append((time.perf_counter() - started) * 1000)
        results[mode] = percentiles(millis)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=12_000, help="notes in the vault")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=200, help="queries measured in the DB")
    parser.add_argument(
        "--cli-queries", type=int, default=20, help="queries per mode through kb query (0: none)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("KB_BENCH_DIR", Path.home() / ".cache/kb/bench")),
        help="where the vault, its database and the embedded PostgreSQL live (kept)",
    )
    parser.add_argument(
        "--database", help="the database's name (default bench_scale_<notes>_<seed>)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each query N times in the database and keep its fastest (on a busy machine)",
    )
    parser.add_argument(
        "--exactness", type=int, default=0, help="compare N queries with exact BM25"
    )
    parser.add_argument("--build-only", action="store_true", help="index, then stop")
    parser.add_argument(
        "--writes",
        nargs="+",
        default=[],
        help="index at the LLM level with the fake model writing these (e.g. statements): "
        "each statement a vector of its own",
    )
    parser.add_argument(
        "--passages",
        choices=PASSAGE_MODES,
        default=DEFAULT_PASSAGES,
        help="context.passages: each paragraph a vector of its own (kb's default), or none",
    )
    args = parser.parse_args(argv)

    name = f"scale_{args.notes}_{args.seed}"
    vault = args.data_dir / f"vault_{name}"
    if not (vault / ".complete").exists():
        print(f"writing {args.notes} notes into {vault}", file=sys.stderr)
        vaultgen.generate(vault, args.notes, args.seed)
        (vault / ".complete").touch()
    server = os.environ.get("KB_BENCH_DATABASE_URL") or db.embedded_url(args.data_dir)
    # An index at kb's default passages keeps the plain name; another setting is named.
    unlike = [] if args.passages == DEFAULT_PASSAGES else [f"passages_{args.passages}"]
    database = args.database or "_".join(["bench", name, *args.writes, *unlike])
    url = databases.database_on(server, database)
    raw = raw_config(vault, args.data_dir, url, args.writes, args.passages)
    config = vault_config(raw)
    with open_store(url) as store:
        print(f"indexing {vault} into {database}", file=sys.stderr)
        build(config, store)
        status = store.state.status()
        passages = store.passages.count()
        print(
            f"{status.documents} notes, {status.chunks} chunks, {passages} passages",
            file=sys.stderr,
        )
        if args.build_only:
            return 0
        queries = make_queries(args.queries, args.seed)
        learned = Container(config, store).ranker()
        measured = in_database(store, config, queries, repeat=args.repeat, learned=learned)
        shares = (
            exactness(
                store,
                config,
                queries[: args.exactness],
                {mode: tops for mode, (_, tops) in measured.items()},
            )
            if args.exactness
            else {}
        )
    config_file = args.data_dir / f"{database}.toml"
    config_file.write_text(config_toml(raw))
    cli = end_to_end(config_file, queries[: args.cli_queries]) if args.cli_queries else {}

    fastest = f", fastest of {args.repeat} runs in the database" if args.repeat > 1 else ""
    print(
        f"\n{status.chunks} chunks and {passages} passages ({status.documents} notes), "
        f"top-{TOP_K}, {len(queries)}"
        f" queries{fastest}, milliseconds"
    )
    print(f"{'mode':<14}{'DB p50':>9}{'DB p95':>9}{'kb query p50':>14}{'kb query p95':>14}")
    for mode, (lat, _) in measured.items():
        row = f"{mode:<14}{lat.p50:>9.1f}{lat.p95:>9.1f}"
        if mode in cli:
            row += f"{cli[mode].p50:>14.0f}{cli[mode].p95:>14.0f}"
        print(row)
    for mode, share in shares.items():
        print(f"{mode}: {share:.3f} of the exact top-{TOP_K} found ({args.exactness} queries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
