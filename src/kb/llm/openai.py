"""Any OpenAI-compatible server: llama.cpp server, LM Studio, vLLM.

The client library is imported when a model is first made or asked for, not with this
module: the config reads the provider's spec on every command, most of which never talk to
a model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

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

T = TypeVar("T")


def _base_url(host: str) -> str:
    host = host.rstrip("/")
    return host if host.endswith("/v1") else f"{host}/v1"


class _OpenAIBase:
    MODEL_KEY = "chat_model"

    def __init__(
        self,
        host: str,
        model: str,
        *,
        api_key: str,
        timeout: float,
        retries: int,
        backoff: float = 0.5,
        section: str = "llm",
    ) -> None:
        self.name = model
        # Where the model and its server are configured, for the errors that say what to fix.
        self._host_key = f"{section}.host"
        self._model_key = f"{section}.{self.MODEL_KEY}"
        import openai

        self.host = _base_url(host)
        # Retries are ours (with_retries), so the client's own are off.
        self._client = openai.OpenAI(
            base_url=self.host, api_key=api_key or "unused", timeout=timeout, max_retries=0
        )
        self._timeout = timeout
        self._retries = retries
        self._backoff = backoff

    def _call(self, call: Callable[[], T], retries: int | None = None) -> T:
        import openai

        retries = self._retries if retries is None else retries

        def attempt() -> T:
            try:
                return call()
            except openai.APITimeoutError:
                # Out of time: asking again would start the same long answer over.
                raise LLMError(
                    f"server at {self.host} gave no answer in time for '{self.name}': it is "
                    "overloaded, or raise llm.timeout / llm.timeout_per_token"
                ) from None
            except openai.APIConnectionError as exc:
                raise TransientError(str(exc)) from exc
            except openai.APIStatusError as exc:
                if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
                    raise TransientError(f"HTTP {exc.status_code}: {exc.message}") from exc
                raise
            except MALFORMED as exc:
                raise TransientError(f"malformed answer ({type(exc).__name__}: {exc})") from exc

        try:
            return with_retries(attempt, retries=retries, backoff=self._backoff)
        except TransientError as exc:
            if isinstance(exc.__cause__, openai.APIConnectionError):
                raise LLMUnavailable(
                    f"cannot reach the OpenAI-compatible server at {self.host}: "
                    f"start it or fix {self._host_key}"
                ) from None
            raise LLMError(
                f"server at {self.host} failed after {retries + 1} attempts: {exc}"
            ) from None
        except openai.NotFoundError:
            raise ModelMissing(
                f"model '{self.name}' is not available on {self.host}: load it on the server "
                f"or fix {self._model_key}"
            ) from None
        except openai.APIStatusError as exc:
            raise LLMError(
                f"server at {self.host} rejected the request for '{self.name}': "
                f"HTTP {exc.status_code}: {exc.message}"
            ) from None


class OpenAIChat(_OpenAIBase):
    def __init__(self, *args: Any, timeout_per_token: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._per_token = timeout_per_token
        self.usage = TokenUsage()

    def complete(self, prompt: Prompt) -> str:
        limit = time_limit(self._timeout, self._per_token, prompt.max_tokens)

        def call() -> str:
            response = self._client.chat.completions.create(
                model=self.name,
                messages=_messages(prompt),
                max_tokens=prompt.max_tokens,
                temperature=0,
                timeout=limit,
            )
            if response.usage is not None:
                self.usage.add(response.usage.prompt_tokens, response.usage.completion_tokens)
            if not response.choices:
                return ""
            return response.choices[0].message.content or ""

        return self._call(call)

    def stream(self, prompt: Prompt) -> Iterator[str]:
        chunks = read_stream(
            lambda: self._client.chat.completions.create(
                model=self.name,
                messages=_messages(prompt),
                max_tokens=prompt.max_tokens,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            ),
            first=self._call,
            rest=lambda call: self._call(call, retries=0),
        )
        pieces = 0
        usage = None
        for chunk in chunks:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                if choice.delta.content:
                    pieces += 1
                    yield choice.delta.content
        # A server that ignores include_usage sends no counts; each streamed piece is then
        # the best count of output tokens there is.
        if usage is not None:
            self.usage.add(usage.prompt_tokens, usage.completion_tokens)
        else:
            self.usage.add(0, pieces)


class OpenAIEmbedder(_OpenAIBase):
    MODEL_KEY = "embed_model"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        def call() -> list[list[float]]:
            response = self._client.embeddings.create(model=self.name, input=list(texts))
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(texts):
                raise LLMError(
                    f"server at {self.host} returned {len(data)} embeddings for {len(texts)} texts"
                )
            return [list(d.embedding) for d in data]

        return self._call(call)


def _messages(prompt: Prompt) -> list[ChatCompletionMessageParam]:
    # Prompt.messages() are plain role/content dicts: the shape these typed dicts describe.
    return cast("list[ChatCompletionMessageParam]", prompt.messages())


def models(host: str, *, api_key: str, timeout: float) -> list[str]:
    """The models an OpenAI-compatible server lists."""
    import openai

    client = openai.OpenAI(
        base_url=_base_url(host), api_key=api_key or "unused", timeout=timeout, max_retries=0
    )
    try:
        return [m.id for m in client.models.list()]
    except Exception as exc:  # a refused connection, a timeout, an HTTP error: all unreachable
        raise LLMError(
            f"the server at {_base_url(host)} cannot be reached: {first_line(exc)}"
        ) from None


PROVIDER = ProviderSpec(
    chat=lambda at: OpenAIChat(
        at.host,
        at.model,
        api_key=at.api_key,
        timeout=at.timeout,
        retries=at.retries,
        timeout_per_token=at.timeout_per_token,
        section=at.section,
    ),
    embedder=lambda at: OpenAIEmbedder(
        at.host, at.model, api_key=at.api_key, timeout=at.timeout, retries=at.retries
    ),
    served_models=lambda host, api_key, timeout: models(host, api_key=api_key, timeout=timeout),
    example_host="http://localhost:8000/v1",
)
