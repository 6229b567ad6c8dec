"""How long until a new vault is fully searchable, against the time the embedding server
alone needs for the same texts (the floor: every chunk must be embedded once).

A vault is indexed into an empty database with kb's default settings (LLM context, two
speeds): every note stored and embedded with its structural context and queued for its LLM
context, with no chat call at all (the chat model given to kb fails the run if it is asked
anything). Then the embedding server is sent the same texts, `llm.embed_batch` at a time,
and nothing else, twice. All three are timed in the same round, one after the other, so a
machine whose load drifts weighs on them alike.

    .venv/bin/python bench/searchable.py [VAULT] [--rounds 2]

Models: a MiniLM llama.cpp server of `scripts/test-models` is started for the run (it
must be installed: `scripts/test-models install`), unless KB_EMBED_HOST names one already
running (`eval "$(scripts/test-models start)"`). The database: an embedded PostgreSQL in
`--data-dir`, or KB_BENCH_DATABASE_URL.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

import modelstack  # noqa: E402
from kb import db  # noqa: E402
from kb.config import Config, parse_config  # noqa: E402
from kb.container import Container, open_store  # noqa: E402
from kb.llm import make_embedder  # noqa: E402
from kb.llm.base import Embedder, Prompt, TokenUsage  # noqa: E402

DEFAULT_VAULT = ROOT.parent / "shared/eval/obsidian-help/vault"


class NoChat:
    """The chat model of a run that must not need one."""

    name = "no-chat"

    def __init__(self) -> None:
        self.usage = TokenUsage()

    def complete(self, prompt: Prompt) -> str:
        raise AssertionError(f"the chat model was asked for a {prompt.task} while indexing")

    def stream(self, prompt: Prompt) -> Iterator[str]:
        raise AssertionError("the chat model was asked to stream while indexing")


class Watched:
    """An embedder that keeps track of how many of its requests are in flight, over time:
    whether kb kept the server busy."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self._lock = threading.Lock()
        self._in_flight = 0
        self._since = time.perf_counter()
        self.busy = 0.0  # seconds with at least one request in flight
        self.load = 0.0  # requests in flight, integrated over time

    def mark(self, change: int = 0) -> None:
        with self._lock:
            now = time.perf_counter()
            elapsed = now - self._since
            self.busy += elapsed if self._in_flight else 0.0
            self.load += elapsed * self._in_flight
            self._in_flight += change
            self._since = now

    def reset(self) -> None:
        with self._lock:
            self._since, self.busy, self.load = time.perf_counter(), 0.0, 0.0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.mark(+1)
        try:
            return self.inner.embed(texts)
        finally:
            self.mark(-1)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


@dataclass
class Round:
    notes: int
    chunks: int
    queued: int
    kb_seconds: float
    embed_first: float
    embed_second: float
    busy: float  # share of kb's time the embedding server had a request
    in_flight: float  # requests in flight, on average over kb's time

    @property
    def floor(self) -> float:
        return (self.embed_first + self.embed_second) / 2

    @property
    def ratio(self) -> float:
        return self.kb_seconds / self.floor


def config_for(vault: Path, data_dir: Path) -> Config:
    raw = {
        "owner_name": "Bench Owner",
        "data_dir": str(data_dir),
        "vaults": [{"name": "vault", "path": str(vault)}],
    }
    return parse_config(raw, base_dir=Path.cwd(), env=dict(os.environ))


def fresh_database(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        conn.execute(drop)
    return db.database_on(admin_url, name)


def embed_alone(embedder: Embedder, texts: Sequence[str], batch: int, concurrency: int) -> float:
    """Seconds the server takes to embed `texts` as kb sends them: `batch` per request,
    `concurrency` requests in flight."""
    batches = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for vectors, sent in zip(pool.map(embedder.embed, batches), batches, strict=True):
            assert len(vectors) == len(sent)
    return time.perf_counter() - started


def one_round(config: Config, url: str, embedder: Embedder) -> Round:
    with open_store(url) as store:
        # Warm the server (model pages, first-request set-up) before anything is timed.
        embedder.embed(["warm up"])
        watched = Watched(embedder)
        parts = Container(config, store, chat=NoChat(), embedder=watched)
        watched.reset()
        started = time.perf_counter()
        report = parts.sync()
        kb_seconds = time.perf_counter() - started
        watched.mark()
        status = store.state.status()
        assert status.embedded == status.chunks, "every chunk must be searchable"
        with store.pool.connection() as conn:
            rows = conn.execute("SELECT embed_text FROM chunks ORDER BY id").fetchall()
        texts = [r["embed_text"] for r in rows]
        llm = config.llm
        first = embed_alone(embedder, texts, llm.embed_batch, llm.concurrency)
        second = embed_alone(embedder, texts, llm.embed_batch, llm.concurrency)
        return Round(
            notes=report.indexed,
            chunks=status.chunks,
            queued=store.queue.status().items,
            kb_seconds=kb_seconds,
            embed_first=first,
            embed_second=second,
            busy=watched.busy / kb_seconds,
            in_flight=watched.load / kb_seconds,
        )


@contextlib.contextmanager
def embedding_server() -> Iterator[None]:
    """The MiniLM server named by the environment, or one started for the run."""
    if os.environ.get("KB_EMBED_HOST"):
        yield
        return
    stack = modelstack.Stack(modelstack.cache_dir())
    server = modelstack.spawn(stack, modelstack.EMBED_MODEL)
    os.environ.update(
        KB_PROVIDER="openai",
        KB_EMBED_HOST=server.url,
        KB_EMBED_MODEL=modelstack.EMBED_MODEL,
        KB_CHAT_HOST=server.url,  # never asked: the chat model here refuses every call
    )
    try:
        yield
    finally:
        modelstack.kill(server.pid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", nargs="?", type=Path, default=DEFAULT_VAULT)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument(
        "--notes", type=int, default=None, help="only the first N notes (in path order)"
    )
    args = parser.parse_args(argv)

    with contextlib.ExitStack() as stack:
        data_dir = args.data_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stack.enter_context(embedding_server())
        vault = args.vault
        if args.notes is not None:
            vault = data_dir / "vault"
            for note in sorted(args.vault.rglob("*.md"))[: args.notes]:
                target = vault / note.relative_to(args.vault)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(note, target)
        config = config_for(vault, data_dir)
        admin = os.environ.get("KB_BENCH_DATABASE_URL") or db.embedded_url(data_dir)
        embedder = make_embedder(config.llm)
        print(
            f"embeddings {config.llm.embed_model} at {config.llm.embed_host}, batch "
            f"{config.llm.embed_batch}, {config.llm.concurrency} in flight",
            file=sys.stderr,
        )
        rounds = []
        for i in range(args.rounds):
            url = fresh_database(admin, f"bench_searchable_{i}")
            rounds.append(one_round(config, url, embedder))
            r = rounds[-1]
            print(
                f"round {i + 1}: kb {r.kb_seconds:.1f} s, embedding alone "
                f"{r.embed_first:.1f} / {r.embed_second:.1f} s, ratio {r.ratio:.2f}; the "
                f"server had a request {r.busy:.0%} of kb's time, {r.in_flight:.2f} in flight "
                "on average",
                file=sys.stderr,
            )
    r = rounds[0]
    print(f"\n{args.vault}: {r.notes} notes, {r.chunks} chunks, {r.queued} queued for LLM context")
    print(
        f"{'round':<6} {'kb: searchable':>15} {'embedding alone':>16} {'ratio':>6} "
        f"{'server busy':>12} {'in flight':>10}"
    )
    for i, r in enumerate(rounds, 1):
        print(
            f"{i:<6} {r.kb_seconds:>13.1f} s {r.floor:>14.1f} s {r.ratio:>6.2f} "
            f"{r.busy:>12.0%} {r.in_flight:>10.2f}"
        )
    print(f"median ratio {statistics.median(r.ratio for r in rounds):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
