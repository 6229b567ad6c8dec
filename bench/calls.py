"""How many chat-model calls kb makes per note, and what they cost.

    .venv/bin/python bench/calls.py [VAULT] [--personal GLOB]
    .venv/bin/python bench/calls.py [VAULT] --real --path "Files and folders/"

VAULT defaults to the obsidian-help vault of the evaluation data
(../shared/eval/obsidian-help/vault). Every configuration indexes it from an empty index,
then once more, which must ask the model nothing (each output is cached under a hash of its
inputs):

- the vault as it is (no personal folder), then with `--personal` folders (default `**`:
  every note the owner's own, which asks for the most first-person rewrites);
- each with `context.batch_chunks` at its default (a short note's summaries in one call, a
  longer note's chunk summaries several to a call) and at 1 (every summary in a call of its
  own, as kb asked before it batched them).

By default the chat model is kb's counting fake (`kb.llm.fake`), which answers every prompt
format at once: the figures are calls, by task, per note and per chunk. With `--real` the
models come from the environment, as for kb (`eval "$(scripts/test-models start)"` for the
local llama.cpp stack), and the table adds seconds, prompt and output tokens and fallbacks;
`--path PREFIX` (repeatable: a folder or a note) or `--notes N` keep that run short, and
`--timeout` allows each request more time on a busy machine. The index lives in one database
of an embedded PostgreSQL in `--data-dir`, emptied before each configuration.

Each run is kb's two speeds as `kb index --wait` runs them: the notes are stored with their
structural context, then the enrichment queue is drained; the seconds are both together.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb import db
from kb.config import Config, parse_config
from kb.container import Container, open_store
from kb.indexing.enrich import Attempt
from kb.llm import make_chat, make_embedder
from kb.models.base import ChatModel, Embedder, Prompt
from kb.note_writing.events import FileEvent
from kb.store import Store, databases
from kb.vault.notes import Scope

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VAULT = ROOT.parent / "shared/eval/obsidian-help/vault"
OWNER = "Alex Doe"


class CountingChat:
    """A chat model that counts its calls by task, for providers that do not."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: Counter[str] = Counter()
        # The inner model's own tally, which it adds to as it answers.
        self.usage = inner.usage

    def complete(self, prompt: Prompt) -> str:
        self.calls[prompt.task] += 1
        return self.inner.complete(prompt)

    def stream(self, prompt: Prompt) -> Iterator[str]:
        self.calls[prompt.task] += 1
        return self.inner.stream(prompt)


@dataclass
class Row:
    label: str
    notes: int = 0
    chunks: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    again: int = 0  # calls of the second run, which must be 0
    seconds: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    fallbacks: int = 0

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def make_config(
    vault: Path,
    data_dir: Path,
    personal: Sequence[str],
    batch: int,
    timeout: float,
    env: dict[str, str],
    writes: Sequence[str] = ("summaries",),
) -> Config:
    raw: dict[str, Any] = {
        "owner_name": OWNER,
        "data_dir": str(data_dir),
        "vaults": [{"name": "v", "path": str(vault), "personal": list(personal)}],
        "context": {
            "batch_chunks": batch,
            "writes": list(writes),
            # The model's voices are for the paragraphs that speak in them.
            "passages": "paragraphs" if "voices" in writes else "none",
        },
        "llm": {"timeout": timeout},
    }
    return parse_config(raw, base_dir=Path.cwd(), env=env)


def measure(
    label: str,
    config: Config,
    store: Store,
    chat: ChatModel,
    embedder: Embedder,
    files: frozenset[str] | None,
) -> Row:
    """Index into an empty index, then again; what the first run cost."""
    row = Row(label)
    counting = CountingChat(chat)
    parts = Container(config, store, chat=counting, embedder=embedder)

    def indexed(event: FileEvent) -> None:
        if event.action == "indexed":
            row.notes += 1
            row.chunks += event.chunks

    def enriched(attempt: Attempt) -> None:
        row.fallbacks += attempt.fallbacks
        print(f"  {label}: {counting.calls.total()} calls", file=sys.stderr)

    usage = (chat.usage.prompt_tokens, chat.usage.output_tokens)
    started = time.perf_counter()
    _sync(parts, files, indexed, enriched)
    row.seconds = time.perf_counter() - started
    row.calls = Counter(counting.calls)
    row.prompt_tokens = chat.usage.prompt_tokens - usage[0]
    row.output_tokens = chat.usage.output_tokens - usage[1]
    counting.calls.clear()
    _sync(parts, files, lambda event: None, lambda attempt: None)
    row.again = counting.calls.total()
    return row


def _sync(
    parts: Container,
    files: frozenset[str] | None,
    indexed: Callable[[FileEvent], None],
    enriched: Callable[[Attempt], None],
) -> None:
    with parts.indexer(on_event=indexed) as indexer:
        if files is None:
            indexer.sync()
        else:
            indexer.space.ensure()
            indexer.sync_scope(parts.config.vaults[0], Scope(files=files))
    parts.drain(on_attempt=enriched)


def chosen_notes(vault: Path, prefixes: Sequence[str], notes: int | None) -> frozenset[str] | None:
    """The notes a run indexes: those whose path starts with one of `prefixes`, at most the
    first `notes` of them in path order; None for the whole vault."""
    if not prefixes and notes is None:
        return None
    paths = sorted(
        p.relative_to(vault).as_posix()
        for p in vault.rglob("*.md")
        if not any(part.startswith(".") for part in p.relative_to(vault).parts)
    )
    if prefixes:
        paths = [p for p in paths if p.startswith(tuple(prefixes))]
    return frozenset(paths[:notes] if notes is not None else paths)


def print_table(rows: Sequence[Row], real: bool) -> None:
    tasks = sorted({task for row in rows for task in row.calls})
    head = f"{'configuration':34}{'notes':>6}{'chunks':>7}{'calls':>7}{'/note':>7}{'/chunk':>7}"
    head += "".join(f"{t:>17}" for t in tasks) + f"{'again':>6}"
    if real:
        head += f"{'seconds':>9}{'s/note':>8}{'prompt tok':>11}{'output tok':>11}{'fallbacks':>10}"
    print(head)
    for r in rows:
        line = (
            f"{r.label:34}{r.notes:6}{r.chunks:7}{r.total:7}{r.total / max(1, r.notes):7.2f}"
            f"{r.total / max(1, r.chunks):7.2f}"
        )
        line += "".join(f"{r.calls[t]:17}" for t in tasks) + f"{r.again:6}"
        if real:
            line += (
                f"{r.seconds:9.0f}{r.seconds / max(1, r.notes):8.1f}{r.prompt_tokens:11}"
                f"{r.output_tokens:11}{r.fallbacks:10}"
            )
        print(line)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path, nargs="?", default=DEFAULT_VAULT)
    parser.add_argument(
        "--personal",
        action="append",
        help='personal folder glob for the second configuration (repeatable; default "**")',
    )
    parser.add_argument("--real", action="store_true", help="models from the environment")
    parser.add_argument(
        "--path", action="append", default=[], help="only notes whose path starts with it"
    )
    parser.add_argument("--notes", type=int, help="only the first N notes, in path order")
    parser.add_argument(
        "--batch", type=int, nargs="+", default=[6, 1], help="batch_chunks values (6 1)"
    )
    parser.add_argument(
        "--no-personal", action="store_true", help="only the vault as it is, no personal run"
    )
    parser.add_argument(
        "--personal-only", action="store_true", help="only the run with personal folders"
    )
    parser.add_argument(
        "--writes",
        nargs="+",
        default=["summaries"],
        help="what the model writes in each configuration (context.writes), comma-separated: "
        "e.g. summaries voices,statements voices,questions (default summaries)",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="llm.timeout of every run (120 s)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("KB_BENCH_DIR", Path.home() / ".cache/kb/bench")),
        help="where the benchmark's PostgreSQL lives",
    )
    args = parser.parse_args(argv)
    if not args.vault.is_dir():
        parser.error(f"no vault at {args.vault}")
    env = dict(os.environ)
    if not args.real:
        env |= {"KB_PROVIDER": "fake", "KB_CHAT_MODEL": "fake-chat", "KB_EMBED_MODEL": "hash-256"}
    files = chosen_notes(args.vault, args.path, args.notes)
    setups = [] if args.personal_only else [("no personal folder", ())]
    if not args.no_personal:
        personal = tuple(args.personal or ["**"])
        setups.append((f"personal {', '.join(personal)}", personal))

    base = make_config(args.vault, args.data_dir, (), args.batch[0], args.timeout, env)
    chat = make_chat(base.llm)
    embedder = make_embedder(base.llm)
    print(f"chat {base.llm.chat_model}, embeddings {base.llm.embed_model}", file=sys.stderr)
    rows = []
    server = db.embedded_url(args.data_dir)
    for name, personal in setups:
        for writes in args.writes:
            for batch in args.batch:
                config = make_config(
                    args.vault,
                    args.data_dir,
                    personal,
                    batch,
                    args.timeout,
                    env,
                    writes.split(","),
                )
                label = f"{name}, batch_chunks {batch}"
                if args.writes != ["summaries"]:
                    label += f", writes {writes}"
                # A new database each time: no output of an earlier configuration is cached.
                with open_store(databases.empty_database(server, "bench_calls")) as store:
                    rows.append(measure(label, config, store, chat, embedder, files))
    print(f"\n{args.vault}" + (f" ({len(files)} notes)" if files is not None else ""))
    print_table(rows, args.real)
    return 0


if __name__ == "__main__":
    sys.exit(main())
