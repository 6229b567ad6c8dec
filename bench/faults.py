"""Fault injection too slow for the test suite: kb killed again and again, a model
server gone for a minute, and a vault folder kb cannot read, each run ending with `kb
verify` clean and nothing lost.

    .venv/bin/python bench/faults.py [--rounds 20] [--outage 60] [--notes 80] [--only NAME]

Four scenarios, each against an embedded PostgreSQL in a temporary folder and a local
model server that speaks Ollama's protocol (deterministic answers, a few milliseconds of
delay per call so that kills land in the middle of the work):

- `kb index` killed with SIGKILL at a random moment after random edits, then run again;
- `kb daemon` killed with SIGKILL at a random moment during a burst of edits, then started
  again and left to catch up;
- the model server gone (connections refused) for `--outage` seconds while a daemon sees
  a burst of edits, then back;
- a vault folder (or the vault itself) made unreadable (mode 000) under a running `kb
  daemon` that reconciles every two seconds, while the rest of the vault is edited, then
  readable again. Permissions do not bind root: run as root, kb runs as an unprivileged
  user made for it (tests/support/unprivileged.py), with its own data folder.

After each round `kb verify` must find the index equal to the vault, with no duplicate,
orphan or half-written rows. The summary table counts rounds, faults injected, restarts,
notes checked, rows verified, and anything lost (notes missing, stale or broken after the
run converged; for an unreadable folder, also any of its notes deleted or indexed again,
which would cost their model calls): that last column must be 0 everywhere. Exit status 1
if it is not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from kb.db import embedded_url  # noqa: E402
from kb.llm.fake import FakeEmbedder  # noqa: E402
from support.unprivileged import (  # noqa: E402
    Account,
    NoAccount,
    account,
    current,
    remove,
    run,
    start,
    workdir,
)

CONFIG = """\
owner_name = "Alex Doe"

[[vaults]]
name = "v"
path = "{vault}"
personal = ["Journal/**"]

[llm]
provider = "ollama"
host = "{host}"
chat_model = "stub-chat"
embed_model = "hash-64"
concurrency = 2
timeout = 10
retries = 1

[daemon]
debounce = 0.3
max_delay = 3.0
heartbeat = 0.5
shutdown_grace = 5.0
"""
WORDS = (
    "lighthouse harbour ferry granite lantern compass tide gull rope anchor sail keel "
    "mountain trail summit glacier ridge cabin stove kettle map boots rain fog"
).split()
CONVERGE_TIMEOUT = 420.0


# -- a model server ------------------------------------------------------------------------------


class ModelServer:
    """Ollama's /api/chat and /api/embed on a loopback port, which can go away and return."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.embedder = FakeEmbedder("hash-64")
        self.calls = 0
        self._server: ThreadingHTTPServer | None = None
        self.port = 0
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        self._server = server

    def down(self) -> None:
        """Gone: connections to the port are refused until up()."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        if "input" in body:
            return {"model": body["model"], "embeddings": self.embedder.embed(body["input"])}
        asked = body["messages"][-1]["content"]
        words = sorted({w for w in asked.lower().split() if w.isalpha() and len(w) > 3})[:6]
        return {
            "model": body["model"],
            "created_at": "2024-07-22T20:33:28.123648Z",
            "message": {"role": "assistant", "content": f"About {', '.join(words)}."},
            "done": True,
            "prompt_eval_count": len(asked.split()),
            "eval_count": 8,
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        models = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                models.calls += 1
                time.sleep(models.delay)
                data = json.dumps(models._answer(body)).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client was killed

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


# -- the vault -----------------------------------------------------------------------------------


class Vault:
    """Notes in a few folders, and random edits of every kind a person or a sync tool makes."""

    FOLDERS = ("Inbox", "Projects", "Journal", "Reference/Deep")

    def __init__(self, path: Path, rng: random.Random, notes: int) -> None:
        self.path = path
        self.rng = rng
        self.serial = 0
        # A folder its owner cannot read now: nobody edits in it.
        self.hidden: str | None = None
        for _ in range(notes):
            self.add()

    def _visible(self, path: Path) -> bool:
        return self.hidden is None or not path.is_relative_to(self.path / self.hidden)

    def notes(self) -> list[Path]:
        return sorted(p for p in self.path.rglob("*.md") if self._visible(p))

    def _text(self) -> str:
        self.serial += 1
        sections = [
            f"## Part {i}\n\n" + " ".join(self.rng.choices(WORDS, k=self.rng.randint(20, 80)))
            for i in range(self.rng.randint(1, 4))
        ]
        return f"# Note {self.serial}\n\n" + "\n\n".join(sections) + "\n"

    def add(self) -> None:
        folders = [f for f in self.FOLDERS if self._visible(self.path / f)]
        if not folders:
            return
        folder = self.path / self.rng.choice(folders)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{self.serial:05d}.md").write_text(self._text())

    def edit(self) -> None:
        if notes := self.notes():
            note = self.rng.choice(notes)
            note.write_text(note.read_text() + "\n" + " ".join(self.rng.choices(WORDS, k=30)))

    def delete(self) -> None:
        if notes := self.notes():
            self.rng.choice(notes).unlink()

    def rename(self) -> None:
        if notes := self.notes():
            note = self.rng.choice(notes)
            self.serial += 1
            note.rename(note.with_name(f"moved{self.serial:05d}.md"))

    def burst(self, edits: int) -> None:
        actions: list[Callable[[], None]] = [self.add, self.edit, self.edit, self.delete]
        actions.append(self.rename)
        for _ in range(edits):
            self.rng.choice(actions)()


# -- kb as a user runs it ------------------------------------------------------------------------


@dataclass
class Row:
    scenario: str
    rounds: int = 0
    faults: int = 0
    restarts: int = 0
    notes: int = 0
    rows: int = 0
    lost: int = 0


class Kb:
    def __init__(self, config: Path, env: dict[str, str], logs: Path, who: Account) -> None:
        self.config = config
        self.env = env
        self.logs = logs
        self.who = who

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "kb", "--config", str(self.config), *args]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run(self.who, self.command(*args), self.env, timeout=900)

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        return start(self.who, self.command(*args), self.env, self.logs / f"{name}.log")

    def verify(self) -> dict[str, Any]:
        result = self.run("verify", "--json")
        if result.returncode not in (0, 4):
            raise RuntimeError(f"kb verify failed: {result.stderr.strip()}")
        return json.loads(result.stdout)

    def converge(self, timeout: float = CONVERGE_TIMEOUT) -> dict[str, Any]:
        """Wait until verify is clean (a daemon is catching up), or return its last report."""
        deadline = time.monotonic() + timeout
        while True:
            report = self.verify()
            if report["in_sync"] or time.monotonic() > deadline:
                return report
            time.sleep(1.0)


def _kill(proc: subprocess.Popen[bytes]) -> bool:
    """SIGKILL if still running; True when the kill interrupted it."""
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    return True


def _count(row: Row, report: dict[str, Any]) -> None:
    row.rounds += 1
    row.notes += report["notes"]
    row.rows += report["rows"]
    row.lost += len(report["differences"])
    if report["differences"]:
        print(f"  {row.scenario}: not in sync: {report['differences'][:5]}", flush=True)


# -- the scenarios -------------------------------------------------------------------------------


def index_kills(kb: Kb, vault: Vault, rng: random.Random, rounds: int) -> Row:
    row = Row("SIGKILL of kb index")
    for _ in range(rounds):
        vault.burst(rng.randint(5, 25))
        proc = kb.start("index", "index")
        time.sleep(rng.uniform(0.3, 2.5))
        row.faults += _kill(proc)
        finished = kb.run("index")
        row.restarts += 1
        if finished.returncode != 0:
            print(f"  kb index after the kill: {finished.stderr.strip()[-300:]}", flush=True)
        _count(row, kb.verify())
    return row


def daemon_kills(kb: Kb, vault: Vault, rng: random.Random, rounds: int) -> Row:
    row = Row("SIGKILL of kb daemon")
    for _ in range(rounds):
        daemon = kb.start("daemon", "daemon")
        time.sleep(rng.uniform(0.5, 2.0))
        vault.burst(rng.randint(10, 40))
        time.sleep(rng.uniform(0.2, 3.0))
        row.faults += _kill(daemon)
        daemon = kb.start("daemon", "daemon")
        row.restarts += 1
        report = kb.converge()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
        _count(row, report)
    return row


def model_outage(kb: Kb, vault: Vault, models: ModelServer, seconds: float) -> Row:
    row = Row(f"model server gone {seconds:.0f} s")
    daemon = kb.start("daemon", "daemon")
    kb.converge()
    models.down()
    row.faults += 1
    down = time.monotonic()
    # A burst of edits through the first part of the outage.
    for _ in range(10):
        vault.burst(15)
        time.sleep(min(2.0, seconds / 20))
    time.sleep(max(0.0, seconds - (time.monotonic() - down)))
    models.up()
    row.restarts += 1  # the model server's
    report = kb.converge()
    daemon.send_signal(signal.SIGTERM)
    if daemon.wait(60) != 0:
        print("  the daemon did not stop cleanly", flush=True)
    _count(row, report)
    return row


def unreadable_folder(models: ModelServer, rng: random.Random, rounds: int, notes: int) -> Row:
    """A folder, or the whole vault, unreadable for a few reconciliations while the rest is
    edited, then readable again: nothing lost, and none of its notes deleted or indexed
    again (which would spend their model calls)."""
    row = Row("folder unreadable under kb daemon")
    try:
        who = account()
    except NoAccount as exc:
        print(f"  {row.scenario}: skipped: {exc}", flush=True)
        return row
    home = workdir(who, "kb-faults-unreadable-")
    try:
        vault = Vault(home / "vault", rng, notes)
        config = home / "kb.toml"
        config.write_text(
            CONFIG.format(vault=vault.path, host=models.url) + "reconcile_interval = 2.0\n"
        )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "KB_DATA_DIR": str(home / "data"),
        }
        kb = Kb(config, env, home, who)
        first = kb.run("index")
        if first.returncode != 0:
            raise RuntimeError(f"kb index failed: {first.stderr.strip()[-300:]}")
        daemon = kb.start("daemon", "daemon")
        log = home / "daemon.log"
        warnings = 0
        try:
            kb.converge()
            for _ in range(rounds):
                folder = rng.choice([*Vault.FOLDERS, "Reference", ""])
                target = vault.path / folder
                if not target.is_dir():
                    continue
                vault.burst(rng.randint(5, 20))
                kb.converge()
                seen = len(log.read_bytes())
                vault.hidden = folder
                target.chmod(0)
                row.faults += 1
                # Edits elsewhere through a few reconciliations.
                for _ in range(4):
                    vault.burst(rng.randint(2, 8))
                    time.sleep(rng.uniform(0.5, 2.0))
                target.chmod(0o755)
                vault.hidden = None
                report = kb.converge()
                lines = log.read_bytes()[seen:].decode(errors="replace").splitlines()
                warnings += sum("cannot read a folder" in line for line in lines)
                spent = [
                    line
                    for line in lines
                    if any(f"msg={m} " in line for m in ("deleted", "indexed", "moved"))
                    and _under(line, folder)
                ]
                if spent:
                    print(f"  {row.scenario}: {folder or 'the vault'}: {spent[:3]}", flush=True)
                row.lost += len(spent)
                _count(row, report)
        finally:
            daemon.send_signal(signal.SIGTERM)
            if daemon.wait(60) != 0:
                print("  the daemon did not stop cleanly", flush=True)
        print(f"  {row.scenario}: the daemon warned {warnings} times", flush=True)
    finally:
        remove(home)
    return row


def _under(line: str, folder: str) -> bool:
    """Whether a daemon log line names a note under `folder` ("" the whole vault)."""
    prefix = f"{folder}/" if folder else ""
    return f"path={prefix}" in line or f'path="{prefix}' in line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="kills per scenario (20)")
    parser.add_argument("--outage", type=float, default=60.0, help="seconds without models")
    parser.add_argument("--notes", type=int, default=80, help="notes in the vault at first")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds per model call")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument(
        "--only",
        choices=("index", "daemon", "outage", "unreadable"),
        help="run one scenario (SIGKILL of kb index or kb daemon, model outage, unreadable folder)",
    )
    args = parser.parse_args()

    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="kb-faults-"))
    models = ModelServer(args.delay)
    try:
        db_url = embedded_url(work / "data")
        vault = Vault(work / "vault", rng, args.notes)
        config = work / "kb.toml"
        config.write_text(CONFIG.format(vault=vault.path, host=models.url))
        kb = Kb(config, {**os.environ, "KB_DATABASE_URL": db_url}, work, current())
        started = time.monotonic()
        first = kb.run("index")
        took = time.monotonic() - started
        print(f"first index: exit {first.returncode}, {took:.0f} s", flush=True)
        scenarios: dict[str, Callable[[], Row]] = {
            "index": lambda: index_kills(kb, vault, rng, args.rounds),
            "daemon": lambda: daemon_kills(kb, vault, rng, args.rounds),
            "outage": lambda: model_outage(kb, vault, models, args.outage),
            "unreadable": lambda: unreadable_folder(models, rng, args.rounds, args.notes),
        }
        rows = [scenario() for name, scenario in scenarios.items() if args.only in (None, name)]
        seconds = time.monotonic() - started
    finally:
        models.down()
    print()
    print(
        "| scenario | rounds | faults injected | restarts | notes checked | rows verified | lost |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.scenario} | {r.rounds} | {r.faults} | {r.restarts} | {r.notes} | {r.rows} "
            f"| {r.lost} |"
        )
    total = Row(
        "all",
        rounds=sum(r.rounds for r in rows),
        faults=sum(r.faults for r in rows),
        restarts=sum(r.restarts for r in rows),
        notes=sum(r.notes for r in rows),
        rows=sum(r.rows for r in rows),
        lost=sum(r.lost for r in rows),
    )
    print(
        f"| **all** | {total.rounds} | {total.faults} | {total.restarts} | {total.notes} "
        f"| {total.rows} | {total.lost} |"
    )
    print(f"\n{seconds:.0f} s; {models.calls} model calls; seed {args.seed}")
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in vault.notes())).hexdigest()[:12]
    print(f"final vault: {len(vault.notes())} notes (content {digest}); logs in {work}")
    shutil.rmtree(vault.path, ignore_errors=True)
    return 1 if total.lost else 0


if __name__ == "__main__":
    sys.exit(main())
