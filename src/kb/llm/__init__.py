"""Model providers behind two small interfaces: ChatModel and Embedder."""

from __future__ import annotations

from kb.config import LLMConfig
from kb.llm.base import ChatModel, Embedder, Prompt


def make_chat(cfg: LLMConfig) -> ChatModel:
    if cfg.provider == "ollama":
        from kb.llm.ollama import OllamaChat

        return OllamaChat(cfg.chat_host, cfg.chat_model, timeout=cfg.timeout, retries=cfg.retries)
    if cfg.provider == "openai":
        from kb.llm.openai import OpenAIChat

        return OpenAIChat(
            cfg.chat_host,
            cfg.chat_model,
            api_key=cfg.api_key,
            timeout=cfg.timeout,
            retries=cfg.retries,
        )
    from kb.llm.fake import FakeChat

    return FakeChat(cfg.chat_model)


def make_embedder(cfg: LLMConfig) -> Embedder:
    if cfg.provider == "ollama":
        from kb.llm.ollama import OllamaEmbedder

        return OllamaEmbedder(
            cfg.embed_host, cfg.embed_model, timeout=cfg.timeout, retries=cfg.retries
        )
    if cfg.provider == "openai":
        from kb.llm.openai import OpenAIEmbedder

        return OpenAIEmbedder(
            cfg.embed_host,
            cfg.embed_model,
            api_key=cfg.api_key,
            timeout=cfg.timeout,
            retries=cfg.retries,
        )
    from kb.llm.fake import FakeEmbedder

    return FakeEmbedder(cfg.embed_model)


__all__ = ["ChatModel", "Embedder", "Prompt", "make_chat", "make_embedder"]
