"""Every MCP tool argument given what a confused model or an attacker would send: each call
gets its result or one line saying what is wrong, never a crash hidden behind "Error executing
tool"; and the stdio line reader answers whatever it cannot pass on."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from kb.mcp.stdio import rejection
from kb.mcp.tools import build_server
from kb.services.inputs import NAME_BYTES, PATH_BYTES
from kb.services.request_fields import FILTERS
from support.fake_kb import Kb
from support.reading import tool_text

VALID: dict[str, dict[str, Any]] = {
    "search": {"query": "miso ramen"},
    "get_note": {"vault": "v", "path": "Alex/Goals 2024.md"},
    "list_notes": {},
    "status": {},
    "ask": {"question": "which miso goes into the ramen"},
}
FILTERED = [f.name for f in FILTERS]
ARGUMENTS = {
    "search": ["query", "mode", "top_k", *FILTERED],
    "get_note": ["vault", "path", "start_line", "end_line"],
    "list_notes": ["vault", "folder", "tags", "offset", "limit"],
    "status": ["unexpected"],
    "ask": ["question", "top_k", *FILTERED],
}
HOSTILE: list[Any] = [
    "a\x00b",
    "\ud800",
    "",
    "x" * 5000,
    "Alex/" + "é" * 200 + ".md",  # one name of 400 bytes
    "../" * 2000,
    10**20,
    -(10**20),
    -1,
    0,
    float("nan"),
    float("inf"),
    1.5,
    True,
    None,
    ["x"],
    {"a": 1},
    "2024-13-45",
    "99999-01-01",
]


def _cases() -> list[tuple[str, dict[str, Any]]]:
    cases = []
    for tool, names in ARGUMENTS.items():
        for name in names:
            for value in HOSTILE:
                cases.append((tool, {**VALID[tool], name: value}))
                if name == "tags":
                    cases.append((tool, {**VALID[tool], name: [value]}))
    return cases


def test_every_tool_answers_every_hostile_argument_in_one_line(
    kb: Kb, caplog: pytest.LogCaptureFixture
) -> None:
    kb.sync()
    server = build_server(kb)
    wrong: list[str] = []

    async def main() -> None:
        async with Client(server) as client:
            for tool, args in _cases():
                with anyio.fail_after(30):
                    result = await client.call_tool(tool, args)
                if not result.is_error:
                    continue
                text = tool_text(result)
                # The SDK's whole message for a tool that crashed: it hides what went wrong.
                crashed = text == f"Error executing tool {tool}"
                if crashed or "\n" in text or len(text) > 300:
                    wrong.append(f"{tool}({args!r:.80}) -> {text!r:.200}")

    with caplog.at_level(logging.ERROR):
        anyio.run(main)
    assert not wrong, "\n".join(wrong)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    ("tool", "args", "error"),
    [
        ("search", {"query": "a\x00b"}, "query: contains a NUL character"),
        ("search", {"query": "x", "path_prefix": "a\x00"}, "path_prefix: contains a NUL"),
        ("search", {"query": "x", "tags": ["a\x00"]}, "tags.0: contains a NUL character"),
        ("ask", {"question": "a\x00b"}, "question: contains a NUL character"),
        ("list_notes", {"folder": "A\x00"}, "folder: contains a NUL character"),
        ("list_notes", {"tags": ["\x00"]}, "tags.0: contains a NUL character"),
        ("list_notes", {"vault": "\x00"}, "vault: contains a NUL character"),
        ("list_notes", {"offset": 10**20}, "offset: must be at most 1000000000"),
        ("list_notes", {"offset": -1}, "offset: must be at least 0"),
        ("search", {"query": "x", "top_k": 10**20}, "top_k: must be at most 50"),
        (
            "get_note",
            {"vault": "v", "path": "Alex/" + "é" * 200 + ".md"},
            "path: the name 'éééé",
        ),
        (
            "get_note",
            {"vault": "v", "path": "a/" * 2100},
            f"path: is 4200 bytes long; at most {PATH_BYTES}",
        ),
        ("search", {"query": "x", "path_prefix": "p" * 300}, f"at most {NAME_BYTES} bytes"),
        ("search", {"query": "x", "top_k": "many"}, "top_k: must be a whole number"),
        # JSON's true is no number, though Python counts it as 1.
        ("search", {"query": "x", "top_k": True}, "top_k: must be a whole number, not true"),
        ("ask", {"question": "x", "top_k": True}, "top_k: must be a whole number, not true"),
        ("list_notes", {"offset": False}, "offset: must be a whole number, not false"),
        ("get_note", {"vault": "v", "path": "a.md", "start_line": True}, "start_line: must be"),
        ("search", {}, "query: required"),
    ],
)
def test_what_is_wrong_is_named(kb: Kb, tool: str, args: dict[str, Any], error: str) -> None:
    async def main() -> None:
        async with Client(build_server(kb)) as client:
            result = await client.call_tool(tool, args)
            assert result.is_error
            assert error in tool_text(result)
            assert "\n" not in tool_text(result)

    anyio.run(main)


@pytest.mark.parametrize(
    ("line", "code", "request_id"),
    [
        ('{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": "\\ud800"}}', -32700, 7),
        ('{"jsonrpc": "2.0", "id": "r\\ud800", "method": "ping"}', -32700, None),
        ('{"jsonrpc": "2.0", "id": 8, "method": "ping", "x": "\udced"}', -32700, 8),
        ('{"jsonrpc": "2.0", "id": 9, "meth', -32700, None),
        ('{"jsonrpc": "2.0", "id": 10}', -32600, 10),
        ('{"jsonrpc": "2.0", "id": true, "method": "ping", "params": 5}', -32600, None),
        # A malformed response: answering with its id could fail one of the client's requests.
        ('{"jsonrpc": "2.0", "id": 11, "result": 5, "error": 6}', -32600, None),
        ("[1, 2]", -32600, None),
    ],
)
def test_a_line_the_sdk_would_drop_is_answered(line: str, code: int, request_id: object) -> None:
    error = rejection(line)
    assert error is not None
    assert (error.error.code, error.id) == (code, request_id)


def test_a_good_line_is_passed_on() -> None:
    assert rejection('{"jsonrpc": "2.0", "id": 1, "method": "ping"}') is None
    assert rejection('{"jsonrpc": "2.0", "id": 1, "method": "ping", "p": "\\ud83d\\ude00"}') is None


@pytest.mark.parametrize(
    ("uri", "error"),
    [
        ("kb://v/Alex/" + "e" * 300 + ".md", f"a name is at most {NAME_BYTES} bytes"),
        ("kb://v/" + "a/" * 2100 + "b.md", f"at most {PATH_BYTES}"),
        ("kb://v/Alex/a%00b.md", "Unknown resource"),
    ],
)
def test_a_note_resource_with_an_impossible_path_is_one_clear_error(
    kb: Kb, uri: str, error: str
) -> None:
    async def main() -> None:
        async with Client(build_server(kb)) as client:
            with pytest.raises(MCPError) as raised:
                await client.read_resource(uri)
            assert error in str(raised.value) and "\n" not in str(raised.value)

    anyio.run(main)
