"""Do `kb worker` processes scale out on one PostgreSQL?

For each number of workers N (1, 2, 4, 8): a fresh database, N `kb worker` processes
started and registered, then a vault of `--notes` one-chunk notes indexed (each stored
searchable and queued for its LLM context), and the time until the workers have drained
the queue. The model server is a local stand-in for an OpenAI-compatible one: every chat
answer takes `--delay` seconds (2 s, a small local model's pace), embeddings are instant.
Each worker enriches one note at a time with one model call in flight (a one-chunk note
costs one call: its file summary and its chunk summary together).

Checked for each N: every note finished exactly once (`enrichment_done` is keyed by the
item's ticket), no prompt answered twice by the model server, the queue empty, and
`kb verify` clean.

    .venv/bin/python bench/workers.py [--notes 64] [--delay 2] [--workers 1 2 4 8]

The database: an embedded PostgreSQL in a temporary folder, or KB_BENCH_DATABASE_URL.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from kb import db
from kb.config import load_config
from kb.container import Container
from kb.llm.fake import FakeEmbedder
from kb.prompting.prompts import LINES_CUE
from kb.store import databases

ROOT = Path(__file__).resolve().parents[1]
DIMENSIONS = 64


class ModelServer:
    """An OpenAI-compatible chat and embedding server that answers every chat request after
    `delay` seconds, many at once, and counts the prompts it was sent."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.prompts: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.embedder = FakeEmbedder(f"hash-{DIMENSIONS}")
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def reset(self) -> None:
        with self.lock:
            self.prompts.clear()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path.endswith("/embeddings"):
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = [
                        {"object": "embedding", "index": i, "embedding": v}
                        for i, v in enumerate(server.embedder.embed(texts))
                    ]
                    self._send({"object": "list", "data": data, "model": body["model"]})
                    return
                digest = hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest()
                with server.lock:
                    server.prompts[digest] += 1
                time.sleep(server.delay)
                answer = _answer(body["messages"][-1]["content"], digest)
                self._send(
                    {
                        "id": "stand-in",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": answer},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                )

            def _send(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()


def write_vault(root: Path, notes: int) -> None:
    """`notes` short notes, each its own words (no two prompts alike), one chunk each."""
    for i in range(notes):
        folder = root / f"folder{i % 8}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note {i:04d}.md").write_text(
            f"# Note {i}\n\nNote number {i} is about topic{i} and subject{i * 7 % 101}, "
            f"written for the worker benchmark.\n"
        )


def write_config(path: Path, vault: Path, server: ModelServer) -> None:
    path.write_text(
        f'owner_name = "Bench Owner"\n\n[[vaults]]\nname = "bench"\npath = "{vault}"\n\n'
        f'[llm]\nprovider = "openai"\nhost = "{server.url}"\nchat_model = "stand-in"\n'
        f'embed_model = "hash-{DIMENSIONS}"\nconcurrency = 1\nretries = 0\n\n'
        "[enrich]\nconcurrency = 1\n"
    )


@dataclass
class Run:
    workers: int
    notes: int
    seconds: float  # first claim to last note finished, as the database recorded them
    finished: int  # rows in enrichment_done
    calls: int
    repeated_prompts: int
    left: int
    verify_exit: int

    @property
    def rate(self) -> float:
        return self.notes / self.seconds


def fresh_database(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        conn.execute(drop)
    return databases.database_on(admin_url, name)


def kb_command(config: Path, url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "kb", "--config", str(config), *args]


def kb_env(url: str) -> dict[str, str]:
    return {**os.environ, "KB_DATABASE_URL": url, "PYTHONPATH": str(ROOT / "src")}


@contextlib.contextmanager
def workers(config: Path, url: str, n: int, logs: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = []
    try:
        for i in range(n):
            with (logs / f"worker-{n}-{i}.log").open("wb") as log:
                procs.append(
                    subprocess.Popen(
                        kb_command(config, url, "worker"),
                        env=kb_env(url),
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=log,
                    )
                )
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(60)


def one_run(config_path: Path, admin: str, n: int, server: ModelServer, logs: Path) -> Run:
    url = fresh_database(admin, f"bench_workers_{n}")
    config = load_config(config_path, env={})
    with Container.open(config, url=url) as parts:
        with parts.indexer() as indexer:
            indexer.space.ensure()  # the vector index made before workers start
        with workers(config_path, url, n, logs):
            while sum(w.alive for w in parts.store.workers.listed()) < n:
                time.sleep(0.2)
            server.reset()
            report = parts.sync()
            assert report.queued == report.indexed, "every note waits for its LLM context"
            while parts.store.queue.status().items:
                time.sleep(0.5)
        with parts.store.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) AS n,"
                "       extract(epoch FROM max(done_at) - min(claimed_at))::float AS span"
                "  FROM enrichment_done"
            ).fetchone()
        assert row is not None
        left = parts.store.queue.status().items
    verified = subprocess.run(
        kb_command(config_path, url, "verify"), env=kb_env(url), capture_output=True
    )
    with server.lock:
        calls = sum(server.prompts.values())
        repeated = sum(count - 1 for count in server.prompts.values())
    return Run(
        workers=n,
        notes=report.queued,
        seconds=row["span"],
        finished=row["n"],
        calls=calls,
        repeated_prompts=repeated,
        left=left,
        verify_exit=verified.returncode,
    )


def _answer(prompt: str, digest: str) -> str:
    """What a model keeps to: a sentence for each label the prompt ends with, or one. Each
    sentence has words of its own, as kb rejects a part that repeats another."""
    labels = re.findall(r"^(?:Note|Part \d+):$", prompt.rpartition(LINES_CUE)[2], re.M)
    return "\n".join(f"{label} {_sentence(digest + label)}" for label in labels or [""]).strip()


def _sentence(seed: str) -> str:
    letters = hashlib.sha256(seed.encode()).hexdigest()
    words = [
        "".join(chr(ord("a") + int(c, 16)) for c in letters[i : i + 6]) for i in range(0, 48, 6)
    ]
    return "This covers " + " ".join(words) + "."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=64)
    parser.add_argument("--delay", type=float, default=2.0, help="seconds per chat answer")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args(argv)

    runs: list[Run] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        ModelServer(args.delay) as server,
    ):
        root = Path(tmp)
        write_vault(root / "vault", args.notes)
        config = root / "kb.toml"
        write_config(config, root / "vault", server)
        admin = os.environ.get("KB_BENCH_DATABASE_URL") or db.embedded_url(root / "data")
        for n in args.workers:
            run = one_run(config, admin, n, server, root)
            runs.append(run)
            print(
                f"{n} workers: {run.notes} notes in {run.seconds:.1f} s, {run.rate:.3f} notes/s",
                file=sys.stderr,
                flush=True,
            )

    one = next((r.rate for r in runs if r.workers == 1), None)
    print(
        f"\n{args.notes} one-chunk notes, {args.delay:g} s per call, "
        "one note and one call at a time per worker"
    )
    header = (
        f"{'workers':>7} {'seconds':>8} {'notes/s':>8} {'vs N x 1':>9} {'finished':>9} "
        f"{'calls':>6} {'repeated':>9} {'left':>5} {'verify':>7}"
    )
    print(header)
    ok = True
    for r in runs:
        share = r.rate / (r.workers * one) if one else float("nan")
        clean = r.finished == r.notes and not r.repeated_prompts and not r.left
        ok = ok and clean and r.verify_exit == 0
        print(
            f"{r.workers:>7} {r.seconds:>8.1f} {r.rate:>8.3f} {share:>9.2f} {r.finished:>9} "
            f"{r.calls:>6} {r.repeated_prompts:>9} {r.left:>5} "
            f"{'clean' if r.verify_exit == 0 else 'DIFFERS':>7}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
