"""The two small interfaces kb needs from a model server, and shared retry rules."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

T = TypeVar("T")


@dataclass(frozen=True)
class Prompt:
    """One chat request: the text sent, and the structured inputs it was made from."""

    task: str  # "file_summary", "chunk_summary" or "rewrite"
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


class ChatModel(Protocol):
    name: str

    def complete(self, prompt: Prompt) -> str: ...


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class TransientError(Exception):
    """A failure worth retrying: a timeout, a dropped connection, a busy server."""


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
