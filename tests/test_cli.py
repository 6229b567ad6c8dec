"""The `kb` command as users run it: a subprocess, a config file, a real database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import psycopg
import pytest

from kb.store.schema import migrate, migrations
from support.cli import kb_command, run_cli, run_kb
from support.configs import write_config
from support.daemons import wait_for


def test_index_query_status_round_trip(cfg: Path, vault: Path, db_url: str) -> None:
    first = run_cli(cfg, db_url, "index", "--wait")  # with the vectors
    assert first.returncode == 0, first.stderr
    assert "15 files: 15 indexed" in first.stderr
    again = run_cli(cfg, db_url, "index")
    assert "15 unchanged" in again.stderr and " 0 LLM calls" in again.stderr

    result = run_cli(cfg, db_url, "query", "miso ramen chili oil", "--json", "--top-k", "3")
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert 1 <= len(hits) <= 3
    assert set(hits[0]) >= {
        "vault",
        "path",
        "header_path",
        "content",
        "score",
        "similarity",
        "start_line",
        "end_line",
    }
    assert hits[0]["path"] == "Reference/Recipes/Weeknight Miso Ramen.md"
    assert isinstance(hits[0]["header_path"], list)
    assert hits[0]["vault"] == "example" and hits[0]["start_line"] <= hits[0]["end_line"]
    # The raw chunk as it is in the note, not full_context.
    assert hits[0]["content"] in (vault / hits[0]["path"]).read_text()

    filtered = json.loads(
        run_cli(cfg, db_url, "query", "postgres", "--json", "--path", "Alex/").stdout
    )
    assert filtered and all(h["path"].startswith("Alex/") for h in filtered)

    text = run_cli(cfg, db_url, "query", "miso ramen")
    assert "Weeknight Miso Ramen.md" in text.stdout and "similarity" in text.stdout

    args = ("--json", "--tag", "hiking", "--tag", "journal", "--after", "2000-01-01")
    for mode in ("vector", "text", "hybrid"):
        tagged = json.loads(run_cli(cfg, db_url, "query", "climb", "--mode", mode, *args).stdout)
        assert {h["path"] for h in tagged} == {"Alex/Journal/2024-04-12.md"}, mode
    future = run_cli(cfg, db_url, "query", "climb", "--json", "--after", "2999-01-01")
    assert future.returncode == 0 and json.loads(future.stdout) == []
    assert run_cli(cfg, db_url, "query", "climb", "--mode", "fuzzy").returncode == 2
    assert run_cli(cfg, db_url, "query", "climb", "--after", "yesterday").returncode == 2

    status = json.loads(run_cli(cfg, db_url, "status", "--json").stdout)
    assert status["documents"] == 15 and status["embed_model"] == "hash-256"
    assert status["chunks"] == status["embedded"] > 0 and status["last_sync"]

    redo = run_cli(cfg, db_url, "reindex", "--embeddings-only", "--wait")
    assert redo.returncode == 0 and "every vector dropped" in redo.stderr
    assert "embedded 14 notes and enriched 0 here" in redo.stderr


def test_failed_files_set_the_exit_code(cfg: Path, db_url: str, vault: Path) -> None:
    (vault / "bad.md").write_bytes(b"\xff\xfe\x00binary")
    result = run_cli(cfg, db_url, "index")
    assert result.returncode == 3
    assert "bad.md" in result.stderr and "Traceback" not in result.stderr
    status = json.loads(run_cli(cfg, db_url, "status", "--json").stdout)
    assert [f["path"] for f in status["failures"]] == ["bad.md"], status["failures"]


def test_unreachable_ollama_is_one_line(tmp_path: Path, vault: Path, db_url: str) -> None:
    cfg = write_config(
        tmp_path / "kb.toml",
        vault,
        name="example",
        llm={
            "provider": "ollama",
            "chat_model": "qwen2.5:1.5b",
            "embed_model": "nomic-embed-text",
            "host": "http://127.0.0.1:9",
            "retries": 0,
        },
    )
    result = run_cli(cfg, db_url, "index", "--wait")  # the notes are stored, then embedded
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach Ollama at http://127.0.0.1:9" in errors[0]


def test_bad_config_names_the_key(tmp_path: Path, vault: Path, db_url: str) -> None:
    cfg = write_config(tmp_path / "kb.toml", vault, name="example", llm={"concurrency": "many"})
    result = run_cli(cfg, db_url, "index")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "llm.concurrency" in result.stderr and "Traceback" not in result.stderr


def test_query_before_index_says_what_to_do(cfg: Path, db_url: str) -> None:
    result = run_cli(cfg, db_url, "query", "anything")
    assert result.returncode == 1 and "run `kb index` first" in result.stderr


def test_migrations_apply_once_even_when_racing(blank_db_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: migrate(blank_db_url), range(4)))
    applied = sorted(v for r in results for v in r)
    assert applied == [m.version for m in migrations()]
    assert migrate(blank_db_url) == []


def test_query_rerank_flag(cfg: Path, db_url: str) -> None:
    assert run_cli(cfg, db_url, "index").returncode == 0
    result = run_cli(cfg, db_url, "query", "miso ramen", "--rerank", "--json", "--top-k", "2")
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert len(hits) == 2 and all(isinstance(h["relevance"], int) for h in hits)
    plain = json.loads(run_cli(cfg, db_url, "query", "miso ramen", "--json").stdout)
    assert all(h["relevance"] is None for h in plain)
    shown = run_cli(cfg, db_url, "query", "miso ramen", "--rerank", "--top-k", "1")
    assert "relevance 10/10" in shown.stdout


def test_ask_streams_an_answer_then_its_sources(cfg: Path, db_url: str) -> None:
    assert run_cli(cfg, db_url, "index").returncode == 0
    result = run_cli(cfg, db_url, "ask", "which miso goes into the ramen", "--top-k", "3")
    assert result.returncode == 0, result.stderr
    answer, _, sources = result.stdout.partition("\n\n[1] ")
    assert "[1]" in answer or "[2]" in answer or "[3]" in answer
    assert sources.startswith("example/") and "[3] example/" in sources

    as_json = json.loads(
        run_cli(cfg, db_url, "ask", "which miso goes into the ramen", "--json").stdout
    )
    assert set(as_json) >= {"answer", "sources", "cited", "model", "timings", "not_in_notes"}
    assert as_json["model"] == "fake-chat"
    assert set(as_json["cited"]) <= {s["number"] for s in as_json["sources"]}
    assert {"path", "start_line", "end_line", "content", "date"} <= set(as_json["sources"][0])


def test_ask_before_index_says_what_to_do(cfg: Path, db_url: str) -> None:
    result = run_cli(cfg, db_url, "ask", "anything")
    assert result.returncode == 1 and "run `kb index` first" in result.stderr
    assert "Traceback" not in result.stderr


def test_index_then_worker_until_empty(cfg: Path, db_url: str, vault: Path) -> None:
    first = run_cli(cfg, db_url, "index")
    assert first.returncode == 0, first.stderr
    assert " 0 LLM calls" in first.stderr
    assert "enrichment: 14 notes queued for their LLM context" in first.stderr
    queued = json.loads(run_cli(cfg, db_url, "status", "--json").stdout)["enrichment"]
    assert queued["items"] == 14 and queued["failing"] == 0 and queued["workers"] == []
    assert run_cli(cfg, db_url, "verify").returncode == 0  # searchable (and in sync) already
    shown = run_cli(cfg, db_url, "status").stdout
    assert "enrichment   14 notes queued, 0 in progress, 0 failing" in shown

    worker = run_cli(cfg, db_url, "worker", "--until-empty", "--concurrency", "2")
    assert worker.returncode == 0, worker.stderr
    assert worker.stderr.count("msg=enriched ") == 14
    done = json.loads(run_cli(cfg, db_url, "status", "--json").stdout)["enrichment"]
    assert done["items"] == 0 and done["done_last_hour"] == 14 and done["rate"] > 0
    assert run_cli(cfg, db_url, "verify").returncode == 0

    note = vault / "Projects/Home Server.md"
    note.write_text(note.read_text().replace(" the ", " the zebra " * 9, 1))
    waited = run_cli(cfg, db_url, "index", "--wait")
    assert waited.returncode == 0, waited.stderr
    assert "embedded 1 notes and enriched 1 here: 2 LLM calls" in waited.stderr
    assert "every note has its vectors and its LLM context" in waited.stderr
    assert json.loads(run_cli(cfg, db_url, "status", "--json").stdout)["enrichment"]["items"] == 0


def test_worker_concurrency_is_bounded(cfg: Path, db_url: str) -> None:
    result = run_cli(cfg, db_url, "worker", "--until-empty", "--concurrency", "100000")
    assert result.returncode == 2 and "--concurrency" in result.stderr
    assert "Traceback" not in result.stderr and "worker started" not in result.stderr


def test_search_numbers_out_of_range_are_usage_errors(cfg: Path, db_url: str) -> None:
    for command in ("query", "ask"):
        for args in (("-t", "2"), ("-t", "nan"), ("-t", "-inf"), ("-k", "100000000000000000000")):
            result = run_cli(cfg, db_url, command, "ramen", *args)
            assert result.returncode == 2, (command, args)
            assert "Traceback" not in result.stderr
            assert "cosine similarity" in result.stderr or "or equal to 1000" in result.stderr


def test_a_path_filter_ends_at_a_folder_and_stays_in_the_vault(
    cfg: Path, db_url: str, vault: Path
) -> None:
    (vault / "Alex2").mkdir()
    (vault / "Alex2/goals.md").write_text("# Goals\n\nClimb a mountain in 2024.\n")
    assert run_cli(cfg, db_url, "index").returncode == 0
    for written in ("Alex", "./Alex/", "/Alex"):
        found = json.loads(run_cli(cfg, db_url, "query", "goals", "--json", "-p", written).stdout)
        assert found and all(h["path"].startswith("Alex/") for h in found), written
    outside = run_cli(cfg, db_url, "query", "goals", "--path", "../Alex")
    assert outside.returncode == 1
    [error] = outside.stderr.splitlines()
    assert error.startswith("error: ") and "'..'" in error


def _queued(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT count(*) FROM enrichment_queue").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("command", ["index", "reindex"])
def test_ctrl_c_while_waiting_for_enrichment_is_one_line(
    tmp_path: Path, db_url: str, command: str
) -> None:
    vault = tmp_path / "many"
    vault.mkdir()
    for i in range(120):
        (vault / f"walk {i}.md").write_text(
            f"# Walk {i}\n\nI climbed hill {i} with Bob in the rain.\n\n"
            f"## After\n\nWe ate sandwiches at the top and talked about work {i}.\n"
        )
    cfg = write_config(tmp_path / "kb.toml", vault, name="example")
    assert run_cli(cfg, db_url, "index").returncode == 0
    queued = _queued(db_url)
    env = {**os.environ, "KB_DATABASE_URL": db_url, "COLUMNS": "200"}
    proc = subprocess.Popen(
        kb_command(cfg, command, "--wait"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        # Interrupted with notes in the enrichment threads' hands.
        wait_for(lambda: _queued(db_url) < queued - 5, "enrichment under way", every=0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    progress = ("indexing ", "embedding, enriching ")
    said = [line for line in err.splitlines() if not line.startswith(progress)]
    left = _queued(db_url)
    assert 0 < left < queued
    # The vectors come first: enrichment under way, none is left to embed.
    assert said[-1] == f"interrupted: {left} notes still queued for their LLM context", err
    assert said[-2].startswith("enrichment: "), err  # the sync, the queues
    # Nothing is held by the stopped process: the next wait finishes them.
    done = run_cli(cfg, db_url, "index", "--wait")
    assert done.returncode == 0 and "every note has its vectors and its LLM context" in done.stderr


def test_a_query_loads_neither_markdown_parsing_nor_file_watching(cfg: Path, db_url: str) -> None:
    """`kb query` in a fresh process, its imports listed by Python itself: a search reads
    rows, so the parser and the watcher are never loaded, nor a cross-encoder's runtime."""
    assert run_cli(cfg, db_url, "index").returncode == 0
    env = {**os.environ, "KB_DATABASE_URL": db_url, "PYTHONPROFILEIMPORTTIME": "1"}
    result = run_kb(cfg, env, "query", "miso ramen", "--json")
    assert result.returncode == 0 and json.loads(result.stdout), result.stderr[-500:]
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "kb.search.hybrid" in imported
    loaded = {name.split(".")[0] for name in imported}
    # Nor a cross-encoder's runtime: only a search re-ranked by one loads it.
    assert not loaded & {"markdown_it", "mdit_py_plugins", "watchdog", "onnxruntime", "tokenizers"}
