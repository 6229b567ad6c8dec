"""Every face searches as the configuration says: `kb query`, `kb ask`, the MCP tools `search`
and `ask`, and a daemon answering `kb query` all take the mode, the number of hits, the
re-ranking and the fusion from `[query]`, and so find the same passages."""

from __future__ import annotations

import json
import logging
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
from kb.daemon.query_socket import serving
from kb.locations import config_identity
from kb.mcp.tools import build_server
from support.cli import run_kb
from support.configs import write_config

QUESTION = "when did I climb a mountain"
# Settings no face may leave out: a mode other than hybrid, re-ranking on, a fusion other
# than the default, fewer hits than the faces' own defaults.
SETTINGS: dict[str, tuple[dict[str, Any], str]] = {
    "text mode": ({"mode": "text", "rerank": True}, "text"),
    "fused": ({"fusion": "rrf", "vector_weight": 0.5, "rerank": True, "top_k": 3}, "hybrid"),
}


@pytest.fixture(params=sorted(SETTINGS))
def face_setup(
    request: pytest.FixtureRequest, tmp_path: Path, vault: Path, db_url: str
) -> Iterator[tuple[Path, dict[str, str], str]]:
    query, mode = SETTINGS[request.param]
    config = write_config(tmp_path / "kb.toml", vault, name="example", query=query)
    with tempfile.TemporaryDirectory(prefix="kbf-") as runtime:
        os.chmod(runtime, 0o700)
        env = {**os.environ, "KB_DATABASE_URL": db_url, "XDG_RUNTIME_DIR": runtime}
        indexed = run_kb(config, env, "index", "--wait")
        assert indexed.returncode == 0, indexed.stderr
        yield config, env, mode


def _where(hits: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return [(h["path"], h["start_line"], h["end_line"]) for h in hits]


def _mcp(parts: Container) -> tuple[dict[str, Any], dict[str, Any]]:
    """MCP `search` and `ask`, called as an assistant calls them: the question alone."""
    found: dict[str, Any] = {}

    async def main() -> None:
        async with Client(build_server(parts)) as client:
            for tool, args in (("search", {"query": QUESTION}), ("ask", {"question": QUESTION})):
                result = await client.call_tool(tool, args)
                assert not result.is_error, result.content
                found[tool] = result.structured_content

    anyio.run(main)
    return found["search"], found["ask"]


def test_every_face_searches_as_the_configuration_says(
    face_setup: tuple[Path, dict[str, str], str], caplog: pytest.LogCaptureFixture
) -> None:
    config, env, mode = face_setup
    query = run_kb(config, env, "query", QUESTION, "--json")
    assert query.returncode == 0, query.stderr
    hits = json.loads(query.stdout)
    # The configuration was followed: its mode, its number of hits, its re-ranking.
    top_k = load_config(config, env).query.top_k
    # An answer reads the first of the same hits, as many as `[ask] passages` says.
    read = min(top_k, load_config(config, env).ask.passages)
    assert len(hits) == top_k and {h["mode_used"] for h in hits} == {mode}
    assert all(isinstance(h["relevance"], int) for h in hits)
    plain = [{k: v for k, v in h.items() if k != "mode_used"} for h in hits]

    with Container.open(load_config(config, env)) as parts:
        search, answer = _mcp(parts)
        assert search["mode_used"] == mode and search["hits"] == plain
        assert answer["mode_used"] == mode and _where(answer["sources"]) == _where(hits)[:read]

        ask = json.loads(run_kb(config, env, "ask", QUESTION, "--json").stdout)
        assert ask["mode_used"] == mode and _where(ask["sources"]) == _where(hits)[:read]

        caplog.set_level(logging.DEBUG, logger="kb.query_socket")
        identity = config_identity(config, env)
        with serving(identity, env, forwarded(parts)) as path:
            assert path is not None
            served = run_kb(config, env, "query", QUESTION, "--json")
    assert "answered a query for a launcher" in caplog.text
    assert (served.returncode, served.stdout, served.stderr) == (0, query.stdout, "")
