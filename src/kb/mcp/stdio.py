"""MCP over stdio that answers every line: the SDK's transport, behind kb's own line reader.

The SDK's stdio reader drops a line it cannot validate (a lone surrogate such as `"\\ud800"`,
bytes that are not UTF-8, JSON cut short) without a reply, and the client then waits for ever.
kb reads stdin itself, answers such a line with a JSON-RPC error (with the request's id when it
can be read, else null), and passes on only the lines the SDK accepts.
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any, Protocol, TextIO

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import ValidationError

from mcp.server import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage


class _Sender(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class StdioServer(MCPServer[Any]):
    """An MCPServer whose stdio transport answers the lines it cannot read."""

    async def run_stdio_async(self) -> None:
        replies_in, replies_out = anyio.create_memory_object_stream[SessionMessage](16)
        text = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape")
        try:
            # Only stdin is kb's: the SDK still claims stdout, so stray output cannot reach the
            # wire.
            async with (
                stdio_server(stdin=CheckedLines(text, replies_in)) as (read_stream, write_stream),
                anyio.create_task_group() as tasks,
            ):
                tasks.start_soon(_forward, replies_out, write_stream)
                await self._lowlevel_server.run(
                    read_stream,
                    write_stream,
                    self._lowlevel_server.create_initialization_options(),
                )
                tasks.cancel_scope.cancel()
        finally:
            # Detached, the wrapper cannot close sys.stdin's buffer when it is collected.
            text.detach()


class CheckedLines(anyio.AsyncFile[str]):
    """stdin's lines that are JSON-RPC messages; every other line is answered, not passed on."""

    def __init__(self, fp: TextIO, replies: MemoryObjectSendStream[SessionMessage]) -> None:
        super().__init__(fp)
        self._replies = replies

    async def readline(self) -> str:
        while True:
            line = await super().readline()
            error = rejection(line) if line.strip() else None
            if error is None:
                return line
            await self._replies.send(SessionMessage(error))


def rejection(line: str) -> types.JSONRPCError | None:
    """The error that answers a line the SDK would not accept; None for a good line.

    `line` is decoded with surrogateescape, so bytes that are not UTF-8 show as lone surrogates.
    """
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return _error(
            _loads(line), types.PARSE_ERROR, "Parse error: the message is not valid UTF-8"
        )
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        problem = exc.errors()[0]
        parsed = _loads(line)
        if problem["type"] != "json_invalid":
            return _error(
                parsed, types.INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message"
            )
        if parsed is not None:
            # Python's JSON reader takes an escaped lone surrogate; the SDK's does not.
            return _error(
                parsed,
                types.PARSE_ERROR,
                "Parse error: the message holds a lone surrogate escape (such as \\ud800), "
                "which is not valid Unicode",
            )
        return _error(None, types.PARSE_ERROR, f"Parse error: {problem['msg']}")
    return None


def _loads(line: str) -> object:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _error(parsed: object, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=_request_id(parsed), error=types.ErrorData(code=code, message=message)
    )


def _request_id(parsed: object) -> int | str | None:
    # A malformed response's id is not echoed: it could settle one of the client's own
    # pending requests with this error.
    if not isinstance(parsed, dict) or "result" in parsed or "error" in parsed:
        return None
    found = parsed.get("id")
    if isinstance(found, bool):
        return None
    if isinstance(found, int):
        return found
    if isinstance(found, str):
        try:
            found.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return found
    return None


async def _forward(
    replies: MemoryObjectReceiveStream[SessionMessage],
    write_stream: _Sender,
) -> None:
    async with replies:
        async for reply in replies:
            await write_stream.send(reply)
