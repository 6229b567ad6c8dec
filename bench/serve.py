"""How fast `kb serve` answers a search page, warm: the example vault's questions, each asked
`--rounds` times of one running `kb serve`, timed from request to the last byte of the page.

    .venv/bin/python bench/serve.py [--config examples/kb-offline.toml] [--rounds 5]

The config's vault is indexed first (`kb index --wait`); the default, the offline provider,
needs no model server, so the figure is kb's own: the search, the marking of matched words,
the notes' facts and the page. With examples/kb.toml it includes the embedding server's
time for each question.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "examples" / "eval" / "queries.jsonl"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kb_command(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "kb", "--config", str(config), *args]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "examples" / "kb-offline.toml")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    subprocess.run(kb_command(args.config, "index", "--wait"), check=True, capture_output=True)
    questions = [json.loads(line)["query"] for line in QUESTIONS.read_text().splitlines()]
    port = free_port()
    server = subprocess.Popen(
        kb_command(args.config, "serve", "--port", str(port)),
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    assert server.stderr is not None
    line = server.stderr.readline()
    if not line.startswith("kb serve: "):
        raise SystemExit(line + server.stderr.read())
    base = f"http://127.0.0.1:{port}/?"
    try:
        urllib.request.urlopen(base + "q=warm").read()  # the first search loads the models
        timings: list[float] = []
        for _ in range(args.rounds):
            for question in questions:
                started = time.perf_counter()
                with urllib.request.urlopen(base + urllib.parse.urlencode({"q": question})) as r:
                    r.read()
                timings.append(time.perf_counter() - started)
    finally:
        server.terminate()
        server.wait(timeout=30)
    timings.sort()
    p95 = timings[max(0, round(0.95 * len(timings)) - 1)]
    print(
        f"{len(timings)} search pages ({len(questions)} questions x {args.rounds}): "
        f"median {statistics.median(timings) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
        f"max {timings[-1] * 1000:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
