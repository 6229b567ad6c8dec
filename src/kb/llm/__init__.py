"""The model servers' clients (Ollama, OpenAI-compatible, a fake; a /rerank server, an ONNX
cross-encoder) behind the interfaces of kb.models, made from the config."""

from __future__ import annotations

from kb.config import LLMConfig, RerankConfig
from kb.llm.profiles import EmbedderProfile, ProfiledEmbedder, profile_for, stored_name
from kb.models import tokens
from kb.models.base import ChatModel, CrossEncoder, Embedder, Prompt
from kb.models.providers import Endpoint, provider


def make_chat(cfg: LLMConfig, *, section: str = "llm") -> ChatModel:
    """The chat model of `cfg`; `section` is the config table it was set in ("llm", or
    "ask" for answers), which its errors name as the place to fix it."""
    # A chat answer may take longer the more tokens it may write; an embedding may not.
    at = Endpoint(
        cfg.chat_host,
        cfg.chat_model,
        cfg.api_key,
        cfg.timeout,
        cfg.retries,
        timeout_per_token=cfg.timeout_per_token,
        section=section,
    )
    return provider(cfg.provider).chat(at)


def make_embedder(cfg: LLMConfig) -> Embedder:
    at = Endpoint(cfg.embed_host, cfg.embed_model, cfg.api_key, cfg.timeout, cfg.retries)
    return ProfiledEmbedder(provider(cfg.provider).embedder(at), embed_profile(cfg))


def make_cross_encoder(cfg: RerankConfig) -> CrossEncoder:
    """The cross-encoder of `[rerank]`: a /rerank server's client, or a local ONNX model
    (loaded when it first scores)."""
    if cfg.backend == "onnx" and cfg.folder is not None:
        from kb.llm.onnx_crossencoder import OnnxCrossEncoder

        return OnnxCrossEncoder(cfg.folder)
    if cfg.backend == "http":
        from kb.llm.rerank_server import RerankServer

        return RerankServer(
            cfg.url, model=cfg.model, api_key=cfg.api_key, style=cfg.style, timeout=cfg.timeout
        )
    raise ValueError(f"rerank.backend {cfg.backend!r} is not a cross-encoder")


def embed_profile(cfg: LLMConfig) -> EmbedderProfile:
    """The configured embedding model's prefixes and window, config overrides applied."""
    return profile_for(
        cfg.embed_model,
        query_prefix=cfg.embed_query_prefix,
        document_prefix=cfg.embed_document_prefix,
        window=cfg.embed_window,
    )


def embed_name(cfg: LLMConfig) -> str:
    """The name the configured embedder stores its vectors under (`make_embedder(cfg).name`),
    known without making it."""
    return stored_name(cfg.embed_model, embed_profile(cfg))


def embed_window(cfg: LLMConfig) -> int:
    """Tokens of a document's own text the embedder reads: its window less the document
    prefix and the two tokens that open and close a sequence."""
    profile = embed_profile(cfg)
    return profile.window - tokens.estimate(profile.document_prefix) - 2


def served_models(cfg: LLMConfig, host: str, *, timeout: float = 5.0) -> list[str]:
    """The models a server at `host` has (LLMError when it cannot be reached): what
    `kb init` checks the configured chat and embedding models against."""
    served = provider(cfg.provider).served_models
    if served is None:  # no model server: it has every model
        return [cfg.chat_model, cfg.embed_model]
    return served(host, cfg.api_key, timeout)


__all__ = [
    "ChatModel",
    "CrossEncoder",
    "Embedder",
    "Prompt",
    "embed_name",
    "embed_profile",
    "embed_window",
    "make_chat",
    "make_cross_encoder",
    "make_embedder",
    "served_models",
]
