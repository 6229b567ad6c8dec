"""Searching while a model server is down: full-text search needs no model, so `text` mode
never asks the embedder, `hybrid` answers from full-text search alone and says so, and a
re-ranking the chat model cannot do leaves the results in search order. Every face: the
command line, a daemon answering `kb query` over its socket, and the MCP tools."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from kb.cli.query import forwarded
from kb.config import load_config
from kb.container import Container
from kb.daemon.query_socket import Failed, Served, ask_daemon, serving
from kb.errors import LLMUnavailable
from kb.llm.ollama import OllamaEmbedder
from kb.llm.profiles import UNKNOWN, ProfiledEmbedder
from kb.locations import config_identity
from kb.mcp.tools import build_server
from kb.search import answer as answer_mod
from kb.search.plan import SearchPlan
from support.cli import run_kb
from support.configs import write_config
from support.fake_kb import Kb
from support.llm_server import CHAT, EMBED, Stub, ollama_chat_stream, ollama_embed_reply
from support.reading import search_store, tool_text

QUESTION = "postgres upgrade"


def _ollama(embed_host: str, chat_host: str) -> dict[str, Any]:
    # The fake provider's model names (kept from write_config's): the index it wrote is the
    # one searched.
    return {
        "provider": "ollama",
        "embed_host": embed_host,
        "chat_host": chat_host,
        "retries": 0,
        "timeout": 5,
    }


@pytest.fixture
def env(db_url: str) -> Iterator[dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="kbo-") as runtime:
        os.chmod(runtime, 0o700)
        yield {
            **os.environ,
            "KB_DATABASE_URL": db_url,
            "XDG_RUNTIME_DIR": runtime,
            "COLUMNS": "200",
        }


@pytest.fixture
def indexed_vault(tmp_path: Path, vault: Path, env: dict[str, str]) -> Path:
    """The vault, indexed and embedded by the fake provider: no model server needed."""
    done = run_kb(
        write_config(tmp_path / "fake.toml", vault, name="example"), env, "index", "--wait"
    )
    assert done.returncode == 0, done.stderr
    return vault


@pytest.fixture
def offline(tmp_path: Path, indexed_vault: Path, env: dict[str, str], dead_url: str) -> Path:
    """A config whose model server is gone, on an index the fake provider wrote."""
    return write_config(
        tmp_path / "kb.toml", indexed_vault, name="example", llm=_ollama(dead_url, dead_url)
    )


def _lines(stream: str, prefix: str) -> list[str]:
    return [line for line in stream.splitlines() if line.startswith(prefix)]


def test_text_mode_never_asks_the_embedder(offline: Path, env: dict[str, str]) -> None:
    result = run_kb(offline, env, "query", QUESTION, "--mode", "text", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    hits = json.loads(result.stdout)
    assert hits and all(h["mode_used"] == "text" for h in hits)
    # No query vector: no cosine similarity to report.
    assert all(h["similarity"] is None and h["vector_rank"] is None for h in hits)
    shown = run_kb(offline, env, "query", QUESTION, "--mode", "text")
    assert shown.returncode == 0 and shown.stderr == ""
    assert "Postgres" in shown.stdout and "BM25" in shown.stdout


def test_hybrid_falls_back_to_full_text_with_one_warning(
    offline: Path, env: dict[str, str]
) -> None:
    text = json.loads(run_kb(offline, env, "query", QUESTION, "--mode", "text", "--json").stdout)
    result = run_kb(offline, env, "query", QUESTION, "--json")
    assert result.returncode == 0, result.stderr
    [warning] = result.stderr.splitlines()
    assert warning.startswith("warning: ") and "full-text search only" in warning
    assert "cannot reach Ollama" in warning
    hits = json.loads(result.stdout)
    assert hits == text  # the text list alone, marked so
    shown = run_kb(offline, env, "query", QUESTION)
    assert shown.returncode == 0 and "Postgres" in shown.stdout
    assert len(_lines(shown.stderr, "warning: ")) == 1 and "Traceback" not in shown.stderr


def test_vector_mode_and_a_threshold_still_need_the_embedder(
    offline: Path, env: dict[str, str]
) -> None:
    for args in (("--mode", "vector"), ("--threshold", "0.2"), ("-m", "text", "-t", "0.2")):
        result = run_kb(offline, env, "query", QUESTION, *args)
        assert result.returncode == 1, args
        [error] = result.stderr.splitlines()
        assert error.startswith("error: ") and "cannot reach Ollama" in error, args


def test_ask_reads_the_full_text_passages_and_says_so(
    tmp_path: Path,
    indexed_vault: Path,
    env: dict[str, str],
    dead_url: str,
    stub: Stub,
) -> None:
    config = write_config(
        tmp_path / "kb.toml", indexed_vault, name="example", llm=_ollama(dead_url, stub.url)
    )
    stub.reply(CHAT, ollama_chat_stream(["Run pg_upgrade [1]."]), times=2)
    result = run_kb(config, env, "ask", QUESTION)
    assert result.returncode == 0, result.stderr
    assert "Run pg_upgrade [1]." in result.stdout
    [warning] = result.stderr.splitlines()
    assert "full-text search only" in warning
    as_json = json.loads(run_kb(config, env, "ask", QUESTION, "--json").stdout)
    assert as_json["mode_used"] == "text" and len(as_json["warnings"]) == 1
    assert as_json["sources"] and as_json["sources"][0]["similarity"] is None


def test_a_dead_chat_server_leaves_the_results_in_search_order(
    tmp_path: Path,
    indexed_vault: Path,
    env: dict[str, str],
    dead_url: str,
    stub: Stub,
) -> None:
    config = write_config(
        tmp_path / "kb.toml", indexed_vault, name="example", llm=_ollama(stub.url, dead_url)
    )
    stub.reply(EMBED, ollama_embed_reply([[1.0] * 256]), times=4)
    plain = run_kb(config, env, "query", "miso ramen", "--json")
    result = run_kb(config, env, "query", "miso ramen", "--json", "--rerank")
    assert result.returncode == 0, result.stderr
    [warning] = result.stderr.splitlines()
    assert warning.startswith("warning: re-ranking skipped") and "cannot reach Ollama" in warning
    assert json.loads(result.stdout) == json.loads(plain.stdout)


def test_a_daemon_answering_kb_query_passes_the_warning_and_the_exit_code_on(
    offline: Path, env: dict[str, str]
) -> None:
    identity = config_identity(offline, env)
    cold = {**env, "XDG_RUNTIME_DIR": tempfile.mkdtemp(prefix="kbn-")}
    with (
        Container.open(load_config(offline, env)) as parts,
        serving(identity, env, forwarded(parts)) as path,
    ):
        assert path is not None
        served = ask_daemon(["--config", str(offline), "query", QUESTION], env)
        assert isinstance(served, Served) and "Postgres" in served.found.hits[0].path
        [warning] = served.found.warnings
        assert "full-text search only" in warning
        failed = ask_daemon(["--config", str(offline), "query", QUESTION, "-m", "vector"], env)
        assert isinstance(failed, Failed) and "cannot reach Ollama" in failed.error
        # The launcher shows both as the command alone does: output, warning, error, exit.
        for args in ((), ("-m", "vector")):
            shown = run_kb(offline, env, "query", QUESTION, *args)
            alone = run_kb(offline, cold, "query", QUESTION, *args)
            assert (shown.returncode, shown.stdout, shown.stderr) == (
                alone.returncode,
                alone.stdout,
                alone.stderr,
            )
    assert shown.returncode == 1 and len(shown.stderr.splitlines()) == 1


def _dead(kb: Container, url: str) -> None:
    kb.embedder = ProfiledEmbedder(OllamaEmbedder(url, "hash-256", timeout=5, retries=0), UNKNOWN)


def test_mcp_search_and_ask_answer_from_full_text_and_say_so(
    kb: Kb,
    dead_url: str,
) -> None:
    kb.sync()
    _dead(kb, dead_url)

    async def check(client: Client) -> None:
        hybrid = await client.call_tool("search", {"query": QUESTION})
        assert not hybrid.is_error
        found = hybrid.structured_content
        assert found["mode_used"] == "text" and found["hits"]
        [warning] = found["warnings"]
        assert "full-text search only" in warning and "cannot reach Ollama" in warning
        text = await client.call_tool("search", {"query": QUESTION, "mode": "text"})
        assert text.structured_content["warnings"] == []
        assert text.structured_content["hits"] == found["hits"]
        vector = await client.call_tool("search", {"query": QUESTION, "mode": "vector"})
        assert vector.is_error and "cannot reach Ollama" in tool_text(vector)
        answer = await client.call_tool("ask", {"question": QUESTION})
        assert not answer.is_error
        assert answer.structured_content["mode_used"] == "text"
        assert answer.structured_content["warnings"] == [warning]

    async def main() -> None:
        async with Client(build_server(kb)) as client:
            await check(client)

    anyio.run(main)


def test_the_one_search_says_which_lists_it_used(kb: Kb, dead_url: str) -> None:
    kb.sync()
    alive = search_store(kb.store, kb.embedder, SearchPlan(QUESTION, top_k=5))
    assert alive.mode_used == "hybrid" and alive.warnings == ()
    _dead(kb, dead_url)
    fallen = search_store(kb.store, kb.embedder, SearchPlan(QUESTION, top_k=5))
    text = search_store(kb.store, kb.embedder, SearchPlan(QUESTION, top_k=5, mode="text"))
    assert fallen.mode_used == text.mode_used == "text"
    assert fallen.hits == text.hits and len(fallen.warnings) == 1 and text.warnings == ()
    with pytest.raises(LLMUnavailable):
        search_store(kb.store, kb.embedder, SearchPlan(QUESTION, top_k=5, mode="vector"))
    answer = answer_mod.ask(
        kb.embedder,
        kb.chat,
        SearchPlan(QUESTION),
        candidates=kb.store.candidates,
        vectors=kb.store.vectors,
        queue=kb.store.queue,
        documents=kb.store.documents,
        context_window=8192,
    )
    assert answer.mode_used == "text" and answer.warnings == fallen.warnings
