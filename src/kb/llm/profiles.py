"""What each embedding model expects: task prefixes for queries and documents, and how many
tokens it reads.

Many retrieval embedders are trained with a prefix that tells a query from a passage
(nomic's `search_query: `, e5's `query: `); without it they give a weaker index than they
can. The table is matched on the model name as Ollama (`nomic-embed-text:latest`) or an
OpenAI-compatible server (`nomic-ai/nomic-embed-text-v1.5`) reports it; config keys
`llm.embed_query_prefix`, `llm.embed_document_prefix` and `llm.embed_window` override it for
any model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kb.models.base import TextEmbedder

# The instruction bge v1.5, mxbai and snowflake-arctic-embed v1 put before a query.
_RETRIEVAL_INSTRUCTION = "Represent this sentence for searching relevant passages: "


@dataclass(frozen=True)
class EmbedderProfile:
    family: str
    query_prefix: str = ""
    document_prefix: str = ""
    window: int = 512  # tokens the model reads; the rest of a longer text is cut

    @property
    def tag(self) -> str:
        """Names the prefixes, so that vectors made with others are never mixed in."""
        if not (self.query_prefix or self.document_prefix):
            return ""
        both = f"{self.query_prefix}\x1f{self.document_prefix}".encode()
        return hashlib.sha256(both).hexdigest()[:8]


# First match wins: the more specific names come before their families.
KNOWN: tuple[tuple[str, EmbedderProfile], ...] = (
    (r"nomic-embed-text-v2", EmbedderProfile("nomic-v2", "search_query: ", "search_document: ")),
    # Ollama serves nomic-embed-text with a 2048-token context (the model can stretch to 8192).
    (r"nomic-embed-text", EmbedderProfile("nomic", "search_query: ", "search_document: ", 2048)),
    (r"mxbai-embed-large", EmbedderProfile("mxbai", _RETRIEVAL_INSTRUCTION)),
    # Its model card: "input text longer than 256 word pieces is truncated".
    (r"minilm", EmbedderProfile("minilm", window=256)),
    (r"paraphrase-multilingual", EmbedderProfile("paraphrase-multilingual", window=128)),
    (r"bge-m3", EmbedderProfile("bge-m3", window=8192)),
    (r"bge-(small|base|large)", EmbedderProfile("bge", _RETRIEVAL_INSTRUCTION)),
    (r"arctic-embed.*2", EmbedderProfile("arctic-embed-2", "query: ", window=8192)),
    (r"arctic-embed", EmbedderProfile("arctic-embed", _RETRIEVAL_INSTRUCTION)),
    (
        r"embeddinggemma",
        EmbedderProfile(
            "embeddinggemma", "task: search result | query: ", "title: none | text: ", 2048
        ),
    ),
    (
        r"qwen3-embedding",
        EmbedderProfile(
            "qwen3-embedding",
            "Instruct: Given a web search query, retrieve relevant passages that answer the "
            "query\nQuery:",
            window=32768,
        ),
    ),
    (r"granite-embedding.*r2", EmbedderProfile("granite-embedding-r2", window=8192)),
    (r"granite-embedding", EmbedderProfile("granite-embedding")),
    (r"(^|[^a-z])e5", EmbedderProfile("e5", "query: ", "passage: ")),
)
UNKNOWN = EmbedderProfile("unknown")


def stored_name(model: str, profile: EmbedderProfile) -> str:
    """The name a model's vectors are stored under with this profile: the model's, with the
    prefixes' tag where it has prefixes."""
    return f"{model}#{profile.tag}" if profile.tag else model


def profile_for(
    model: str,
    *,
    query_prefix: str | None = None,
    document_prefix: str | None = None,
    window: int | None = None,
) -> EmbedderProfile:
    """The known profile of `model` (or none), with the config's overrides applied."""
    name = model.lower()
    found = next((p for pattern, p in KNOWN if re.search(pattern, name)), UNKNOWN)
    if query_prefix is not None:
        found = replace(found, query_prefix=query_prefix)
    if document_prefix is not None:
        found = replace(found, document_prefix=document_prefix)
    if window is not None:
        found = replace(found, window=window)
    return found


class ProfiledEmbedder:
    """A model server's embedder that sends each text with the prefix its task needs.

    Its `name`, which keys every stored vector, carries the prefixes' tag: a change of
    prefixes re-embeds, as a change of model does.
    """

    def __init__(self, inner: TextEmbedder, profile: EmbedderProfile) -> None:
        self.inner = inner
        self.profile = profile
        self.name = stored_name(inner.name, profile)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner.embed([self.profile.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> list[float]:
        [vector] = self.inner.embed([self.profile.query_prefix + text])
        return vector
