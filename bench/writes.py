"""How fast kb writes, and how little it holds: the fast path with an instant model.

    .venv/bin/python bench/writes.py [--notes 1000 10000] [--seed 0]

For each size, a generated vault (bench/vaultgen.py) is indexed from nothing into a fresh
database with the offline provider (instant summaries and vectors) at the structure level,
the path every note takes before its LLM enrichment. Each step is a real `kb` process
against a database server that is already running (a process holds the embedded server, as
a running daemon does), timed as a whole, its peak RSS read from the kernel:

- first index: wall time, chunks per second, peak RSS;
- unchanged vault: `kb index` again (median of 3);
- every note touched (new mtime, same bytes, as a sync tool does): `kb index`;
- `kb query` in each mode (median of 5; the offline embedder takes no time);
- `kb --help`.

Vaults are cached under --data-dir; each run uses a new database.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import vaultgen  # noqa: E402

from kb import db  # noqa: E402

KB = [sys.executable, "-m", "kb"]
QUERY = "project meeting notes about the garden"


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_rss_mb: float


def run_kb(config: Path, *args: str) -> Run:
    """One `kb` process, timed as a whole; fails loudly if kb does."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*KB, "--config", str(config), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "KB_CONFIG": ""},
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"kb {' '.join(args)} failed: {stderr.strip()}")
    return Run(seconds, usage.ru_maxrss / 1024)


def median_run(config: Path, times: int, *args: str) -> Run:
    runs = [run_kb(config, *args) for _ in range(times)]
    return Run(statistics.median(r.seconds for r in runs), max(r.peak_rss_mb for r in runs))


def write_config(path: Path, vault: Path, url: str) -> None:
    path.write_text(
        'owner_name = "Sam Writer"\n'
        f"[database]\nurl = {url!r}\n"
        f'[[vaults]]\nname = "bench"\npath = {str(vault)!r}\npersonal = ["Journal/**"]\n'
        '[llm]\nprovider = "fake"\nchat_model = "fake-chat"\nembed_model = "hash-256"\n'
        '[context]\nsummaries = "structure"\n'
    )


def chunk_count(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM chunks").fetchone()
    return int(row[0]) if row else 0


def measure(notes: int, seed: int, data_dir: Path, server: str) -> dict[str, float]:
    vault = data_dir / f"vault-{notes}-{seed}"
    if not (vault / ".complete").exists():
        vaultgen.generate(vault, notes, seed)
        (vault / ".complete").touch()
    name = f"kb_writes_{notes}_{os.getpid()}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = db.database_on(server, name)
    config = data_dir / f"kb-{notes}.toml"
    write_config(config, vault, url)
    try:
        first = run_kb(config, "index")
        chunks = chunk_count(url)
        unchanged = median_run(config, 3, "index")
        stamp = time.time_ns()
        for path in vault.rglob("*.md"):
            os.utime(path, ns=(stamp, stamp))
        touched = run_kb(config, "index")
        figures = {
            "notes": notes,
            "chunks": chunks,
            "first index s": first.seconds,
            "chunks/s": chunks / first.seconds,
            "first index peak RSS MB": first.peak_rss_mb,
            "unchanged index s": unchanged.seconds,
            "touched index s": touched.seconds,
        }
        for mode in ("vector", "text", "hybrid"):
            figures[f"query {mode} s"] = median_run(config, 5, "query", QUERY, "-m", mode).seconds
        figures["--help s"] = median_run(config, 5, "--help").seconds
        return figures
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--data-dir", type=Path, default=Path("~/.cache/kb/bench/writes").expanduser()
    )
    args = parser.parse_args(argv)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    # This process holds the server for the whole run: each kb process finds it running.
    server = os.environ.get("KB_BENCH_DATABASE_URL") or db.embedded_url(args.data_dir)
    results = [measure(n, args.seed, args.data_dir, server) for n in args.notes]
    keys = list(results[0])
    print("| measure | " + " | ".join(f"{r['notes']:,} notes" for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for key in keys[1:]:
        cells = [f"{r[key]:,.0f}" if r[key] >= 100 else f"{r[key]:.2f}" for r in results]
        print(f"| {key} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
