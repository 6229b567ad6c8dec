"""Re-ranking by a cross-encoder: a /rerank server (a real local HTTP server in a thread,
answering in Jina's shape or text-embeddings-inference's) and a local ONNX model the tests
build themselves (tests/support/crossencoder.py), both scoring a passage by the words it holds,
so the order they give is known. Searched on the example vault, in a real database."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from kb.errors import KbError, LLMError, LLMUnavailable
from kb.llm.onnx_crossencoder import OnnxCrossEncoder
from kb.llm.rerank_server import ANSWER_LIMIT, RerankServer, read_scores
from kb.results import SearchHit, SearchResult, explanation, hits_json
from kb.search.crossencoder import CrossEncoderReranker
from kb.services.searching import SearchRequest
from kb.store import Store
from support.cli import run_kb
from support.configs import make_config, write_config
from support.crossencoder import write_crossencoder
from support.fake_kb import Kb
from support.http import QuietHandler, serving

QUERY = "miso ramen"
RAMEN = "Reference/Recipes/Weeknight Miso Ramen.md"
DINNER = "Alex/Journal/2024-05-03.md"
# What both models weigh: the chunks that name Kenji, most for the one that names him most.
WEIGHTS = {"kenji": 5.0}
# The hits the re-ranker reads: the search's first six hold the journal's dinner with Kenji.
CANDIDATES = 6


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _where(hit: SearchHit) -> tuple[str, tuple[str, ...]]:
    return hit.path, tuple(hit.header_path)


# --- a /rerank server ------------------------------------------------------------------------


@dataclass
class RerankStub:
    """A /rerank endpoint that scores each passage by the weights of its words, answering
    in the shape of the request (`texts`: text-embeddings-inference's bare list; else Jina's
    `results`), sorted by score as real servers sort them. `reply` overrides the answer."""

    weights: Mapping[str, float] = field(default_factory=lambda: WEIGHTS)
    url: str = ""
    received: list[tuple[dict[str, Any], dict[str, str]]] = field(default_factory=list)
    reply: tuple[int, bytes] | None = None

    def answer(self, body: dict[str, Any]) -> Any:
        texts = body.get("texts", body.get("documents", []))
        scored = [
            (i, sum(self.weights.get(w, 0.0) for w in _words(text))) for i, text in enumerate(texts)
        ]
        scored.sort(key=lambda s: -s[1])
        if "texts" in body:
            return [{"index": i, "score": s} for i, s in scored]
        return {
            "model": body.get("model", "stub"),
            "object": "list",
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
            "results": [{"index": i, "relevance_score": s} for i, s in scored],
        }


def _handler(stub: RerankStub) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            stub.received.append((body, {k.lower(): v for k, v in self.headers.items()}))
            if stub.reply is not None:
                status, data = stub.reply
            elif self.path != "/rerank":
                status, data = 404, b'{"error": "Not Found"}'
            else:
                status, data = 200, json.dumps(stub.answer(body)).encode()
            self.send(status, data)

    return Handler


@pytest.fixture
def rerank_server() -> Iterator[RerankStub]:
    stub = RerankStub()
    with serving(_handler(stub)) as url:
        stub.url = f"{url}/rerank"
        yield stub


@pytest.fixture
def dead_rerank_url(dead_url: str) -> str:
    """A re-ranking server's address on a loopback port with nothing listening on it."""
    return f"{dead_url}/rerank"


# --- the example vault, searched with a re-ranker ----------------------------------------------


def _kb(store: Store, vault: Path, **rerank: Any) -> Kb:
    kb = Kb(store, make_config(vault, rerank={"candidates": CANDIDATES, **rerank}))
    kb.sync()
    return kb


def _search(kb: Kb, top_k: int = 8, rerank: bool | None = None) -> SearchResult:
    return kb.search_service().search(SearchRequest(QUERY, top_k=top_k, rerank=rerank))


def _expected(plain: Sequence[SearchHit], candidates: int) -> list[tuple[str, tuple[str, ...]]]:
    """The plain order with its first `candidates` sorted by the weights of their words
    (headings and chunk, as the model reads them), ties in search order."""

    def weight(hit: SearchHit) -> float:
        return sum(WEIGHTS.get(w, 0.0) for w in _words(" ".join([*hit.header_path, hit.content])))

    head = sorted(enumerate(plain[:candidates]), key=lambda p: (-weight(p[1]), p[0]))
    return [_where(h) for _, h in head] + [_where(h) for h in plain[candidates:]]


def _check_reranked(plain: SearchResult, found: SearchResult) -> None:
    assert not found.warnings
    assert [_where(h) for h in found.hits] == _expected(plain.hits, CANDIDATES)
    # The journal's dinner with Kenji, below the recipe in the search's own order, is now
    # first, and the recipe's notes (which name him once) second.
    assert plain.hits[0].path != DINNER and found.hits[0].path == DINNER
    assert _where(found.hits[1]) == (RAMEN, ("# Weeknight Miso Ramen", "## Notes"))
    assert all(h.rerank_score is not None for h in found.hits[:CANDIDATES])
    scores = [h.rerank_score or 0.0 for h in found.hits[:CANDIDATES]]
    assert scores[0] > scores[1] > 0 and scores[2:] == [0.0] * (CANDIDATES - 2)
    assert all(h.rerank_score is None for h in found.hits[CANDIDATES:])
    assert all(h.relevance is None for h in found.hits)


@pytest.mark.parametrize("style", ["jina", "tei"])
def test_a_rerank_server_reorders_the_first_candidates(
    store: Store, vault: Path, rerank_server: RerankStub, style: str
) -> None:
    kb = _kb(
        store, vault, backend="http", url=rerank_server.url, model="tiny", style=style, api_key="k"
    )
    assert kb.config.query.rerank  # a cross-encoder set up is used unasked
    plain = _search(kb, rerank=False)
    found = _search(kb)
    _check_reranked(plain, found)
    [(body, headers)] = rerank_server.received
    assert headers["authorization"] == "Bearer k"
    if style == "tei":
        assert set(body) == {"query", "texts", "truncate"} and len(body["texts"]) == CANDIDATES
    else:
        assert body["model"] == "tiny" and body["top_n"] == len(body["documents"]) == CANDIDATES
        assert "texts" not in body
    assert body["query"] == QUERY  # the user's words: the owner's name is for BM25 alone
    # Each scored passage says where it sits in its note.
    passages = body["texts"] if style == "tei" else body["documents"]
    assert passages[0].startswith("Weeknight Miso Ramen\n\n# Weeknight Miso Ramen")
    assert kb.chat.calls["rerank"] == 0  # the chat model judged nothing
    # Cached: the same search asks the server nothing.
    assert _search(kb).hits == found.hits
    assert len(rerank_server.received) == 1


def test_a_dead_rerank_server_leaves_the_search_order(
    store: Store, vault: Path, dead_rerank_url: str
) -> None:
    kb = _kb(store, vault, backend="http", url=dead_rerank_url)
    plain = _search(kb, rerank=False)
    found = _search(kb)
    assert found.hits == plain.hits and found.mode_used == "hybrid"
    [warning] = found.warnings
    assert warning.startswith("re-ranking skipped, results in search order: cannot reach the ")
    assert dead_rerank_url in warning and "\n" not in warning


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (404, b'{"error": "Not Found"}', "has no such endpoint (HTTP 404): rerank.url must be"),
        (401, b'{"error": {"message": "bad key"}}', "refused the request (HTTP 401): set"),
        (500, b'{"error": "model crashed\\nstack"}', "answered HTTP 500: model crashed"),
        (422, b'{"detail": "input too long"}', "answered HTTP 422: input too long"),
        (503, b"<html>\nbusy\n</html>", "answered HTTP 503: <html>"),
        (200, b"not json", "answered something other than JSON"),
        (200, b'{"data": []}', "answered without a list of results"),
        (200, b'[{"index": 0, "score": 1.0}]', "scored 1 of the 2 passages sent"),
        (200, b'[{"index": 0, "score": 1}, {"index": 7, "score": 2}]', "passage 7 of the 2"),
        (200, b'[{"score": 1.0}]', "a result with no index"),
        (200, b'{"results": [{"index": 0, "relevance_score": "high"}]}', "passage 0 with no"),
        # Nested past the parser's depth, and a number past any float or Python's digits.
        (200, b"[" * 100_000, "answered something other than JSON"),
        (500, b'{"error": ' + b"[" * 100_000, "answered HTTP 500: {"),
        (200, b'[{"index": 0, "score": 1%s}]' % (b"0" * 400), "passage 0 with no score"),
        (200, b'[{"index": 0, "score": 1%s}]' % (b"0" * 5000), "other than JSON"),
    ],
)
def test_a_server_fault_is_one_line(
    rerank_server: RerankStub, status: int, body: bytes, says: str
) -> None:
    rerank_server.reply = (status, body)
    with pytest.raises(LLMError) as raised:
        RerankServer(rerank_server.url).score("q", ["a", "b"])
    message = str(raised.value)
    assert message.startswith(f"the re-ranking server at {rerank_server.url} ")
    assert says in message and "\n" not in message


def test_a_server_that_does_not_answer_in_time(rerank_server: RerankStub) -> None:
    release = threading.Event()
    original = rerank_server.answer

    def slow(body: dict[str, Any]) -> Any:
        release.wait(5)
        return original(body)

    rerank_server.answer = slow  # type: ignore[method-assign]
    try:
        with pytest.raises(LLMError, match=r"gave no answer in 0\.2 s: .*rerank\.timeout"):
            RerankServer(rerank_server.url, timeout=0.2).score("q", ["a"])
    finally:
        release.set()


class Misbehaving(QuietHandler):
    """A /rerank endpoint that answers `kind`: a valid answer a byte every 10 ms (with the
    length it will reach), or bytes with no end in sight, 64 KB at a time."""

    kind = "trickle"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        answer = b'[{"index": 0, "score": 1.0}]' + b" " * 300
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.kind == "trickle":
            self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        pieces = [answer[i : i + 1] for i in range(len(answer))] if self.kind == "trickle" else []
        with contextlib.suppress(OSError):  # kb let go
            if self.kind == "trickle":
                for piece in pieces:
                    self.wfile.write(piece)
                    self.wfile.flush()
                    time.sleep(0.01)
            else:
                # Enough past the limit to show it; not forever, should the limit not hold.
                for _ in range(ANSWER_LIMIT // 65536 + 32):
                    self.wfile.write(b"[" + b"0," * 32767 + b"0")
        self.close_connection = True


def _misbehaving(kind: str) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (Misbehaving,), {"kind": kind})


def test_a_server_answering_a_byte_at_a_time_is_held_to_the_whole_timeout() -> None:
    with serving(_misbehaving("trickle")) as url:
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"gave no answer in 0\.5 s: .*rerank\.timeout"):
            RerankServer(f"{url}/rerank", timeout=0.5).score("q", ["a"])
        # Each byte came well within the timeout; the answer as a whole did not.
        assert time.monotonic() - started < 2.0


def test_a_search_whose_rerank_server_runs_out_of_time_keeps_its_order(
    store: Store, vault: Path
) -> None:
    with serving(_misbehaving("trickle")) as url:
        kb = _kb(store, vault, backend="http", url=f"{url}/rerank", timeout=0.5)
        plain = _search(kb, rerank=False)
        found = _search(kb)
    assert found.hits == plain.hits
    [warning] = found.warnings
    assert warning.startswith("re-ranking skipped, results in search order: the re-ranking ")
    assert "gave no answer in 0.5 s" in warning


def test_an_answer_without_end_is_read_to_the_limit() -> None:
    with (
        serving(_misbehaving("endless")) as url,
        pytest.raises(LLMError, match=r"answered more than 4 MB: is rerank\.url"),
    ):
        RerankServer(f"{url}/rerank", timeout=30).score("q", ["a"])


@pytest.mark.parametrize(
    "reply",
    [b"[" * 100_000, b'[{"index": 0, "score": 1%s}]' % (b"0" * 400)],
    ids=["nested", "huge-integer"],
)
def test_a_malformed_answer_leaves_the_search_order(
    store: Store, vault: Path, rerank_server: RerankStub, reply: bytes
) -> None:
    kb = _kb(store, vault, backend="http", url=rerank_server.url)
    plain = _search(kb, rerank=False)
    rerank_server.reply = (200, reply)
    found = _search(kb)
    assert found.hits == plain.hits
    [warning] = found.warnings
    assert warning.startswith("re-ranking skipped, results in search order: the re-ranking ")


def test_an_unreachable_server_is_unavailable(dead_rerank_url: str) -> None:
    with pytest.raises(LLMUnavailable, match=r"^cannot reach the re-ranking server at "):
        RerankServer(dead_rerank_url).score("q", ["a"])


def test_no_passages_ask_nothing(dead_rerank_url: str) -> None:
    assert RerankServer(dead_rerank_url).score("q", []) == []


@pytest.mark.parametrize(
    "answer",
    [
        # Jina, Cohere, llama-server, Infinity, vLLM: sorted by score, with extra fields.
        {
            "id": "x",
            "results": [
                {"index": 2, "relevance_score": 0.9, "document": {"text": "c"}},
                {"index": 0, "relevance_score": 0.5},
                {"index": 1, "relevance_score": -3},
            ],
        },
        # text-embeddings-inference: a bare list.
        [{"index": 1, "score": -3}, {"index": 2, "score": 0.9}, {"index": 0, "score": 0.5}],
    ],
)
def test_both_answer_shapes_are_read_by_index(answer: Any) -> None:
    assert read_scores(answer, 3, "here") == [0.5, -3.0, 0.9]


def test_a_password_in_the_url_is_not_shown(dead_rerank_url: str) -> None:
    url = dead_rerank_url.replace("http://", "http://kb:secret@")
    with pytest.raises(LLMError) as raised:
        RerankServer(url).score("q", ["a"])
    assert "secret" not in str(raised.value)
    assert RerankServer(url).name == url.replace("secret", "***")


# --- a local ONNX cross-encoder -----------------------------------------------------------------


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_crossencoder(tmp_path / "tiny-reranker", WEIGHTS, words=["miso", "ramen"])


def test_a_local_model_reorders_the_first_candidates(
    store: Store, vault: Path, model: Path
) -> None:
    kb = _kb(store, vault, backend="onnx", folder=str(model))
    plain = _search(kb, rerank=False)
    found = _search(kb)
    _check_reranked(plain, found)
    assert kb.chat.calls["rerank"] == 0
    # Shown by --explain and --json; a daemon's launcher rebuilds it (kb.daemon.query_socket).
    assert explanation(found.hits[0]).endswith(f"rerank {found.hits[0].rerank_score:.4f}")
    assert "rerank" not in explanation(found.hits[CANDIDATES])
    assert json.loads(hits_json(found))[0]["rerank_score"] == found.hits[0].rerank_score


def test_the_model_scores_the_passage_of_each_pair(model: Path) -> None:
    encoder = OnnxCrossEncoder(model)
    passages = ["Kenji came over", "kenji KENJI", "nothing", "the query's words: miso ramen"]
    # The query names Kenji too: only the passage's words count (its tokens of type 1).
    assert encoder.score("kenji miso", passages) == [5.0, 10.0, 0.0, 0.0]
    assert encoder.score("kenji", []) == []


def test_a_two_class_model_is_read_by_its_relevant_class(tmp_path: Path) -> None:
    folder = write_crossencoder(tmp_path / "two", {"kenji": 2.0, "tax": -1.0}, classes=2)
    assert OnnxCrossEncoder(folder).score("q", ["kenji", "tax", "x"]) == [2.0, -1.0, 0.0]


def test_a_model_that_takes_other_inputs_is_refused(tmp_path: Path) -> None:
    folder = write_crossencoder(tmp_path / "m", WEIGHTS, extra_inputs=("pixel_values",))
    with pytest.raises(KbError) as raised:
        OnnxCrossEncoder(folder).score("q", ["kenji"])
    assert str(raised.value) == (
        f"the model in {folder} is not a cross-encoder kb can run: it takes input_ids, "
        "attention_mask, token_type_ids, pixel_values, where kb gives input_ids, "
        "attention_mask, token_type_ids"
    )


def test_a_long_passage_is_cut_to_the_models_window(model: Path) -> None:
    (model / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 16}))
    # [CLS] q [SEP] and a final [SEP] leave 12 of the passage's tokens.
    assert OnnxCrossEncoder(model).score("q", ["kenji " * 100]) == [60.0]


class Counting:
    """A cross-encoder that counts what it scores."""

    def __init__(self, inner: OnnxCrossEncoder) -> None:
        self.inner = inner
        self.name = inner.name
        self.scored = 0

    def identity(self) -> str:
        return self.inner.identity()

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.scored += len(passages)
        return self.inner.score(query, passages)

    def close(self) -> None:
        self.inner.close()


def _hit(path: str, content: str) -> SearchHit:
    return SearchHit("v", path, ["# " + path], content, 0.5, 0.5, 1, 2)


def test_scores_are_cached_per_model_files(store: Store, model: Path) -> None:
    hits = [
        _hit("a.md", "nothing"),
        _hit("b.md", "kenji"),
        _hit("c.md", "kenji"),
        _hit("d.md", "x"),
    ]
    counting = Counting(OnnxCrossEncoder(model))
    reranker = CrossEncoderReranker(counting, store.caches, candidates=3, chars=600)
    first = reranker.rerank("who came", hits)
    assert [h.path for h in first] == ["b.md", "c.md", "a.md", "d.md"]
    assert counting.scored == 3
    assert reranker.rerank("who came", hits) == first and counting.scored == 3
    reranker.rerank("who else came", hits)
    assert counting.scored == 6  # another query is another pair
    # The same folder holding another model is asked again.
    write_crossencoder(model, {"nothing": 9.0})
    again = reranker.rerank("who came", hits)
    assert counting.scored == 9 and again[0].path == "a.md"


def test_the_model_reads_the_start_of_each_chunk(store: Store, model: Path) -> None:
    long = _hit("a.md", "x " * 500 + "kenji")
    reranker = CrossEncoderReranker(OnnxCrossEncoder(model), store.caches, candidates=3, chars=100)
    assert reranker.passage(long).startswith("a.md\n\nx x") and len(reranker.passage(long)) < 120
    [ranked] = reranker.rerank("q", [long])
    assert ranked.rerank_score == 0.0  # the name past the first 100 characters is not read


@pytest.mark.parametrize(
    ("break_it", "says"),
    [
        (shutil.rmtree, "the re-ranking model folder {m} does not exist"),
        (lambda m: (m / "model.onnx").unlink(), "no model.onnx in {m}: rerank.folder must hold"),
        (lambda m: (m / "tokenizer.json").unlink(), "no tokenizer.json in {m}"),
        (lambda m: (m / "model.onnx").write_bytes(b"\x00garbage"), "cannot load the re-ranking "),
        (lambda m: (m / "tokenizer.json").write_text("{}"), "cannot read {m}/tokenizer.json: "),
        (
            lambda m: write_crossencoder(m, WEIGHTS, classes=3),
            "the model in {m} is not a relevance cross-encoder: it gives 3 numbers a pair",
        ),
    ],
)
def test_a_missing_or_bad_model_is_one_line_naming_its_folder(
    store: Store, vault: Path, model: Path, break_it: Any, says: str
) -> None:
    kb = Kb(store, make_config(vault, rerank={"backend": "onnx", "folder": str(model)}))
    break_it(model)
    with pytest.raises(KbError) as raised:
        kb.reranker().rerank(QUERY, [_hit("a.md", "kenji")])
    message = str(raised.value)
    assert message.startswith(says.format(m=model)) and str(model) in message
    assert "\n" not in message


def test_a_search_with_a_missing_model_stops_with_its_line(
    store: Store, vault: Path, model: Path
) -> None:
    # Not a warning, as a dead server is: a folder that is not there will not come back.
    kb = _kb(store, vault, backend="onnx", folder=str(model))
    shutil.rmtree(model)
    with pytest.raises(KbError, match=r"^the re-ranking model folder .* does not exist"):
        _search(kb)


def test_a_model_in_an_onnx_subfolder_is_found(tmp_path: Path, model: Path) -> None:
    (model / "onnx").mkdir()
    (model / "model.onnx").rename(model / "onnx" / "model.onnx")
    assert OnnxCrossEncoder(model).score("q", ["kenji"]) == [5.0]


def test_nothing_to_score_loads_nothing(tmp_path: Path) -> None:
    # An empty list, or every score cached, never opens the folder's model.
    encoder = OnnxCrossEncoder(tmp_path / "absent")
    assert encoder.score("q", []) == []


def test_kb_query_explains_a_local_models_order(
    tmp_path: Path, vault: Path, model: Path, db_url: str
) -> None:
    """Whole `kb` processes: the scores in --explain and --json, a missing folder's line."""
    config = write_config(
        tmp_path / "kb.toml",
        vault,
        name="example",
        personal=(),
        rerank={"backend": "onnx", "folder": str(model), "candidates": CANDIDATES},
    )
    env = {**os.environ, "KB_DATABASE_URL": db_url, "COLUMNS": "200"}
    assert run_kb(config, env, "index").returncode == 0
    found = run_kb(config, env, "query", QUERY, "--json", "--top-k", str(CANDIDATES + 1))
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert hits[0]["path"] == DINNER and hits[0]["rerank_score"] > 0
    assert hits[CANDIDATES]["rerank_score"] is None
    shown = run_kb(config, env, "query", QUERY, "--explain", "--top-k", "1")
    assert f"rerank {hits[0]['rerank_score']:.4f}" in shown.stdout, shown.stdout
    shutil.rmtree(model)
    failed = run_kb(config, env, "query", QUERY, "--rerank")
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr == (
        f"error: the re-ranking model folder {model} does not exist (rerank.folder)\n"
    )


def test_the_chat_judge_is_still_the_default(store: Store, vault: Path) -> None:
    kb = Kb(store, make_config(vault, query={"rerank": True}))
    kb.sync()
    kb.reset_counts()
    found = _search(kb, top_k=3)
    assert found.hits[0].relevance is not None and found.hits[0].rerank_score is None
    assert kb.chat.calls["rerank"] > 0
