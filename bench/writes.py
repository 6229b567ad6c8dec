"""How fast kb writes, and how little it holds: the fast path with an instant model.

    .venv/bin/python bench/writes.py [--notes 1000 10000] [--seed 0]

For each size, a generated vault (bench/vaultgen.py) is indexed from nothing into a fresh
database with the offline provider (instant summaries and vectors) at the structure level,
the path every note takes before its LLM enrichment. Each step is a real `kb` process
against a database server that is already running (a process holds the embedded server, as
a running daemon does), timed as a whole (with the 10 ms of the small launcher that reads
its peak RSS from the kernel):

- first index: wall time (every note found by its words), chunks per second, peak RSS;
  then `kb index --wait`, which embeds them (their vectors), and chunks per second to both;
- unchanged vault: `kb index` again (median of 3);
- every note touched (new mtime, same bytes, as a sync tool does): `kb index`;
- `kb query` in each mode (median of 5; the offline embedder takes no time), alone and
  with a `kb daemon` running, which answers it (kb.daemon.query_socket);
- the daemon's peak RSS, through its start-up sync of the vault and those queries;
- `kb --help`.

Vaults are cached under --data-dir; each run uses a new database.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import vaultgen  # noqa: E402
from kb import db  # noqa: E402
from kb.daemon.query_socket import socket_path  # noqa: E402
from kb.locations import config_identity  # noqa: E402
from kb.store import databases  # noqa: E402

KB = [sys.executable, "-m", "kb"]
QUERY = "project meeting notes about the garden"


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_rss_mb: float


def kb_env(**extra: str) -> dict[str, str]:
    """The environment of a timed `kb` process: its modules' compiled bytecode is kept, as
    Python does by default for an installed kb, even where this shell turns that off
    (PYTHONDONTWRITEBYTECODE): compiling kb and its libraries again at every start would
    take about 0.4 s of each command here."""
    env = {**os.environ, "KB_CONFIG": "", **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


# Starts a command and writes its peak RSS (KiB) as the last line of stderr. The kernel's
# peak for a process counts the memory of the process that forked it, up to its exec: started
# from this one (which holds a generated vault), kb would be charged for it. A new
# interpreter is small.
_PEAK_RSS = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(f"\\n{usage.ru_maxrss}", file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_kb(config: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    """One `kb` process, timed as a whole with its peak RSS; fails loudly if kb does."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *KB, "--config", str(config), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env or kb_env(),
        check=False,
    )
    seconds = time.perf_counter() - started
    stderr, _, peak_kib = proc.stderr.decode().rstrip().rpartition("\n")
    if proc.returncode != 0:
        raise SystemExit(f"kb {' '.join(args)} failed: {stderr.strip()}")
    return Run(seconds, int(peak_kib) / 1024)


def median_run(config: Path, times: int, *args: str, env: dict[str, str] | None = None) -> Run:
    runs = [run_kb(config, *args, env=env) for _ in range(times)]
    return Run(statistics.median(r.seconds for r in runs), max(r.peak_rss_mb for r in runs))


@contextmanager
def daemon_up(config: Path) -> Iterator[tuple[dict[str, str], int]]:
    """A `kb daemon` on this config, answering queries once its start-up sync is done;
    yields the environment in which a `kb` process finds its socket, and its pid."""
    with tempfile.TemporaryDirectory(prefix="kbq-") as runtime:
        env = kb_env(XDG_RUNTIME_DIR=runtime)
        os.chmod(runtime, 0o700)
        sock = socket_path(config_identity(config, env), env)
        proc = subprocess.Popen(
            [*KB, "--config", str(config), "daemon"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            while not sock.exists():
                if proc.poll() is not None:
                    raise SystemExit("kb daemon exited before answering queries")
                time.sleep(0.1)
            yield env, proc.pid
        finally:
            proc.terminate()
            proc.wait(120)


def peak_rss_mb(pid: int) -> float:
    """A running process's peak RSS, from the kernel (Linux): the daemon is started by
    exec, so it is not charged with this process's memory."""
    status = Path(f"/proc/{pid}/status").read_text()
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(kib) / 1024


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
    url = databases.database_on(server, name)
    config = data_dir / f"kb-{notes}.toml"
    write_config(config, vault, url)
    try:
        first = run_kb(config, "index")
        vectors = run_kb(config, "index", "--wait")
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
            "vectors (index --wait) s": vectors.seconds,
            "chunks/s to vectors": chunks / (first.seconds + vectors.seconds),
            "vectors peak RSS MB": vectors.peak_rss_mb,
            "unchanged index s": unchanged.seconds,
            "touched index s": touched.seconds,
        }
        for mode in ("vector", "text", "hybrid"):
            figures[f"query {mode} s"] = median_run(config, 5, "query", QUERY, "-m", mode).seconds
        with daemon_up(config) as (env, pid):
            for mode in ("vector", "text", "hybrid"):
                served = median_run(config, 5, "query", QUERY, "-m", mode, env=env)
                figures[f"query {mode}, daemon up s"] = served.seconds
            figures["daemon peak RSS MB"] = peak_rss_mb(pid)
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
