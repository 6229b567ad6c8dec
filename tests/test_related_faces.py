"""Related notes on every face: `kb related` (its `--json` shape, `--unlinked`, NOTE:LINE),
MCP's `related_notes`, the page's note view and `/api/related`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
from mcp.client import Client
from starlette.testclient import TestClient

from kb.mcp.tools import build_server
from kb.web.routes import web_app
from support.cli import run_cli
from support.configs import write_config
from support.fake_kb import Kb
from support.reading import tool_text


def kb_cli(
    tmp_path: Path, linked_vault: Path, db_url: str, *args: str
) -> subprocess.CompletedProcess[str]:
    config = write_config(
        tmp_path / "kb.toml", linked_vault, personal=(), context={"summaries": "structure"}
    )
    return run_cli(config, db_url, *args)


def test_kb_related_json_unlinked_and_a_line(
    tmp_path: Path, linked_vault: Path, db_url: str
) -> None:
    assert kb_cli(tmp_path, linked_vault, db_url, "index", "--wait").returncode == 0
    shown = kb_cli(tmp_path, linked_vault, db_url, "related", "Indexing.md", "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert set(data) >= {"related", "links_to", "linked_from", "unresolved"}
    assert {"vault", "path", "title", "score", "why"} <= set(data["related"][0])
    assert [r["path"] for r in data["links_to"]] == ["HNSW indexes.md"]
    assert "HNSW indexes.md" in [r["path"] for r in data["related"]]

    unlinked = kb_cli(tmp_path, linked_vault, db_url, "related", "Indexing", "--unlinked", "--json")
    paths = [r["path"] for r in json.loads(unlinked.stdout)["related"]]
    assert "HNSW indexes.md" not in paths and "Postgres.md" in paths

    line = kb_cli(tmp_path, linked_vault, db_url, "related", "v:Indexing.md:8", "--json", "-k", "2")
    data = json.loads(line.stdout)
    assert data["lines"] == [6, 8] and len(data["related"]) <= 2

    text = kb_cli(
        tmp_path, linked_vault, db_url, "related", str(linked_vault / "Indexing.md"), "--explain"
    )
    assert text.returncode == 0, text.stderr
    assert "mentions its title: 'postgres'" in text.stdout
    assert "links to: HNSW indexes.md" in text.stdout

    missing = kb_cli(tmp_path, linked_vault, db_url, "related", "Nope.md")
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1


def test_the_mcp_tool_related_notes(linked_kb: Kb) -> None:
    server = build_server(linked_kb)

    async def main() -> None:
        async with Client(server) as client:
            result = await client.call_tool(
                "related_notes", {"vault": "v", "path": "Indexing.md", "unlinked": True}
            )
            data = json.loads(tool_text(result))
            assert "HNSW indexes.md" not in [r["path"] for r in data["related"]]
            assert data["links_to"][0]["path"] == "HNSW indexes.md"
            missing = await client.call_tool("related_notes", {"vault": "v", "path": "No.md"})
            assert missing.is_error

    anyio.run(main)


def test_the_note_page_shows_related_and_the_json_endpoint(linked_kb: Kb) -> None:
    web = TestClient(
        web_app(linked_kb, host="127.0.0.1", token=None), base_url="http://127.0.0.1:8766"
    )
    page = web.get("/note", params={"vault": "v", "path": "Indexing.md"})
    assert page.status_code == 200
    assert "<h2>Related</h2>" in page.text and "mentions its title" in page.text
    # Unlinked by default on the page: the note it links to is not offered.
    related = page.text.split("<h2>Related</h2>", 1)[1]
    assert "HNSW indexes.md" not in related

    api = web.get("/api/related", params={"path": "Indexing.md", "top_k": "3"})
    assert api.status_code == 200
    data = api.json()
    assert len(data["related"]) <= 3 and data["links_to"][0]["path"] == "HNSW indexes.md"
    unlinked = web.get("/api/related", params={"path": "Indexing.md", "unlinked": "true"})
    assert "HNSW indexes.md" not in [r["path"] for r in unlinked.json()["related"]]
    assert web.get("/api/related", params={"path": "Nope.md"}).status_code == 404
    assert web.get("/api/related").status_code == 400
    bad = web.get("/api/related", params={"path": "Indexing.md", "unlinked": "maybe"})
    assert bad.status_code == 400 and "unlinked" in bad.json()["error"]
