"""Answering a query: owner-aware query text, embedding, vector/text/hybrid search."""

from __future__ import annotations

import logging
import re

from kb.errors import KbError, LLMError
from kb.llm.base import Embedder
from kb.rerank import Reranker
from kb.store import NO_FILTER, SearchFilter, SearchHit, Store

log = logging.getLogger(__name__)

_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b", re.IGNORECASE)
# A question, or a pasted paragraph, is far shorter; PostgreSQL's full-text parser runs out
# of stack on a query of some tens of kilobytes.
MAX_QUERY_CHARS = 10_000
# Undecodable bytes on the command line arrive as lone surrogates (PEP 383).
_SURROGATE = re.compile("[\ud800-\udfff]")


def owner_query(text: str, owner: str) -> str:
    """Prepend the owner's name to a first-person query, as personal notes name the owner."""
    if _FIRST_PERSON.search(text) and owner.lower() not in text.lower():
        return f"{owner}: {text}"
    return text


def search(
    store: Store,
    embedder: Embedder,
    text: str,
    *,
    owner: str | None,
    top_k: int,
    threshold: float | None = None,
    mode: str = "hybrid",
    filters: SearchFilter = NO_FILTER,
    reranker: Reranker | None = None,
) -> list[SearchHit]:
    """Best chunks first; `owner` set means first-person queries are about the owner.

    `threshold` is a minimum cosine similarity in every mode, so it means the same thing
    whichever list a chunk came from. With a `reranker`, its candidates are fetched and
    judged by the chat model before the top `top_k` are kept.
    """
    if not text.strip():
        raise KbError("the query is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise KbError(f"the query is {len(text)} characters long; at most {MAX_QUERY_CHARS}")
    if not text.isascii() and _SURROGATE.search(text):
        raise KbError("the query holds bytes that are not valid UTF-8")
    space = store.embedding_space()
    if space is None:
        raise KbError("the index is empty: run `kb index` first")
    model, dimensions = space
    if model != embedder.name:
        raise KbError(
            f"the index holds vectors of '{model}' but the config says '{embedder.name}': "
            "run `kb index` to re-embed"
        )
    query = owner_query(text, owner) if owner else text
    [vector] = embedder.embed([query])
    fetch = max(top_k, reranker.candidates) if reranker else top_k
    hits = store.search(
        vector, query, model=model, dimensions=dimensions, top_k=fetch, mode=mode, filters=filters
    )
    if threshold is not None:
        hits = [h for h in hits if h.similarity >= threshold]
    if reranker:
        try:
            # The model reads the user's own words; the owner's name is for the embedding.
            hits = reranker.rerank(text, hits)
        except LLMError as exc:
            # The search itself worked: its answer is still worth having.
            log.warning("re-ranking skipped, results in search order: %s", exc)
    return hits[:top_k]
