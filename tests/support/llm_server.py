"""Scripted model servers for the tests of kb's model clients: a stub that answers each
path from its own queue of replies, the replies Ollama and OpenAI-compatible servers give,
and a chat server that streams for as long as it is read."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.http import QuietHandler, serving


@dataclass
class Received:
    path: str
    body: Any
    headers: dict[str, str]  # names in lower case


@dataclass(frozen=True)
class Raw:
    """A reply sent as these bytes, not as JSON: a stream."""

    data: bytes
    content_type: str


@dataclass
class Stub:
    """A scripted HTTP server: each path answers from its own queue of replies."""

    url: str = ""
    received: list[Received] = field(default_factory=list)
    replies: dict[str, deque[tuple[int, Any, float]]] = field(
        default_factory=lambda: defaultdict(deque)
    )
    stop: threading.Event = field(default_factory=threading.Event)

    def reply(
        self, path: str, body: Any, status: int = 200, *, delay: float = 0.0, times: int = 1
    ) -> None:
        self.replies[path].extend([(status, body, delay)] * times)

    def count(self, path: str) -> int:
        return sum(r.path == path for r in self.received)


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            stub.received.append(Received(self.path, json.loads(raw), headers))
            queue = stub.replies[self.path]
            status, body, delay = (
                queue.popleft() if queue else (501, {"error": f"unscripted {self.path}"}, 0.0)
            )
            # Interruptible, so a slow reply does not outlive the test.
            if delay and stub.stop.wait(delay):
                return
            if isinstance(body, Raw):
                data, content_type = body.data, body.content_type
            elif isinstance(body, bytes):
                data, content_type = body, "application/json"
            else:
                data, content_type = json.dumps(body).encode(), "application/json"
            with contextlib.suppress(OSError):  # the client gave up waiting
                self.send(status, data, content_type)

    return Handler


@contextlib.contextmanager
def scripted() -> Iterator[Stub]:
    """A Stub serving on a free port for as long as the block runs."""
    s = Stub()
    with serving(_handler(s)) as s.url:
        try:
            yield s
        finally:
            s.stop.set()  # before the server stops: a slow reply must not hold it


def dead_url() -> str:
    """A loopback port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- Ollama

CHAT = "/api/chat"
EMBED = "/api/embed"


def ollama_chat_reply(content: str) -> dict[str, Any]:
    return {
        "model": "m",
        "created_at": "2024-07-22T20:33:28.123648Z",
        "message": {"role": "assistant", "content": content},
        "done_reason": "stop",
        "done": True,
        "total_duration": 5191566416,
        "load_duration": 2154458,
        "prompt_eval_count": 26,
        "prompt_eval_duration": 383809000,
        "eval_count": 298,
        "eval_duration": 4799921000,
    }


def ollama_embed_reply(vectors: list[list[float]]) -> dict[str, Any]:
    return {
        "model": "e",
        "embeddings": vectors,
        "total_duration": 14143917,
        "load_duration": 1019500,
        "prompt_eval_count": 8,
    }


def ollama_chat_stream(pieces: list[str]) -> Raw:
    """Ollama's streamed chat: one JSON object per line, the counts on the last."""
    lines = [
        {"model": "m", "message": {"role": "assistant", "content": p}, "done": False}
        for p in pieces
    ]
    lines.append(
        {
            "model": "m",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 26,
            "eval_count": len(pieces),
        }
    )
    return Raw("".join(json.dumps(line) + "\n" for line in lines).encode(), "application/x-ndjson")


# -- OpenAI-compatible

COMPLETIONS = "/v1/chat/completions"
EMBEDDINGS = "/v1/embeddings"


def openai_chat_reply(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1677652288,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
    }


def openai_embed_reply(vectors: dict[int, list[float]]) -> dict[str, Any]:
    """Embeddings listed in the order given, each tagged with its `index`."""
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in vectors.items()],
        "model": "e",
        "usage": {"prompt_tokens": 8, "total_tokens": 8},
    }


def openai_error(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def openai_chat_stream(pieces: list[str], *, usage: bool = True) -> Raw:
    """OpenAI's streamed chat: server-sent events, the counts in a last chunk without choices."""

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {
            "id": "chatcmpl-123",
            "object": "chat.completion.chunk",
            "created": 1694268190,
            "model": "m",
            "choices": choices,
            **extra,
        }

    events = [chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
    events += [chunk([{"index": 0, "delta": {"content": p}}]) for p in pieces]
    events.append(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    if usage:
        counts = {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}
        events.append(chunk([], usage=counts))
    data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return Raw(data.encode(), "text/event-stream")


class Endless(QuietHandler):
    """A chat server that writes its answer a piece every 10 ms for as long as it is read, in
    Ollama's lines or OpenAI's events by the path asked; `gone` is released each time a write
    fails (the client closed the connection), `over` ends them all."""

    gone: threading.Semaphore
    over: threading.Event

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == COMPLETIONS:
            delta = {"choices": [{"index": 0, "delta": {"content": "word "}}]}
            piece, kind = f"data: {json.dumps(delta)}\n\n", "text/event-stream"
        else:
            line = {"model": "m", "message": {"role": "assistant", "content": "word "}}
            piece, kind = json.dumps({**line, "done": False}) + "\n", "application/x-ndjson"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.end_headers()
        try:
            while not self.over.wait(0.01):
                self.wfile.write(piece.encode())
                self.wfile.flush()
        except OSError:
            self.gone.release()
