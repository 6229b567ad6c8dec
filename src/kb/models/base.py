"""The small interfaces kb needs from a model server, and shared retry rules."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

T = TypeVar("T")


# What a prompt asks for; the fake provider answers each in its way.
PromptTask = Literal[
    "file_summary",
    "note_summary",
    "chunk_summary",
    "chunk_summaries",
    "rewrite",
    "voice",
    "statements",
    "questions",
    "rerank",
    "answer",
]


@dataclass(frozen=True)
class Prompt:
    """One chat request: the text sent, and the structured inputs it was made from."""

    task: PromptTask
    system: str
    user: str
    max_tokens: int
    num_ctx: int
    inputs: Mapping[str, str] = field(default_factory=dict)
    # Worked examples as (user, assistant) turns, sent between the system text and `user`.
    examples: tuple[tuple[str, str], ...] = ()

    def messages(self) -> list[dict[str, str]]:
        """The chat turns: system, the examples, then the request."""
        turns = [{"role": "system", "content": self.system}]
        for asked, answered in self.examples:
            turns += [
                {"role": "user", "content": asked},
                {"role": "assistant", "content": answered},
            ]
        return [*turns, {"role": "user", "content": self.user}]


class TokenUsage:
    """What a chat model has been asked for so far, as its server counted it (thread-safe)."""

    def __init__(self) -> None:
        self.calls = 0
        self.prompt_tokens = 0
        self.output_tokens = 0
        self._lock = threading.Lock()

    def add(self, prompt_tokens: int, output_tokens: int) -> None:
        with self._lock:
            self.calls += 1
            self.prompt_tokens += prompt_tokens
            self.output_tokens += output_tokens


class ChatModel(Protocol):
    name: str
    usage: TokenUsage

    def complete(self, prompt: Prompt) -> str: ...

    def stream(self, prompt: Prompt) -> Iterator[str]:
        """The answer piece by piece as the server writes it; joined, what `complete` returns.

        Only opening the stream is retried: once text has been shown it cannot be taken back.
        """
        ...


class TextEmbedder(Protocol):
    """A model server's embeddings: texts in, vectors out, as they are."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class Embedder(TextEmbedder, Protocol):
    """What kb embeds with: `embed` for documents, `embed_query` for a search, each with what
    the model expects before it (see kb.llm.profiles)."""

    def embed_query(self, text: str) -> list[float]: ...


class CrossEncoder(Protocol):
    """A model that reads a query and a passage together and scores how well the passage
    answers it: a re-ranking server (kb.llm.rerank_server) or a local ONNX export
    (kb.llm.onnx_crossencoder). Higher is better; the scale is the model's own."""

    # Who scored, as stored with each score.
    name: str

    def identity(self) -> str:
        """What its scores depend on (the model, or a local model's files): part of the
        cache key of every score, so another model, or the same folder holding a new one,
        is asked again."""
        ...

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in their order."""
        ...

    def close(self) -> None:
        """Lets go of its connections or its loaded model."""
        ...


class TransientError(Exception):
    """A failure worth retrying: a refused or dropped connection, a busy server."""


# What a client library raises on an answer that is not the protocol's JSON (an HTML error
# page from a proxy, a truncated body, a list for an object): the server's fault, not kb's.
MALFORMED = (ValueError, TypeError, AttributeError, KeyError)


def time_limit(timeout: float, per_token: float, max_tokens: int) -> float:
    """Seconds one chat request may take: the prompt's share, and each token it may write.

    A long answer from a small model on a busy CPU legitimately takes minutes, and a request
    abandoned for being slow is never sent again: the server would only start it over.
    """
    return timeout + per_token * max_tokens


_END = object()


def read_stream(
    open_stream: Callable[[], Iterable[T]],
    *,
    first: Callable[[Callable[[], Any]], Any],
    rest: Callable[[Callable[[], Any]], Any],
) -> Iterator[T]:
    """The items of a server's stream. Opening it and reading its first item go through
    `first` (retried: nothing has been shown yet), every later item through `rest` (errors
    made readable, not retried: a retry would repeat what was already shown)."""

    def start() -> tuple[Iterable[T], Iterator[T], Any]:
        opened = open_stream()
        items = iter(opened)
        return opened, items, next(items, _END)

    opened, items, item = first(start)
    try:
        while item is not _END:
            yield item
            item = rest(lambda: next(items, _END))
    finally:
        close_stream(items)
        # The stream itself too: an iterator over an OpenAI client's stream closes nothing, and
        # its answer, held by a reference cycle, would stay open until the collector came round
        # while the server went on writing it.
        close_stream(opened)


def close_stream(items: Iterable[Any]) -> None:
    """Close a server's stream that its reader leaves early (a page closed mid-answer), so
    the server stops writing now rather than when the collector gets to it; an iterator with
    nothing to close is left as it is."""
    close = getattr(items, "close", None)
    if close is not None:
        close()


def with_retries(call: Callable[[], T], *, retries: int, backoff: float = 0.5) -> T:
    """Run `call`, retrying TransientError with exponential backoff."""
    for attempt in Retrying(
        stop=stop_after_attempt(retries + 1),
        wait=wait_exponential(multiplier=backoff, max=20),
        retry=retry_if_exception(lambda e: isinstance(e, TransientError)),
        reraise=True,
    ):
        with attempt:
            return call()
    raise AssertionError("unreachable")
