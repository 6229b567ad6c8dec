"""The Obsidian pane's wait: how long `kb serve` takes to answer `/api/related` for a note
(its related notes, unlinked, and its links both ways: all the pane asks when the active
note changes), over a synthetic vault of --notes notes (bench/vaultgen.py) indexed with the
offline provider at the structure level (no LLM context: the related notes come from names,
links and vectors). Target: 150 ms at 10,000 notes.

    .venv/bin/python bench/pane.py --notes 10000 [--data-dir DIR] [--samples 100]

The vault and its index are kept in --data-dir (a second run with the same --notes reuses
them); --url measures a `kb serve` already running instead (its first vault's notes, by the
paths --vault names). Each note is asked once, in a fixed random order, after one call that
warms the server; each time is the request to its last byte, as the plugin's requestUrl
waits for it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from serve import free_port, kb_command
from vaultgen import generate

ROOT = Path(__file__).resolve().parents[1]


def prepared(folder: Path, notes: int, seed: int) -> Path:
    """The vault generated and indexed (vectors included), once per size and seed."""
    vault = folder / f"vault-{notes}-{seed}"
    config = folder / f"kb-{notes}-{seed}.toml"
    if not config.exists():
        generate(vault, notes, seed)
        (vault / ".obsidian").mkdir(exist_ok=True)
        config.write_text(
            f'owner_name = "Alex Doe"\ndata_dir = "{folder / f"data-{notes}-{seed}"}"\n\n'
            f'[[vaults]]\nname = "bench"\npath = "{vault}"\npersonal = ["Journal/**"]\n\n'
            # No LLM context: the pane's candidates come from names, links and vectors.
            '[context]\nsummaries = "structure"\n\n'
            '[llm]\nprovider = "fake"\nchat_model = "offline-digest"\nembed_model = "hash-256"\n'
        )
    started = time.monotonic()
    subprocess.run(kb_command(config, "index", "--wait"), check=True, capture_output=True)
    print(f"index: {time.monotonic() - started:.0f} s", file=sys.stderr)
    return config


@contextmanager
def served(config: Path) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        kb_command(config, "serve", "--port", str(port)), stderr=subprocess.PIPE, text=True
    )
    assert server.stderr is not None
    line = server.stderr.readline()
    if not line.startswith("kb serve: "):
        raise SystemExit(line + server.stderr.read())
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def related_ms(url: str, vault: str, path: str) -> tuple[float, int]:
    """One pane's call: milliseconds to the last byte, and how many related notes came."""
    query = urllib.parse.urlencode({"vault": vault, "path": path, "top_k": 10, "unlinked": 1})
    started = time.perf_counter()
    with urllib.request.urlopen(f"{url}/api/related?{query}", timeout=60) as answer:
        body = answer.read()
    took = (time.perf_counter() - started) * 1000
    return took, len(json.loads(body)["related"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples", type=int, default=100, help="notes asked for")
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".kb-data-bench-pane")
    parser.add_argument("--url", help="a running kb serve to measure instead")
    parser.add_argument("--vault", type=Path, help="with --url: the vault's folder")
    args = parser.parse_args()
    if args.url:
        if args.vault is None:
            parser.error("--url needs --vault")
        paths = [p.relative_to(args.vault).as_posix() for p in args.vault.rglob("*.md")]
        vault_name = json.load(urllib.request.urlopen(f"{args.url}/api/vaults"))["vaults"][0]
        measure(args.url, vault_name["name"], paths, args.samples)
        return 0
    args.data_dir.mkdir(parents=True, exist_ok=True)
    config = prepared(args.data_dir, args.notes, args.seed)
    vault = args.data_dir / f"vault-{args.notes}-{args.seed}"
    paths = [p.relative_to(vault).as_posix() for p in vault.rglob("*.md")]
    with served(config) as url:
        measure(url, "bench", paths, args.samples)
    return 0


def measure(url: str, vault: str, paths: list[str], samples: int) -> None:
    chosen = random.Random(0).sample(sorted(paths), min(samples, len(paths)))
    first, _ = related_ms(url, vault, chosen[0])  # the first call loads what a search loads
    times, found = [], []
    for path in chosen:
        took, count = related_ms(url, vault, path)
        times.append(took)
        found.append(count)
    times.sort()
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    print(
        f"| {len(paths):,} | {len(times)} | {statistics.median(times):.0f} | {p95:.0f} | "
        f"{times[-1]:.0f} | {first:.0f} | {statistics.mean(found):.1f} |"
    )


if __name__ == "__main__":
    sys.exit(main())
