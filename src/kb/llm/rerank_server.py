"""A re-ranking server's /rerank endpoint: text-embeddings-inference, llama.cpp's
`llama-server --reranking`, Infinity, vLLM, or a hosted API of the same shape.

Two requests are in use. Jina's and Cohere's, which llama-server, Infinity and vLLM take:
`{model, query, documents, top_n}`, answered `{results: [{index, relevance_score}, …]}`.
text-embeddings-inference's own: `{query, texts}`, answered by a bare list of
`{index, score}` (llama-server answers in whichever shape it was asked). The answer is read
in either shape whatever was sent, and by `index`: servers sort their results by score, not
in the order the passages went.

One attempt, no retries: a search waits on it, and a server that is down stays down for the
few seconds a retry would wait (the search then answers in its own order, with a warning).
The timeout holds the whole request, not each read (a server that writes its answer a byte
at a time would otherwise hold a search for as long as it likes), and the answer is read to
at most ANSWER_LIMIT bytes: it is read in the process that serves every search.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx

from kb.config import RerankStyle
from kb.errors import LLMError, LLMUnavailable, first_line
from kb.redact import redact

# Seconds to open a connection: a server on the same machine or network answers in far
# less, and one that does not is down; the rest of the timeout is for the scoring.
CONNECT_TIMEOUT = 5.0
# The most of a server's error text one line quotes.
_QUOTED = 200
# The most of an answer kb reads: the scores of rerank.candidates passages (at most 50), with
# their texts when a server sends them back, take a few kilobytes.
ANSWER_LIMIT = 4 * 1024 * 1024


class _TooSlow(Exception):
    """The whole request took longer than the timeout."""


class _TooLarge(Exception):
    """The answer ran past ANSWER_LIMIT."""


class RerankServer:
    """A cross-encoder behind a /rerank endpoint (kb.models.base.CrossEncoder)."""

    def __init__(
        self,
        url: str,
        *,
        model: str = "",
        api_key: str = "",
        style: RerankStyle = "jina",
        timeout: float = 30.0,
    ) -> None:
        self.url = url
        self.model = model
        self.style = style
        self.timeout = timeout
        self._api_key = api_key
        # A server that holds one model takes none in the request: it is then known by its
        # address (without any password in it).
        self.name = model or redact(url)
        # One client for all the searches of a process (a daemon's, a web page's): its
        # connections are kept, and making one costs more than a local server's answer.
        self._client: httpx.Client | None = None
        self._opening = threading.Lock()

    def identity(self) -> str:
        # The address too: two servers may name one model and score it on two scales (a
        # logit, or text-embeddings-inference's probability).
        return f"http {redact(self.url)} {self.model} {self.style}"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        shown = redact(self.url)
        deadline = time.monotonic() + self.timeout
        try:
            status, body = self._post(self._request(query, passages), deadline)
        except httpx.ConnectError as exc:
            raise LLMUnavailable(
                f"cannot reach the re-ranking server at {shown}: {first_line(exc)}"
            ) from None
        except (httpx.TimeoutException, _TooSlow):
            raise LLMError(
                f"the re-ranking server at {shown} gave no answer in {self.timeout:g} s: it is "
                "overloaded, or raise rerank.timeout (or lower rerank.candidates)"
            ) from None
        except _TooLarge:
            raise LLMError(
                f"the re-ranking server at {shown} answered more than "
                f"{ANSWER_LIMIT // (1024 * 1024)} MB: is rerank.url its /rerank endpoint?"
            ) from None
        except httpx.HTTPError as exc:
            raise LLMUnavailable(
                f"the re-ranking server at {shown} failed: {first_line(exc)}"
            ) from None
        if status >= 400:
            raise LLMError(_refusal(shown, status, body))
        answer = _json(body)
        if answer is _NOT_JSON:
            raise LLMError(f"the re-ranking server at {shown} answered something other than JSON")
        return read_scores(answer, len(passages), shown)

    def _post(self, request: dict[str, Any], deadline: float) -> tuple[int, bytes]:
        """The status and body of the answer, read whole by `deadline` (a monotonic time)
        and to at most ANSWER_LIMIT bytes; each read is bounded by the client's timeouts."""
        with self._http().stream("POST", self.url, json=request) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > ANSWER_LIMIT:
                raise _TooLarge
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > ANSWER_LIMIT:
                    raise _TooLarge
                if time.monotonic() > deadline:
                    raise _TooSlow
            return response.status_code, bytes(body)

    def close(self) -> None:
        with self._opening:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _http(self) -> httpx.Client:
        with self._opening:
            if self._client is None:
                headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
                self._client = httpx.Client(
                    headers=headers,
                    timeout=httpx.Timeout(self.timeout, connect=min(CONNECT_TIMEOUT, self.timeout)),
                    # Certificates are read only for an https:// endpoint: loading them takes
                    # longer (about 40 ms) than a local server takes to score.
                    verify=self.url.lower().startswith("https://"),
                )
            return self._client

    def _request(self, query: str, passages: Sequence[str]) -> dict[str, Any]:
        if self.style == "tei":
            # truncate: text-embeddings-inference refuses a pair longer than its model reads
            # unless told to cut it, as every other server does unasked.
            return {"query": query, "texts": list(passages), "truncate": True}
        request: dict[str, Any] = {"query": query, "documents": list(passages)}
        if self.model:
            request["model"] = self.model
        # Every score: llama-server returns only top_n results whenever it is given one,
        # and some hosted APIs a default few without it.
        request["top_n"] = len(passages)
        return request


def read_scores(answer: Any, count: int, shown: str) -> list[float]:
    """The scores of `count` passages, in their order, from an answer in either shape (a
    list of results, or an object holding them as `results`); an LLMError naming what is
    wrong with it otherwise."""
    results = answer.get("results") if isinstance(answer, dict) else answer
    if not isinstance(results, list):
        raise LLMError(
            f"the re-ranking server at {shown} answered without a list of results: is "
            "rerank.url its /rerank endpoint?"
        )
    scores: dict[int, float] = {}
    for item in results:
        index = item.get("index") if isinstance(item, dict) else None
        score = _score_of(item) if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool):
            raise LLMError(f"the re-ranking server at {shown} answered a result with no index")
        if not 0 <= index < count:
            raise LLMError(
                f"the re-ranking server at {shown} answered passage {index} of the {count} sent"
            )
        if score is None:
            raise LLMError(
                f"the re-ranking server at {shown} answered passage {index} with no score"
            )
        scores[index] = score
    if missing := [i for i in range(count) if i not in scores]:
        raise LLMError(
            f"the re-ranking server at {shown} scored {count - len(missing)} of the "
            f"{count} passages sent"
        )
    return [scores[i] for i in range(count)]


def _score_of(item: dict[str, Any]) -> float | None:
    for name in ("relevance_score", "score"):
        value = item.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                score = float(value)
            except OverflowError:  # an integer past any float (10**400): no score
                return None
            return score if math.isfinite(score) else None
    return None


_NOT_JSON = object()


def _json(body: bytes) -> Any:
    """The body read as JSON, or _NOT_JSON: a server's bytes may be anything, nested past
    the parser's depth or holding a number past Python's digits among them."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # ValueError: bad JSON, bad UTF-8, too many digits
        return _NOT_JSON


def _refusal(shown: str, status: int, body: bytes) -> str:
    """A refused request in one line, with what the server said and what to change."""
    if status in (401, 403):
        return (
            f"the re-ranking server at {shown} refused the request (HTTP {status}): set "
            "rerank.api_key (or KB_RERANK_API_KEY)"
        )
    if status in (404, 405):
        return (
            f"the re-ranking server at {shown} has no such endpoint (HTTP {status}): "
            "rerank.url must be the /rerank endpoint itself, e.g. http://localhost:8080/rerank"
        )
    said = _message(body)
    return f"the re-ranking server at {shown} answered HTTP {status}" + (
        f": {said}" if said else ""
    )


def _message(body: bytes) -> str:
    """What a server said about an error, in one short line: the `error`, `message` or
    `detail` of a JSON body (as each server writes it), else the body's first line."""
    said: Any = _json(body)
    if said is _NOT_JSON:
        said = body.decode("utf-8", "replace")
    if isinstance(said, dict):
        found = next((said[k] for k in ("error", "message", "detail") if k in said), "")
        if isinstance(found, dict):
            found = found.get("message", "")
        said = found if isinstance(found, str) else json.dumps(found)
    text = said.strip().splitlines()[0] if isinstance(said, str) and said.strip() else ""
    return text if len(text) <= _QUOTED else text[:_QUOTED].rstrip() + " […]"
