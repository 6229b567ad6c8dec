"""The Ollama and OpenAI-compatible providers against a local stub server that
speaks each protocol: request shapes, response parsing, retries and error mapping."""

from __future__ import annotations

import gc
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

import pytest

from kb.errors import LLMError, LLMUnavailable, ModelMissing
from kb.indexing.verify import verify
from kb.llm.fake import FakeChat, FakeEmbedder
from kb.llm.ollama import OllamaChat, OllamaEmbedder
from kb.llm.openai import OpenAIChat, OpenAIEmbedder
from kb.models.base import Prompt, close_stream
from support.fake_kb import Kb
from support.http import serving
from support.llm_server import (
    CHAT,
    COMPLETIONS,
    EMBED,
    EMBEDDINGS,
    Endless,
    Stub,
    ollama_chat_reply,
    ollama_chat_stream,
    ollama_embed_reply,
    openai_chat_reply,
    openai_chat_stream,
    openai_embed_reply,
    openai_error,
)

PROMPT = Prompt(
    task="rewrite", system="You rewrite.", user="Rewrite this.", max_tokens=64, num_ctx=2048
)


class Patience(TypedDict):
    timeout: float
    retries: int
    backoff: float


# No waiting between retries, and a timeout short enough for a slow reply to trip it.
FAST = Patience(timeout=0.3, retries=2, backoff=0.0)
SLOW: Patience = {**FAST, "retries": 1}  # each attempt waits out the whole timeout


# -- Ollama -----------------------------------------------------------------------------


def test_ollama_chat_sends_prompt_and_returns_content(stub: Stub) -> None:
    stub.reply(CHAT, ollama_chat_reply("Rewritten."))
    out = OllamaChat(stub.url, "m", **FAST).complete(PROMPT)
    assert out == "Rewritten."
    [req] = stub.received
    assert req.path == CHAT
    assert req.body["model"] == "m"
    assert req.body["messages"] == [
        {"role": "system", "content": "You rewrite."},
        {"role": "user", "content": "Rewrite this."},
    ]
    assert req.body["options"] == {"num_ctx": 2048, "num_predict": 64, "temperature": 0}
    assert req.body["stream"] is False


def test_ollama_stream_yields_pieces_and_counts_usage(stub: Stub) -> None:
    stub.reply(CHAT, ollama_chat_stream(["The NAS ", "runs ", "ZFS [1]."]))
    chat = OllamaChat(stub.url, "m", **FAST)
    assert list(chat.stream(PROMPT)) == ["The NAS ", "runs ", "ZFS [1]."]
    [req] = stub.received
    assert req.body["stream"] is True
    assert req.body["messages"][-1] == {"role": "user", "content": "Rewrite this."}
    assert (chat.usage.calls, chat.usage.prompt_tokens, chat.usage.output_tokens) == (1, 26, 3)


def test_ollama_stream_retries_a_busy_server_before_the_first_piece(stub: Stub) -> None:
    stub.reply(CHAT, {"error": "server busy"}, 503)
    stub.reply(CHAT, ollama_chat_stream(["ok"]))
    assert "".join(OllamaChat(stub.url, "m", **FAST).stream(PROMPT)) == "ok"
    assert stub.count(CHAT) == 2


def test_ollama_stream_unreachable_is_unavailable(dead_url: str) -> None:
    with pytest.raises(LLMUnavailable, match="cannot reach Ollama"):
        list(OllamaChat(dead_url, "m", **FAST).stream(PROMPT))


def test_ollama_embed_sends_input_list(stub: Stub) -> None:
    stub.reply(EMBED, ollama_embed_reply([[0.1, 0.2], [0.3, 0.4]]))
    out = OllamaEmbedder(stub.url, "e", **FAST).embed(("one", "two"))
    assert out == [[0.1, 0.2], [0.3, 0.4]]
    assert all(type(v) is list for v in out)
    [req] = stub.received
    assert req.path == EMBED
    assert req.body["model"] == "e"
    assert req.body["input"] == ["one", "two"]


@pytest.mark.parametrize("status", [503, 429])
def test_ollama_retries_busy_server(stub: Stub, status: int) -> None:
    stub.reply(CHAT, {"error": "server busy"}, status)
    stub.reply(CHAT, ollama_chat_reply("ok"))
    assert OllamaChat(stub.url, "m", **FAST).complete(PROMPT) == "ok"
    assert stub.count(CHAT) == 2


def test_ollama_persistent_500_is_llm_error_after_all_attempts(stub: Stub) -> None:
    stub.reply(EMBED, {"error": "boom"}, 500, times=3)
    with pytest.raises(LLMError, match="failed after 3 attempts") as info:
        OllamaEmbedder(stub.url, "e", **FAST).embed(["x"])
    assert type(info.value) is LLMError
    assert stub.count(EMBED) == 3


def test_ollama_missing_model_says_how_to_pull(stub: Stub) -> None:
    stub.reply(CHAT, {"error": "model 'x' not found, try pulling it first"}, 404)
    with pytest.raises(ModelMissing, match="ollama pull x"):
        OllamaChat(stub.url, "x", **FAST).complete(PROMPT)
    assert stub.count(CHAT) == 1


def test_ollama_bad_request_is_not_retried(stub: Stub) -> None:
    stub.reply(CHAT, {"error": "invalid options"}, 400)
    with pytest.raises(LLMError, match="invalid options") as info:
        OllamaChat(stub.url, "m", **FAST).complete(PROMPT)
    assert type(info.value) is LLMError
    assert stub.count(CHAT) == 1


def test_ollama_timeout_is_llm_error_and_not_asked_again(stub: Stub) -> None:
    stub.reply(CHAT, ollama_chat_reply("late"), delay=5, times=2)
    with pytest.raises(LLMError, match="no answer in time") as info:
        OllamaChat(stub.url, "m", **SLOW).complete(PROMPT)
    assert type(info.value) is LLMError
    # The server would start the same long answer over: one request only.
    assert stub.count(CHAT) == 1


def test_ollama_long_answer_gets_time_per_output_token(stub: Stub) -> None:
    # 0.3 s for the prompt, plus 0.02 s for each of 64 tokens: 1.58 s in all.
    stub.reply(CHAT, ollama_chat_reply("slow but sure"), delay=0.9)
    chat = OllamaChat(stub.url, "m", **FAST, timeout_per_token=0.02)
    assert chat.complete(PROMPT) == "slow but sure"
    assert stub.count(CHAT) == 1


def test_ollama_unreachable_is_unavailable(dead_url: str) -> None:
    with pytest.raises(LLMUnavailable, match="cannot reach Ollama"):
        OllamaEmbedder(dead_url, "e", **FAST).embed(["x"])


# -- OpenAI-compatible ------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_openai_chat_sends_prompt_and_returns_content(stub: Stub, suffix: str) -> None:
    stub.reply(COMPLETIONS, openai_chat_reply("Rewritten."))
    chat = OpenAIChat(stub.url + suffix, "m", api_key="", **FAST)
    assert chat.complete(PROMPT) == "Rewritten."
    [req] = stub.received
    assert req.path == COMPLETIONS
    assert req.body == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You rewrite."},
            {"role": "user", "content": "Rewrite this."},
        ],
        "max_tokens": 64,
        "temperature": 0,
    }
    # Local servers ignore the key, but the client still needs one to send.
    assert req.headers["authorization"] == "Bearer unused"


@pytest.mark.parametrize(("usage", "counted"), [(True, (9, 12)), (False, (0, 3))])
def test_openai_stream_yields_pieces_and_counts_usage(
    stub: Stub, usage: bool, counted: tuple[int, int]
) -> None:
    stub.reply(COMPLETIONS, openai_chat_stream(["The NAS ", "runs ", "ZFS [1]."], usage=usage))
    chat = OpenAIChat(stub.url, "m", api_key="", **FAST)
    assert list(chat.stream(PROMPT)) == ["The NAS ", "runs ", "ZFS [1]."]
    [req] = stub.received
    assert req.body["stream"] is True
    assert req.body["stream_options"] == {"include_usage": True}
    assert (chat.usage.prompt_tokens, chat.usage.output_tokens) == counted


def test_openai_stream_retries_a_busy_server_before_the_first_piece(stub: Stub) -> None:
    stub.reply(COMPLETIONS, openai_error("busy"), 503)
    stub.reply(COMPLETIONS, openai_chat_stream(["ok"]))
    assert "".join(OpenAIChat(stub.url, "m", api_key="", **FAST).stream(PROMPT)) == "ok"
    assert stub.count(COMPLETIONS) == 2


def test_openai_stream_missing_model_is_model_missing(stub: Stub) -> None:
    stub.reply(COMPLETIONS, openai_error("model 'x' not found", "model_not_found"), 404)
    with pytest.raises(ModelMissing, match="model 'x' is not available"):
        list(OpenAIChat(stub.url, "x", api_key="", **FAST).stream(PROMPT))


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_a_closed_stream_closes_the_servers_answer(provider: str) -> None:
    gone, over = threading.Semaphore(0), threading.Event()
    handler = type("Handler", (Endless,), {"gone": gone, "over": over})
    with serving(handler) as url:
        chat: OllamaChat | OpenAIChat = (
            OllamaChat(url, "m", **FAST)
            if provider == "ollama"
            else OpenAIChat(url, "m", api_key="", **FAST)
        )
        # What a reference cycle holds is let go only when the collector comes round: the
        # stream must be closed by its reader's close alone.
        gc.disable()
        try:
            pieces = chat.stream(PROMPT)
            assert next(pieces) == next(pieces) == "word "
            close_stream(pieces)
            assert gone.acquire(timeout=5), "the server is still writing the answer"
        finally:
            gc.enable()
            over.set()


def test_fake_stream_is_its_answer_in_pieces() -> None:
    prompt = Prompt(
        task="answer",
        system="",
        user="",
        max_tokens=64,
        num_ctx=2048,
        inputs={
            "question": "what does the NAS run?",
            "passage_1": "Bread needs flour.",
            "passage_2": "The NAS runs ZFS. It has four disks.",
        },
    )
    chat = FakeChat()
    pieces = list(chat.stream(prompt))
    assert len(pieces) > 1
    assert "".join(pieces) == chat.complete(prompt) == "The NAS runs ZFS. [2]"
    assert chat.calls["answer"] == 2


@pytest.mark.parametrize("suffix", ["", "/v1"])
def test_openai_embed_sorts_by_index(stub: Stub, suffix: str) -> None:
    stub.reply(EMBEDDINGS, openai_embed_reply({2: [3.0], 0: [1.0], 1: [2.0]}))
    out = OpenAIEmbedder(stub.url + suffix, "e", api_key="k", **FAST).embed(["a", "b", "c"])
    assert out == [[1.0], [2.0], [3.0]]
    [req] = stub.received
    assert req.path == EMBEDDINGS
    assert req.body["model"] == "e"
    assert req.body["input"] == ["a", "b", "c"]
    assert req.headers["authorization"] == "Bearer k"


def test_openai_embed_count_mismatch_is_llm_error(stub: Stub) -> None:
    stub.reply(EMBEDDINGS, openai_embed_reply({0: [1.0]}))
    with pytest.raises(LLMError, match="returned 1 embeddings for 2 texts"):
        OpenAIEmbedder(stub.url, "e", api_key="", **FAST).embed(["a", "b"])
    assert stub.count(EMBEDDINGS) == 1


@pytest.mark.parametrize("status", [503, 429])
def test_openai_retries_busy_server(stub: Stub, status: int) -> None:
    stub.reply(EMBEDDINGS, openai_error("busy"), status)
    stub.reply(EMBEDDINGS, openai_embed_reply({0: [1.0]}))
    assert OpenAIEmbedder(stub.url, "e", api_key="", **FAST).embed(["a"]) == [[1.0]]
    assert stub.count(EMBEDDINGS) == 2


def test_openai_persistent_500_is_llm_error_after_all_attempts(stub: Stub) -> None:
    stub.reply(COMPLETIONS, openai_error("boom"), 500, times=3)
    with pytest.raises(LLMError, match="failed after 3 attempts: HTTP 500") as info:
        OpenAIChat(stub.url, "m", api_key="", **FAST).complete(PROMPT)
    assert type(info.value) is LLMError
    assert stub.count(COMPLETIONS) == 3


def test_openai_missing_model_is_model_missing(stub: Stub) -> None:
    stub.reply(COMPLETIONS, openai_error("model 'x' not found", "model_not_found"), 404)
    with pytest.raises(ModelMissing, match="model 'x' is not available"):
        OpenAIChat(stub.url, "x", api_key="", **FAST).complete(PROMPT)
    assert stub.count(COMPLETIONS) == 1


def test_openai_bad_request_is_not_retried(stub: Stub) -> None:
    stub.reply(COMPLETIONS, openai_error("max_tokens too large"), 400)
    with pytest.raises(LLMError, match="HTTP 400") as info:
        OpenAIChat(stub.url, "m", api_key="", **FAST).complete(PROMPT)
    assert type(info.value) is LLMError
    assert stub.count(COMPLETIONS) == 1


def test_openai_timeout_is_llm_error_and_not_asked_again(stub: Stub) -> None:
    stub.reply(EMBEDDINGS, openai_embed_reply({0: [1.0]}), delay=5, times=2)
    with pytest.raises(LLMError, match="no answer in time") as info:
        OpenAIEmbedder(stub.url, "e", api_key="", **SLOW).embed(["a"])
    assert type(info.value) is LLMError
    assert stub.count(EMBEDDINGS) == 1


def test_openai_long_answer_gets_time_per_output_token(stub: Stub) -> None:
    stub.reply(COMPLETIONS, openai_chat_reply("slow but sure"), delay=0.9)
    chat = OpenAIChat(stub.url, "m", api_key="", **FAST, timeout_per_token=0.02)
    assert chat.complete(PROMPT) == "slow but sure"
    assert stub.count(COMPLETIONS) == 1


def test_openai_unreachable_is_unavailable(dead_url: str) -> None:
    with pytest.raises(LLMUnavailable, match="cannot reach"):
        OpenAIChat(dead_url, "m", api_key="", **FAST).complete(PROMPT)


def test_errors_name_the_config_table_the_chat_model_was_set_in(stub: Stub, dead_url: str) -> None:
    """A model set for answers alone ([ask]) is fixed there, not in [llm]."""
    stub.reply(COMPLETIONS, openai_error("model 'x' not found", "model_not_found"), 404, times=2)
    with pytest.raises(ModelMissing, match=r"fix ask\.chat_model$"):
        OpenAIChat(stub.url, "x", api_key="", section="ask", **FAST).complete(PROMPT)
    with pytest.raises(ModelMissing, match=r"fix llm\.chat_model$"):
        OpenAIChat(stub.url, "x", api_key="", **FAST).complete(PROMPT)
    stub.reply(EMBEDDINGS, openai_error("model 'e' not found", "model_not_found"), 404)
    with pytest.raises(ModelMissing, match=r"fix llm\.embed_model$"):
        OpenAIEmbedder(stub.url, "e", api_key="", **FAST).embed(["a"])
    with pytest.raises(LLMUnavailable, match=r"fix ask\.host$"):
        OpenAIChat(dead_url, "m", api_key="", section="ask", **FAST).complete(PROMPT)
    with pytest.raises(LLMUnavailable, match=r"or set ask\.host$"):
        OllamaChat(dead_url, "m", section="ask", **FAST).complete(PROMPT)
    with pytest.raises(LLMUnavailable, match=r"or set OLLAMA_HOST$"):
        OllamaChat(dead_url, "m", **FAST).complete(PROMPT)


# -- faults common to both protocols ----------------------------------------------------

PROVIDERS = {
    "ollama": (CHAT, EMBED, OllamaChat, OllamaEmbedder, {}),
    "openai": (COMPLETIONS, EMBEDDINGS, OpenAIChat, OpenAIEmbedder, {"api_key": ""}),
}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("body", [b"{not json", b"", b"<html>502 Bad Gateway</html>", b"[]"])
def test_malformed_answers_are_llm_errors(stub: Stub, provider: str, body: bytes) -> None:
    chat_path, embed_path, chat_cls, embed_cls, extra = PROVIDERS[provider]
    stub.reply(chat_path, body, times=3)
    stub.reply(embed_path, body, times=3)
    with pytest.raises(LLMError):
        chat_cls(stub.url, "m", **FAST, **extra).complete(PROMPT)
    with pytest.raises(LLMError):
        embed_cls(stub.url, "e", **FAST, **extra).embed(["a"])


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_empty_and_huge_answers_come_back_as_text(stub: Stub, provider: str) -> None:
    chat_path, _, chat_cls, _, extra = PROVIDERS[provider]
    reply = ollama_chat_reply if provider == "ollama" else openai_chat_reply
    huge = "loop " * 200_000
    stub.reply(chat_path, reply(""))
    stub.reply(chat_path, reply(huge))
    chat = chat_cls(stub.url, "m", **FAST, **extra)
    assert chat.complete(PROMPT) == ""
    assert chat.complete(PROMPT) == huge


# -- what the indexer does with a broken embedding server -------------------------------


class _Dimensions(FakeEmbedder):
    """A fake embedder whose server swaps its model (or breaks) after the first calls."""

    def __init__(self, broken: list[float]) -> None:
        super().__init__("hash-256")
        self.broken = broken
        self.healthy_calls = 2

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = super().embed(texts)
        return vectors if self.calls <= self.healthy_calls else [self.broken for _ in texts]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ([0.5] * 3, "3 dimensions where the index holds 256"),
        ([], "0 dimensions"),
        ([float("nan")] * 256, "not finite"),
    ],
)
def test_wrong_or_broken_vectors_stop_the_run(
    kb: Kb, vault: Path, broken: list[float], message: str
) -> None:
    kb.embedder = _Dimensions(broken)
    with pytest.raises(LLMError, match=message):
        kb.sync()
    assert kb.store.documents.failures("v") == {}, "the server's fault is not blamed on notes"
    kb.embedder = FakeEmbedder("hash-256")
    kb.sync()
    assert verify(kb.config, kb.store.documents).in_sync


def test_the_offline_provider_keeps_only_its_latest_prompts() -> None:
    from kb.llm.fake import RECENT_PROMPTS
    from kb.prompting.prompts import rewrite_prompt

    chat = FakeChat()
    for i in range(RECENT_PROMPTS + 10):
        chat.complete(rewrite_prompt(f"I wrote note {i}.", owner="Alex Doe", context_window=4096))
    assert chat.total_calls == RECENT_PROMPTS + 10
    assert len(chat.prompts) == RECENT_PROMPTS
    assert f"note {RECENT_PROMPTS + 9}." in chat.prompts[-1].messages()[-1]["content"]
