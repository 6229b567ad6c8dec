"""`kb verify` (index equals vault?) and the daemon part of `kb status`, as subprocesses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psycopg

from kb.store import DaemonBeat, WriterLock
from support.cli import run_cli
from support.configs import write_config

EXIT_OUT_OF_SYNC = 4


def test_verify_in_sync(cfg: Path, db_url: str) -> None:
    assert run_cli(cfg, db_url, "index").returncode == 0
    result = run_cli(cfg, db_url, "verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "15 notes on disk, 15 rows in the index: in sync" in result.stderr
    assert result.stdout == ""


def test_verify_in_sync_with_an_embedder_whose_profile_adds_prefixes(
    tmp_path: Path, vault: Path, db_url: str
) -> None:
    # The default embedder's profile adds task prefixes: its vectors are stored under a
    # tagged name, and verify must ask for that name, not the configured one.
    cfg = write_config(
        tmp_path / "kb.toml", vault, name="example", llm={"embed_model": "nomic-embed-text"}
    )
    assert run_cli(cfg, db_url, "index", "--wait").returncode == 0  # the vectors too
    status = json.loads(run_cli(cfg, db_url, "status", "--json").stdout)
    assert status["embed_model"].startswith("nomic-embed-text#")
    result = run_cli(cfg, db_url, "verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "15 notes on disk, 15 rows in the index: in sync" in result.stderr


def test_verify_lists_every_kind_of_difference(cfg: Path, db_url: str, vault: Path) -> None:
    (vault / "bad.md").write_bytes(b"\xff\xfe\x00binary")
    assert run_cli(cfg, db_url, "index").returncode == 3
    with (vault / "People/Kenji Sato.md").open("a") as f:
        f.write("\nOne more line.\n")
    (vault / "Inbox/New.md").write_text("# New\n\nnot indexed yet\n")
    (vault / "Inbox/Untitled.md").unlink()

    result = run_cli(cfg, db_url, "verify")
    assert result.returncode == EXIT_OUT_OF_SYNC
    listed = []
    for line in result.stdout.splitlines():
        kind, rest = line.split(maxsplit=1)
        listed.append(f"{kind} {rest.split('  (')[0]}")
    assert sorted(listed) == [
        "extra example/Inbox/Untitled.md",
        "failed example/bad.md",
        "missing example/Inbox/New.md",
        "stale example/People/Kenji Sato.md",
    ]
    assert "4 differences" in result.stderr and "Traceback" not in result.stderr

    data = json.loads(run_cli(cfg, db_url, "verify", "--json").stdout)
    assert data["in_sync"] is False
    assert {(d["kind"], d["path"]) for d in data["differences"]} == {
        ("extra", "Inbox/Untitled.md"),
        ("failed", "bad.md"),
        ("missing", "Inbox/New.md"),
        ("stale", "People/Kenji Sato.md"),
    }


def test_status_shows_the_daemon(cfg: Path, db_url: str) -> None:
    assert run_cli(cfg, db_url, "index").returncode == 0
    idle = run_cli(cfg, db_url, "status").stdout
    assert "daemon       not running" in idle and "reconciled   never" in idle

    lock = WriterLock(db_url)
    try:
        beat = DaemonBeat("host:1", "host", os.getpid(), "writer", "watching", 3, 60.0)
        lock.beat(beat)
        lock.beat(DaemonBeat("host:2", "host", 2, "standby", "waiting", 0, 60.0))
        text = run_cli(cfg, db_url, "status").stdout
    finally:
        lock.close()
    assert f"daemon       running on host (pid {os.getpid()}), watching, 3 paths queued" in text
    assert "  standby: host (pid 2)" in text


def test_a_half_written_note_is_reported_as_broken(cfg: Path, db_url: str) -> None:
    assert run_cli(cfg, db_url, "index").returncode == 0
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM chunks WHERE id = (SELECT id FROM chunks WHERE position = 1 LIMIT 1)"
        )
    result = run_cli(cfg, db_url, "verify", "--json")
    assert result.returncode == EXIT_OUT_OF_SYNC
    diffs = json.loads(result.stdout)["differences"]
    assert [(d["kind"], d["detail"]) for d in diffs] == [("broken", "1 broken chunk lists")]
