"""How long `kb related` takes in the database at scale: a synthetic vault of bench/vaultgen.py
(10,000 notes by default, with their wikilinks), indexed once with hashed bag-of-words
vectors (kb's fake embedder: the same HNSW graph and the same reads as a real model's, no
model server), then the related notes of a seeded sample of its notes asked for, as
`kb related NOTE --unlinked --top-k 20` asks: p50, p95 and the slowest, in milliseconds.

    .venv/bin/python bench/related_latency.py [--notes 10000] [--asks 200]

The index is kept in `--data-dir` (a second run only asks).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import vaultgen  # noqa: E402
from kb import db  # noqa: E402
from kb.config import Config, parse_config  # noqa: E402
from kb.container import Container, open_store  # noqa: E402
from kb.llm.fake import FakeChat, FakeEmbedder  # noqa: E402

VAULT = "vault"


def config_for(vault: Path, data_dir: Path) -> Config:
    raw = {
        "owner_name": "Bench Owner",
        "data_dir": str(data_dir),
        "vaults": [{"name": VAULT, "path": str(vault)}],
        "context": {"summaries": "structure", "writes": ["summaries"], "passages": "none"},
        "enrich": {"enabled": False},
        "llm": {"provider": "fake", "chat_model": "fake-chat", "embed_model": "hash-384"},
    }
    return parse_config(raw, base_dir=Path.cwd(), env={})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--asks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--data-dir", type=Path, default=Path.home() / ".cache/kb/bench/related-latency"
    )
    args = parser.parse_args(argv)
    data_dir = args.data_dir / f"notes-{args.notes}"
    vault = data_dir / "vault"
    marker = data_dir / "indexed.json"
    if not marker.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        vaultgen.generate(vault, args.notes, args.seed)
    config = config_for(vault, data_dir)
    url = os.environ.get("KB_BENCH_DATABASE_URL") or db.embedded_url(data_dir)
    with open_store(url) as store:
        parts = Container(
            config, store, chat=FakeChat("fake-chat"), embedder=FakeEmbedder("hash-384")
        )
        if not marker.exists():
            started = time.perf_counter()
            parts.sync()
            parts.worker(until_empty=True, fail_fast=True, speeds=("embed",)).run()
            status = store.state.status()
            marker.write_text(
                json.dumps({"chunks": status.chunks, "seconds": time.perf_counter() - started}),
                encoding="utf-8",
            )
        with store.pool.connection() as conn:
            paths = [r["path"] for r in conn.execute("SELECT path FROM documents ORDER BY path")]
            links = conn.execute("SELECT count(*) AS n FROM links").fetchone()
        service = parts.related_service()
        sample = random.Random(args.seed).sample(paths, min(args.asks, len(paths)))
        service.related(VAULT, sample[0], unlinked=True, top_k=20)  # the pool's connections
        times = []
        for path in sample:
            started = time.perf_counter()
            service.related(VAULT, path, unlinked=True, top_k=20)
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    print(
        f"{len(paths)} notes, {json.loads(marker.read_text())['chunks']} chunks,"
        f" {links['n'] if links else 0} links; {len(times)} asks:"
        f" p50 {statistics.median(times):.1f} ms, p95 {times[int(len(times) * 0.95)]:.1f} ms,"
        f" slowest {times[-1]:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
