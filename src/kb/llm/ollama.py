"""Ollama through its official client: chat, and batched embeddings.

The client library is imported when a model is first made or asked for, not with this
module: the config reads the provider's spec (its default host, OLLAMA_HOST) on every
command, most of which never talk to a model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from kb.config import DEFAULT_OLLAMA_HOST
from kb.errors import LLMError, LLMUnavailable, ModelMissing, first_line
from kb.models.base import (
    MALFORMED,
    Prompt,
    TokenUsage,
    TransientError,
    read_stream,
    time_limit,
    with_retries,
)
from kb.models.providers import ProviderSpec

if TYPE_CHECKING:
    import ollama

T = TypeVar("T")


class OllamaChat:
    def __init__(
        self,
        host: str,
        model: str,
        *,
        timeout: float,
        retries: int,
        timeout_per_token: float = 0.0,
        backoff: float = 0.5,
        section: str = "llm",
    ) -> None:
        self.name = model
        self.host = host
        # How to point kb at another server: OLLAMA_HOST overrides only [llm]'s host.
        self._host_hint = "set OLLAMA_HOST" if section == "llm" else f"set {section}.host"
        self._timeout = timeout
        self._per_token = timeout_per_token
        # The client holds its time limit; one client per limit (prompts share a few).
        self._clients: dict[float, ollama.Client] = {}
        self._clients_lock = threading.Lock()
        self._retries = retries
        self._backoff = backoff
        self.usage = TokenUsage()

    def _client(self, max_tokens: int) -> ollama.Client:
        import ollama

        limit = time_limit(self._timeout, self._per_token, max_tokens)
        with self._clients_lock:
            if limit not in self._clients:
                self._clients[limit] = ollama.Client(host=self.host, timeout=limit)
            return self._clients[limit]

    def complete(self, prompt: Prompt) -> str:
        client = self._client(prompt.max_tokens)

        def call() -> str:
            response = client.chat(
                model=self.name, messages=prompt.messages(), options=_options(prompt)
            )
            self.usage.add(response.prompt_eval_count or 0, response.eval_count or 0)
            return response.message.content or ""

        return self._guard(call, self._retries)

    def stream(self, prompt: Prompt) -> Iterator[str]:
        parts = read_stream(
            lambda: self._client(prompt.max_tokens).chat(
                model=self.name, messages=prompt.messages(), options=_options(prompt), stream=True
            ),
            first=lambda call: self._guard(call, self._retries),
            rest=lambda call: self._guard(call, 0),
        )
        for part in parts:
            if part.done:
                # Only the last part carries the counts.
                self.usage.add(part.prompt_eval_count or 0, part.eval_count or 0)
            if part.message.content:
                yield part.message.content

    def _guard(self, call: Callable[[], T], retries: int) -> T:
        return _call(
            call,
            host=self.host,
            model=self.name,
            retries=retries,
            backoff=self._backoff,
            host_hint=self._host_hint,
        )


def _options(prompt: Prompt) -> dict[str, int | float]:
    return {"num_ctx": prompt.num_ctx, "num_predict": prompt.max_tokens, "temperature": 0}


class OllamaEmbedder:
    def __init__(
        self, host: str, model: str, *, timeout: float, retries: int, backoff: float = 0.5
    ) -> None:
        import ollama

        self.name = model
        self.host = host
        self._client = ollama.Client(host=host, timeout=timeout)
        self._retries = retries
        self._backoff = backoff

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        def call() -> list[list[float]]:
            response = self._client.embed(model=self.name, input=list(texts))
            return [list(v) for v in response.embeddings]

        return _call(
            call, host=self.host, model=self.name, retries=self._retries, backoff=self._backoff
        )


def _call(
    call: Callable[[], T],
    *,
    host: str,
    model: str,
    retries: int,
    backoff: float,
    host_hint: str = "set OLLAMA_HOST",
) -> T:
    import httpx
    import ollama

    def attempt() -> T:
        try:
            return call()
        except ollama.ResponseError as exc:
            if exc.status_code == 429 or exc.status_code >= 500:
                raise TransientError(str(exc)) from exc
            raise
        except httpx.TimeoutException:
            # Out of time: asking again would start the same long answer over.
            raise LLMError(
                f"Ollama at {host} gave no answer in time for '{model}': the server is "
                "overloaded, or raise llm.timeout / llm.timeout_per_token"
            ) from None
        except (ConnectionError, httpx.TransportError) as exc:
            raise TransientError(str(exc)) from exc
        except MALFORMED as exc:
            raise TransientError(f"malformed answer ({type(exc).__name__}: {exc})") from exc

    try:
        return with_retries(attempt, retries=retries, backoff=backoff)
    except TransientError as exc:
        if isinstance(exc.__cause__, ConnectionError | httpx.ConnectError):
            raise LLMUnavailable(
                f"cannot reach Ollama at {host}: start it (`ollama serve` or "
                f"`docker compose up`) or {host_hint}"
            ) from None
        raise LLMError(f"Ollama at {host} failed after {retries + 1} attempts: {exc}") from None
    except ollama.ResponseError as exc:
        if exc.status_code == 404 or "not found" in str(exc.error).lower():
            raise ModelMissing(
                f"model '{model}' is not available on Ollama at {host}: run `ollama pull {model}`"
            ) from None
        raise LLMError(
            f"Ollama at {host} rejected the request for '{model}': {exc.error}"
        ) from None


def models(host: str, *, timeout: float) -> list[str]:
    """The models an Ollama server has pulled, by name and tag ("nomic-embed-text:latest")."""
    import ollama

    try:
        listed = ollama.Client(host=host, timeout=timeout).list()
    except Exception as exc:  # a refused connection, a timeout, an HTTP error: all unreachable
        raise LLMError(f"Ollama at {host} cannot be reached: {first_line(exc)}") from None
    return [m.model for m in listed.models if m.model]


def url(value: str) -> str:
    """A host as Ollama itself accepts it ("0.0.0.0:11434", "host": no scheme) made a URL."""
    if "://" not in value:
        value = f"http://{value}"
    return value


def _down(host: str, wanted: Sequence[str]) -> tuple[str, ...]:
    return (
        f"ollama serve    (nothing answered at {host})",
        *(f"ollama pull {m}" for m in wanted),
        'or an OpenAI-compatible server: in [llm], provider = "openai" and '
        'host = "http://HOST:PORT/v1" (and api_key if it needs one)',
    )


PROVIDER = ProviderSpec(
    chat=lambda at: OllamaChat(
        at.host,
        at.model,
        timeout=at.timeout,
        retries=at.retries,
        timeout_per_token=at.timeout_per_token,
        section=at.section,
    ),
    embedder=lambda at: OllamaEmbedder(at.host, at.model, timeout=at.timeout, retries=at.retries),
    served_models=lambda host, api_key, timeout: models(host, timeout=timeout),
    default_host=DEFAULT_OLLAMA_HOST,
    host_variable="OLLAMA_HOST",
    host_url=url,
    down_fixes=_down,
    missing_fix=lambda model: f"ollama pull {model}",
)
