"""How long until a new vault is searchable: by its words (`kb index` returns), then by its
meaning (every text has its vector), against the time the embedding server alone needs for
the same texts (the floor of the second: every text must be embedded once).

A vault is indexed into an empty database with kb's default settings (three speeds): every
note stored with its structural context and its words, queued for its vectors and its LLM
context, with no chat call at all (the chat model given to kb fails the run if it is asked
anything); each note is then looked for by its words. Then the embedding queue is drained
(the vectors, no LLM context), then the embedding server is sent the same texts,
`llm.embed_batch` at a time, and nothing else, twice. All are timed in the same round, one
after the other, so a machine whose load drifts weighs on them alike.

    .venv/bin/python bench/searchable.py [VAULT] [--rounds 2]
    .venv/bin/python bench/searchable.py --generated 2000 --delay 0.25

Models: a MiniLM llama.cpp server of `scripts/test-models` is started for the run (it
must be installed: `scripts/test-models install`), unless KB_EMBED_HOST names one already
running (`eval "$(scripts/test-models start)"`); with `--delay`, a stand-in that takes that
many seconds a request (hashed bag-of-words vectors). `--generated N`: a vault of N notes
from bench/vaultgen.py instead. The database: an embedded PostgreSQL in `--data-dir`, or
KB_BENCH_DATABASE_URL.
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
sys.path.insert(0, str(ROOT / "bench"))

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

import modelstack  # noqa: E402
import vaultgen  # noqa: E402
from kb import db  # noqa: E402
from kb.config import Config, parse_config  # noqa: E402
from kb.container import Container, open_store  # noqa: E402
from kb.llm import make_embedder  # noqa: E402
from kb.llm.fake import FakeEmbedder  # noqa: E402
from kb.models.base import Embedder, Prompt, TokenUsage  # noqa: E402
from kb.services.searching import SearchRequest  # noqa: E402
from kb.store import (  # noqa: E402
    NO_FILTER,
    SearchFilter,
    Store,
    databases,
)

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


class Delayed(FakeEmbedder):
    """A stand-in embedding server that takes `delay` seconds a request, however many
    texts it holds (as a GPU's or a remote server's round trip does)."""

    def __init__(self, delay: float) -> None:
        super().__init__("hash-384")
        self.delay = delay

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        time.sleep(self.delay)
        return super().embed(texts)


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
    texts: int  # distinct texts embedded: chunks' and passages'
    queued: int
    text_seconds: float  # from the start of `kb index` until it returned
    words_found: int  # notes found by a search for their own words
    vector_seconds: float  # kb's time until every text had its vector (the searches apart)
    index_seconds: float  # then, until the vector indexes were built again
    embed_first: float
    embed_second: float
    busy: float  # share of the vectors' time the embedding server had a request
    in_flight: float  # requests in flight, on average over the vectors' time

    @property
    def floor(self) -> float:
        return (self.embed_first + self.embed_second) / 2

    @property
    def ratio(self) -> float:
        return self.vector_seconds / self.floor


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
    return databases.database_on(admin_url, name)


def embed_alone(embedder: Embedder, texts: Sequence[str], batch: int, concurrency: int) -> float:
    """Seconds the server takes to embed `texts` as kb sends them: `batch` per request,
    `concurrency` requests in flight."""
    batches = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for vectors, sent in zip(pool.map(embedder.embed, batches), batches, strict=True):
            assert len(vectors) == len(sent)
    return time.perf_counter() - started


def found_by_words(parts: Container) -> int:
    """How many notes a full-text search finds by their own words: each note's first
    chunk's opening words, asked for in its folder, the note among the results."""
    with parts.store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT d.path, left(c.content, 80) AS words FROM documents d"
            "  JOIN chunks c ON c.document_id = d.id AND c.position = 0"
        ).fetchall()
    searches = parts.search_service()
    found = 0
    for r in rows:
        folder = r["path"].rpartition("/")[0]
        only = SearchFilter(path_prefix=folder + "/") if folder else NO_FILTER
        request = SearchRequest(r["words"], top_k=50, mode="text", filters=only)
        found += any(h.path == r["path"] for h in searches.search(request).hits)
    return found


@contextlib.contextmanager
def queue_emptied(store: Store) -> Iterator[list[float]]:
    """When the last note of the embedding queue had its vectors written (perf_counter),
    in the list yielded: each note is found by its meaning from then on, while the workers
    go on to build the vector indexes they dropped for the bulk load."""
    emptied: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            if store.queue.backlog()[0] == 0:
                emptied.append(time.perf_counter())
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield emptied
    finally:
        done.set()
        watcher.join()


def one_round(config: Config, url: str, embedder: Embedder) -> Round:
    with open_store(url) as store:
        # Warm the server (model pages, first-request set-up) before anything is timed.
        embedder.embed(["warm up"])
        watched = Watched(embedder)
        parts = Container(config, store, chat=NoChat(), embedder=watched)
        watched.reset()
        started = time.perf_counter()
        report = parts.sync()
        text_seconds = time.perf_counter() - started
        words = found_by_words(parts)
        vectors_started = time.perf_counter()
        watched.reset()
        with queue_emptied(store) as emptied:
            parts.worker(until_empty=True, fail_fast=True, speeds=("embed",)).run()
        drained = time.perf_counter() - vectors_started
        written = (emptied[0] if emptied else time.perf_counter()) - vectors_started
        # The search for each note's words above is the benchmark's, not kb's: left out.
        vector_seconds = text_seconds + written
        watched.mark()
        status = store.state.status()
        assert status.embedded == status.chunks, "every chunk must have its vector"
        with store.pool.connection() as conn:
            rows = conn.execute(
                "SELECT embed_text AS t FROM chunks UNION SELECT text FROM passages"
            ).fetchall()
        texts = [r["t"] for r in rows]
        llm = config.llm
        first = embed_alone(embedder, texts, llm.embed_batch, llm.concurrency)
        second = embed_alone(embedder, texts, llm.embed_batch, llm.concurrency)
        return Round(
            notes=report.indexed,
            chunks=status.chunks,
            texts=len(texts),
            queued=store.queue.status().items,
            text_seconds=text_seconds,
            words_found=words,
            vector_seconds=vector_seconds,
            index_seconds=drained - written,
            embed_first=first,
            embed_second=second,
            busy=watched.busy / drained,
            in_flight=watched.load / drained,
        )


@contextlib.contextmanager
def embedding_server(delay: float | None) -> Iterator[None]:
    """The MiniLM server named by the environment, or one started for the run (none for a
    stand-in that sleeps `delay`)."""
    if delay is not None or os.environ.get("KB_EMBED_HOST"):
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
    parser.add_argument(
        "--generated", type=int, default=None, help="a generated vault of N notes instead"
    )
    parser.add_argument(
        "--delay", type=float, default=None, help="a stand-in embedder: seconds a request"
    )
    args = parser.parse_args(argv)

    with contextlib.ExitStack() as stack:
        data_dir = args.data_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stack.enter_context(embedding_server(args.delay))
        vault = args.vault
        if args.generated is not None:
            vault = data_dir / f"generated-{args.generated}"
            if not (vault / ".complete").exists():
                vaultgen.generate(vault, args.generated)
                (vault / ".complete").touch()
        elif args.notes is not None:
            vault = data_dir / "vault"
            for note in sorted(args.vault.rglob("*.md"))[: args.notes]:
                target = vault / note.relative_to(args.vault)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(note, target)
        config = config_for(vault, data_dir)
        admin = os.environ.get("KB_BENCH_DATABASE_URL") or db.embedded_url(data_dir)
        embedder: Embedder = (
            make_embedder(config.llm) if args.delay is None else Delayed(args.delay)
        )
        where = config.llm.embed_host if args.delay is None else f"{args.delay} s a request"
        print(
            f"embeddings {embedder.name} ({where}), batch {config.llm.embed_batch}, "
            f"{config.llm.concurrency} in flight",
            file=sys.stderr,
        )
        rounds = []
        for i in range(args.rounds):
            url = fresh_database(admin, f"bench_searchable_{i}")
            rounds.append(one_round(config, url, embedder))
            r = rounds[-1]
            print(
                f"round {i + 1}: by words {r.text_seconds:.1f} s ({r.words_found} of {r.notes}"
                f" notes found), by meaning {r.vector_seconds:.1f} s (vector indexes built"
                f" {r.index_seconds:.1f} s after), embedding alone "
                f"{r.embed_first:.1f} / {r.embed_second:.1f} s, ratio {r.ratio:.2f}; the "
                f"server had a request {r.busy:.0%} of the vectors' time, {r.in_flight:.2f} in"
                " flight on average",
                file=sys.stderr,
            )
    r = rounds[0]
    print(
        f"\n{vault}: {r.notes} notes, {r.chunks} chunks, {r.texts} texts to embed,"
        f" {r.queued} queued for LLM context"
    )
    print(
        f"{'round':<6} {'by words':>9} {'found':>6} {'by meaning':>11} {'embedding alone':>16}"
        f" {'ratio':>6} {'server busy':>12} {'in flight':>10} {'indexes built':>14}"
    )
    for i, r in enumerate(rounds, 1):
        print(
            f"{i:<6} {r.text_seconds:>7.1f} s {r.words_found:>6} {r.vector_seconds:>9.1f} s"
            f" {r.floor:>14.1f} s {r.ratio:>6.2f} {r.busy:>12.0%} {r.in_flight:>10.2f}"
            f" {r.index_seconds:>11.1f} s after"
        )
    print(f"median ratio {statistics.median(r.ratio for r in rounds):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
