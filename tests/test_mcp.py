"""`kb mcp` with the MCP SDK's own client: in memory for each tool's behaviour, then the real
`kb mcp` process over stdio and over streamable HTTP (with its bearer token)."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import TextResourceContents

from kb.llm.fake import FakeChat
from kb.mcp.tools import build_server
from kb.models.base import Prompt
from kb.services.note_reader import Vaults
from support.cli import kb_command
from support.configs import make_config
from support.fake_kb import Kb
from support.reading import tool_text

TOOLS = {"search", "get_note", "note_links", "list_notes", "related_notes", "status", "ask"}


def run(kb: Kb, check: Callable[[Client], Awaitable[None]]) -> None:
    """Run `check` against kb's MCP server, connected in memory."""
    server = build_server(kb)

    async def main() -> None:
        async with Client(server) as client:
            await check(client)

    anyio.run(main)


def test_every_tool_is_listed_read_only_with_a_typed_schema(kb: Kb) -> None:
    async def check(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and tool.annotations and tool.annotations.read_only_hint
        search = tools["search"].input_schema
        assert search["required"] == ["query"]
        # Left out, the mode and the number of hits are the configured ones.
        top_k, no_top_k = search["properties"]["top_k"]["anyOf"]
        assert top_k["maximum"] == 50 and no_top_k == {"type": "null"}
        mode, no_mode = search["properties"]["mode"]["anyOf"]
        assert set(mode["enum"]) == {"hybrid", "vector", "text"} and no_mode == {"type": "null"}
        assert tools["get_note"].input_schema["required"] == ["vault", "path"]

    run(kb, check)


def test_search_returns_raw_chunks_with_where_they_are(kb: Kb) -> None:
    kb.sync()

    async def check(client: Client) -> None:
        result = await client.call_tool("search", {"query": "when did I climb a mountain"})
        assert not result.is_error
        hits = result.structured_content["hits"]
        assert 1 <= len(hits) <= 5
        # First person: the owner's own notes are among the hits, beside the saved article
        # that also says "I".
        assert any(h["path"].startswith("Alex/") for h in hits)
        assert {
            "vault",
            "path",
            "header_path",
            "start_line",
            "end_line",
            "score",
            "content",
        } <= set(hits[0])
        only = await client.call_tool(
            "search", {"query": "postgres", "path_prefix": "Reference/", "top_k": 3}
        )
        assert all(h["path"].startswith("Reference/") for h in only.structured_content["hits"])
        # `after` and `before` are the note's own date: the journal's day, whatever its file's.
        day = await client.call_tool(
            "search",
            {"query": "mountain", "after": "2024-04-12", "before": "2024-04-13", "top_k": 20},
        )
        dated = day.structured_content["hits"]
        assert dated and {h["date"] for h in dated} == {"2024-04-12"}
        assert {h["path"] for h in dated} == {"Alex/Journal/2024-04-12.md"}

    run(kb, check)


def test_get_note_reads_a_note_or_a_range_of_its_lines(kb: Kb, vault: Path) -> None:
    async def check(client: Client) -> None:
        whole = await client.call_tool("get_note", {"vault": "v", "path": "Alex/Goals 2024.md"})
        assert whole.structured_content["text"] == (vault / "Alex/Goals 2024.md").read_text()
        part = await client.call_tool(
            "get_note",
            {"vault": "v", "path": "Alex/Goals 2024.md", "start_line": 2, "end_line": 3},
        )
        lines = (vault / "Alex/Goals 2024.md").read_text().split("\n")
        assert part.structured_content["text"] == "\n".join(lines[1:3])
        assert part.structured_content["total_lines"] == len(lines)

    run(kb, check)


@pytest.mark.parametrize(
    ("vault_name", "path", "error"),
    [
        ("v", "../secret.md", "not a path inside the vault"),
        ("v", "/etc/passwd", "not a path inside the vault"),
        ("v", "outside.md", "leads outside the vault"),
        ("v", ".trash/Deleted idea.md", "is not a note"),
        ("v", "Alex/missing.md", "no note"),
        ("nope", "Alex/Goals 2024.md", "no vault named 'nope'"),
    ],
)
def test_get_note_refuses_what_is_not_a_note_inside_the_vault(
    kb: Kb, vault: Path, tmp_path: Path, vault_name: str, path: str, error: str
) -> None:
    (tmp_path / "secret.md").write_text("the neighbour's diary")
    (vault / "outside.md").symlink_to(tmp_path / "secret.md")

    async def check(client: Client) -> None:
        result = await client.call_tool("get_note", {"vault": vault_name, "path": path})
        assert result.is_error
        assert error in tool_text(result)
        assert "neighbour" not in tool_text(result)

    run(kb, check)


def test_bad_arguments_are_tool_errors_the_model_can_read(kb: Kb) -> None:
    async def check(client: Client) -> None:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"query": "x", "top_k": 0}, "top_k: must be at least 1"),
            ({"query": "x", "mode": "fuzzy"}, "mode: must be 'hybrid', 'vector' or 'text'"),
            ({}, "query: required"),
        ]
        for args, error in cases:
            result = await client.call_tool("search", args)
            assert result.is_error
            assert tool_text(result) == f"invalid arguments to search: {error}"
        empty = await client.call_tool("search", {"query": "anything"})
        assert empty.is_error and "run `kb index` first" in tool_text(empty)

    run(kb, check)


def test_list_notes_pages_through_a_folder_and_tags(kb: Kb) -> None:
    kb.sync()

    async def check(client: Client) -> None:
        first = await client.call_tool("list_notes", {"folder": "Alex/", "limit": 3})
        page = first.structured_content
        assert page["total"] == 4 and len(page["notes"]) == 3 and page["next_offset"] == 3
        rest = await client.call_tool("list_notes", {"folder": "Alex/", "offset": 3})
        assert rest.structured_content["next_offset"] is None
        paths = [n["path"] for n in page["notes"] + rest.structured_content["notes"]]
        assert paths == sorted(paths) and all(p.startswith("Alex/") for p in paths)
        assert all(n["personal"] for n in page["notes"])
        tagged = await client.call_tool("list_notes", {"tags": ["journal"]})
        assert {n["path"] for n in tagged.structured_content["notes"]} == {
            "Alex/Journal/2024-04-12.md",
            "Alex/Journal/2024-05-03.md",
        }

    run(kb, check)


def test_status_and_ask(kb: Kb) -> None:
    kb.sync()

    async def check(client: Client) -> None:
        status = (await client.call_tool("status", {})).structured_content
        assert status["documents"] == 15 and status["embed_model"] == "hash-256"
        assert status["daemon"] == "not running"
        enrichment = status["enrichment"]
        assert enrichment["queued"] == enrichment["failing"] == 0
        assert enrichment["done_last_hour"] == 14 and enrichment["notes_per_minute"] > 0
        answer = await client.call_tool("ask", {"question": "which miso goes into the ramen"})
        assert not answer.is_error
        result = answer.structured_content
        assert result["cited"] and result["model"] == "fake-chat"
        assert set(result["cited"]) <= {s["number"] for s in result["sources"]}

    run(kb, check)


class Endlessly(FakeChat):
    """A chat model that writes a word every 10 ms for half a minute: `writing` is set at its
    first word, `closed` once its stream is closed."""

    def __init__(self) -> None:
        super().__init__("endless-chat")
        self.writing, self.closed = threading.Event(), threading.Event()

    def stream(self, prompt: Prompt) -> Iterator[str]:
        try:
            for _ in range(3000):
                self.writing.set()
                yield "word "
                time.sleep(0.01)
        finally:
            self.closed.set()


def test_a_cancelled_ask_closes_the_models_stream(kb: Kb) -> None:
    kb.sync()
    chat = kb.chat = Endlessly()

    async def check(client: Client) -> None:
        async with anyio.create_task_group() as asking:
            asking.start_soon(client.call_tool, "ask", {"question": "which miso"})
            assert await anyio.to_thread.run_sync(chat.writing.wait, 30)
            asking.cancel_scope.cancel()  # the client gives up: the server is told so
            cancelled = time.monotonic()
        # The model stops writing an answer no one will read, not at its last word.
        assert await anyio.to_thread.run_sync(chat.closed.wait, 5)
        assert time.monotonic() - cancelled < 5

    run(kb, check)


def test_ask_keeps_to_the_filters_search_has(kb: Kb) -> None:
    """`ask` takes `search`'s filters: here `after` and `before`, the note's own date."""
    kb.sync()
    question = "when did I climb a mountain"

    async def check(client: Client) -> None:
        day = await client.call_tool(
            "ask", {"question": question, "after": "2024-04-12", "before": "2024-04-13"}
        )
        assert not day.is_error, tool_text(day)
        sources = day.structured_content["sources"]
        assert sources and {s["path"] for s in sources} == {"Alex/Journal/2024-04-12.md"}
        assert {s["date"] for s in sources} == {"2024-04-12"}
        later = await client.call_tool("ask", {"question": question, "after": "2999-01-01"})
        assert later.structured_content["sources"] == []
        assert later.structured_content["model"] is None  # nothing found: no model asked
        wrong = await client.call_tool("ask", {"question": question, "before": "soon"})
        assert tool_text(wrong) == (
            "invalid arguments to ask: before: 'soon' is not a day (YYYY-MM-DD)"
        )

    run(kb, check)


def test_notes_are_resources(kb: Kb, vault: Path) -> None:
    async def check(client: Client) -> None:
        [template] = (await client.list_resource_templates()).resource_templates
        assert template.uri_template == "kb://{vault}/{+path}"
        note = (await client.read_resource("kb://v/Alex/Goals%202024.md")).contents[0]
        assert isinstance(note, TextResourceContents)
        assert note.text == (vault / "Alex/Goals 2024.md").read_text()
        with pytest.raises(MCPError):
            await client.read_resource("kb://v/Alex/missing.md")

    run(kb, check)


def test_a_symlinked_folder_inside_the_vault_is_still_contained(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    (root / "Notes").mkdir(parents=True)
    (root / "Notes/a.md").write_text("# A\n")
    (root / "linked").symlink_to(root / "Notes")
    vaults = Vaults(make_config(root).vaults)
    assert vaults.read("v", "linked/a.md").text == "# A\n"


# -- the `kb mcp` process ----------------------------------------------------------------------


@pytest.fixture
def indexed_config(cfg: Path, db_url: str) -> Path:
    env = {**os.environ, "KB_DATABASE_URL": db_url}
    subprocess.run(
        kb_command(cfg, "index"),
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return cfg


async def _exercise(client: Client) -> None:
    """What an assistant does: list the tools, call each one, and make one mistake."""
    assert {t.name for t in (await client.list_tools()).tools} == TOOLS
    hits = (await client.call_tool("search", {"query": "miso ramen"})).structured_content
    first = hits["hits"][0]
    note = await client.call_tool("get_note", {"vault": first["vault"], "path": first["path"]})
    assert not note.is_error and note.structured_content["text"]
    listed = await client.call_tool("list_notes", {"limit": 2})
    assert listed.structured_content["total"] == 15
    assert (await client.call_tool("status", {})).structured_content["documents"] == 15
    answer = await client.call_tool("ask", {"question": "which miso goes into the ramen"})
    assert answer.structured_content["cited"]
    outside = await client.call_tool("get_note", {"vault": "example", "path": "../kb.toml"})
    assert outside.is_error and "not a path inside the vault" in tool_text(outside)


def test_kb_mcp_over_stdio(indexed_config: Path, db_url: str) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=kb_command(indexed_config, "mcp")[1:],
        env={"KB_DATABASE_URL": db_url},
    )

    async def main() -> None:
        async with Client(params) as client:
            await _exercise(client)

    anyio.run(main)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def http_server(indexed_config: Path, db_url: str) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "KB_DATABASE_URL": db_url, "KB_MCP_TOKEN": "s3cret"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kb",
            "--config",
            str(indexed_config),
            "mcp",
            "--http",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_kb_mcp_over_http_needs_its_token(http_server: str) -> None:
    anonymous = httpx.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == "Bearer"
    wrong = httpx.post(http_server, headers={"Authorization": "Bearer guess"}, json={})
    assert wrong.status_code == 401
    for scheme in ("Basic", "Bearerish", "Bearer:"):
        other = httpx.post(http_server, headers={"Authorization": f"{scheme} s3cret"}, json={})
        assert other.status_code == 401, scheme

    async def main() -> None:
        headers: dict[str, Any] = {"Authorization": "Bearer s3cret"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(http_server, http_client=http)) as client,
        ):
            await _exercise(client)

    anyio.run(main)


@pytest.mark.parametrize("token", [None, "", "  \t "])
def test_kb_mcp_will_not_listen_beyond_loopback_without_a_token(
    indexed_config: Path, db_url: str, token: str | None
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KB_MCP_TOKEN"}
    if token is not None:
        env["KB_MCP_TOKEN"] = token
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kb",
            "--config",
            str(indexed_config),
            "mcp",
            "--http",
            "--host",
            "0.0.0.0",
        ],
        env={**env, "KB_DATABASE_URL": db_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "without a token: set KB_MCP_TOKEN" in result.stderr and "Traceback" not in result.stderr


class _Wire:
    """`kb mcp` over stdio, spoken line by line: what a client that sends bad bytes sees."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: bytes | str) -> None:
        assert self.proc.stdin
        raw = line.encode() if isinstance(line, str) else line
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """Close stdin, as a client does: kb exits at the end of its input."""
        assert self.proc.stdin
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def answer(self) -> dict[str, Any]:
        try:
            return json.loads(self.lines.get(timeout=30))
        except queue.Empty:
            pytest.fail("kb mcp gave no answer within 30 s")


def test_kb_mcp_over_stdio_answers_a_line_it_cannot_read(indexed_config: Path, db_url: str) -> None:
    wire = _Wire(kb_command(indexed_config, "mcp"), {**os.environ, "KB_DATABASE_URL": db_url})
    try:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        }
        wire.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        server = wire.answer()["result"]["serverInfo"]
        assert server == {"name": "kb", "version": version("kb")} and server["version"]
        wire.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        call = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": '
        call += '{"name": "search", "arguments": {"query": "%s"}}}'
        # A lone surrogate as a JSON escape (valid JSON, not valid Unicode), then as raw bytes
        # (not UTF-8), then a line that is not JSON at all.
        wire.send(call % (2, "\\ud800"))
        escaped = wire.answer()
        assert escaped["id"] == 2 and escaped["error"]["code"] == -32700
        wire.send((call % (3, "@")).encode().replace(b"@", b"\xed\xa0\x80"))
        raw = wire.answer()
        assert raw["id"] == 3 and "UTF-8" in raw["error"]["message"]
        wire.send(b'{"jsonrpc": "2.0", "id": 4, "meth')
        broken = wire.answer()
        assert broken["id"] is None and broken["error"]["code"] == -32700
        wire.send(b'{"jsonrpc": "2.0", "id": 5, "params": {}}')
        invalid = wire.answer()
        assert invalid["id"] == 5 and invalid["error"]["code"] == -32600
        wire.send(call % (6, "miso ramen"))
        after = wire.answer()
        assert after["id"] == 6 and "result" in after, after
        assert after["result"]["structuredContent"], after
    finally:
        wire.close()


def test_a_search_path_prefix_names_a_folder_of_the_vault(kb: Kb) -> None:
    kb.sync()

    async def check(client: Client) -> None:
        for written in ("Alex", "./Alex/", "/Alex"):
            found = await client.call_tool("search", {"query": "goals", "path_prefix": written})
            hits = found.structured_content["hits"]
            assert hits and all(h["path"].startswith("Alex/") for h in hits), written
        for tool, args in (("search", {"query": "goals"}), ("ask", {"question": "goals"})):
            outside = await client.call_tool(tool, {**args, "path_prefix": "../Alex"})
            assert outside.is_error and "'..' cannot name a folder" in tool_text(outside)

    run(kb, check)


_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR  "])
def test_kb_mcp_over_http_takes_the_bearer_scheme_in_any_case(
    http_server: str, scheme: str
) -> None:
    headers = {"Authorization": f"{scheme} s3cret", "Accept": "application/json, text/event-stream"}
    answer = httpx.post(http_server, headers=headers, json=_INITIALIZE)
    assert answer.status_code == 200, answer.text


def test_kb_mcp_over_http_answers_only_to_its_own_name_and_port(http_server: str) -> None:
    port = int(http_server.split(":")[2].split("/")[0])
    headers = {"Authorization": "Bearer s3cret", "Accept": "application/json, text/event-stream"}
    for host in (
        f"localhost:{port}.evil.com",  # a rebinding name that starts like this server's
        f"127.0.0.1:{port}.evil.com",
        f"evil.com:{port}",
        f"127.0.0.1:{port + 1}",
        f"localhost:{port}, evil.com",
    ):
        refused = httpx.post(http_server, headers={**headers, "Host": host}, json=_INITIALIZE)
        assert refused.status_code in (400, 403), (host, refused.status_code)
        assert "\n" not in refused.text.strip(), host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        answer = httpx.post(http_server, headers={**headers, "Host": host}, json=_INITIALIZE)
        assert answer.status_code == 200, (host, answer.text)


def test_kb_mcp_over_http_holds_no_session_a_client_could_leave_open(http_server: str) -> None:
    # A client that initializes and never closes its session must cost nothing: kb serves
    # each request on its own, so there is no session to expire.
    headers = {"Authorization": "Bearer s3cret", "Accept": "application/json, text/event-stream"}
    opened = httpx.post(http_server, headers=headers, json=_INITIALIZE)
    assert opened.status_code == 200 and "mcp-session-id" not in opened.headers
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    call["params"] = {"name": "status", "arguments": {}}
    headers["mcp-protocol-version"] = "2025-06-18"
    status = httpx.post(http_server, headers=headers, json=call)
    assert status.status_code == 200 and '"documents":15' in status.text.replace(" ", "")
