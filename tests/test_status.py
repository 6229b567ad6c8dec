"""One status report for every face: `kb status`, `kb status --json` and MCP's `status` read
the same numbers, daemons and workers."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from kb.mcp.tools import build_server
from kb.store import DaemonBeat, Reconciliation, WorkerBeat, WriterLock
from support.cli import run_kb
from support.configs import write_config
from support.fake_kb import Kb

RECONCILED = Reconciliation(
    at="2024-05-01T10:00:00",
    reason="start-up",
    seconds=1.5,
    files=15,
    indexed=2,
    moved=0,
    deleted=0,
    failed=1,
    unreadable=0,
    llm_calls=4,
)


def _config_file(tmp_path: Path, kb: Kb) -> Path:
    """The test's config as a file, for a whole `kb` process."""
    (vault,) = kb.config.vaults
    return write_config(tmp_path / "kb.toml", vault.path, name=vault.name)


def _mcp_status(kb: Kb) -> dict[str, Any]:
    answer: dict[str, Any] = {}

    async def main() -> None:
        async with Client(build_server(kb)) as client:
            answer.update((await client.call_tool("status", {})).structured_content or {})

    anyio.run(main)
    return answer


def test_cli_and_mcp_carry_the_same_report(kb: Kb, tmp_path: Path) -> None:
    (kb.config.vaults[0].path / "bad.md").write_bytes(b"\xff\xfe\x00binary")
    kb.sync()
    lock = WriterLock(kb.store.url)
    assert lock.try_acquire()
    lock.beat(DaemonBeat("d1", "laptop", 4242, "writer", "watching", 3, 60.0))
    kb.store.workers.beat(WorkerBeat("w1", "laptop", 4343, 2, 1, 60.0, "model server busy"))
    kb.store.state.reconciled(RECONCILED)
    try:
        config = _config_file(tmp_path, kb)
        env = {**os.environ, "KB_DATABASE_URL": kb.store.url, "COLUMNS": "200"}
        shown = run_kb(config, env, "status")
        printed = run_kb(config, env, "status", "--json")
        mcp = _mcp_status(kb)
        report = kb.status_reader()()
    finally:
        lock.leave("d1")
    assert shown.returncode == printed.returncode == 0, shown.stderr + printed.stderr
    cli = json.loads(printed.stdout)

    assert report.index.documents == cli["documents"] == mcp["documents"] == 15
    for key in ("chunks", "embedded", "embed_model", "chat_models"):
        assert cli[key] == mcp[key] == getattr(report.index, key), key
    assert report.index.last_sync is not None
    assert cli["last_sync"] == mcp["last_sync"] == asdict(report.index.last_sync)
    assert cli["last_reconcile"] == asdict(RECONCILED) and report.last_reconcile == RECONCILED
    assert "reconciled   2024-05-01T10:00:00 (start-up): 15 files, 2 indexed" in shown.stdout
    failed = [f"{f['vault']}/{f['path']}" for f in cli["failures"]]
    assert failed == mcp["failed_files"] == [f"{f.vault}/{f.path}" for f in report.index.failures]
    assert failed == ["v/bad.md"]

    [daemon] = cli["daemons"]
    assert (daemon["id"], daemon["role"], daemon["alive"]) == ("d1", "writer", True)
    assert mcp["daemon"] == report.daemon == "running"
    assert "daemon       running on laptop (pid 4242), watching, 3 paths queued" in shown.stdout

    [worker] = cli["enrichment"]["workers"]
    assert (worker["id"], worker["in_hand"], worker["alive"]) == ("w1", 1, True)
    assert [w.id for w in report.running_workers] == ["w1"]
    assert "workers      1 running" in shown.stdout
    assert "laptop (pid 4343): 1 of 2 notes in hand" in shown.stdout
    assert "last error: model server busy" in shown.stdout

    queue = cli["enrichment"]
    for cli_key, mcp_key in (
        ("items", "queued"),
        ("in_progress", "in_progress"),
        ("failing", "failing"),
        ("done_last_hour", "done_last_hour"),
    ):
        assert queue[cli_key] == mcp["enrichment"][mcp_key] == getattr(report.queue, cli_key)


def test_a_reconciliation_recorded_before_unreadable_folders_were_counted(kb: Kb) -> None:
    older = {k: v for k, v in asdict(RECONCILED).items() if k != "unreadable"}
    kb.store.state.set("last_reconcile", older)
    assert kb.store.state.last_reconcile() == RECONCILED
