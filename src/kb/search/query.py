"""Answering a query: owner-aware query text, embedding, vector/text/hybrid search."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kb.config import MAX_TOP_K, SearchMode
from kb.errors import KbError, LLMError
from kb.fusion import DEFAULT_FUSION, Fused, Fusion, fuse, single
from kb.llm.base import Embedder
from kb.results import SearchHit, SearchResult
from kb.search import features, ranker
from kb.search.ranker import Ranker
from kb.search.when import Period, question_period
from kb.store import NO_FILTER, Candidates, SearchFilter, Store
from kb.voices import FIRST_PERSON, voiced

if TYPE_CHECKING:
    # Re-ranking needs the chat model's prompts; a plain query loads none of them.
    from kb.search.rerank import HitReranker

# A question, or a pasted paragraph, is far shorter; PostgreSQL's full-text parser runs out
# of stack on a query of some tens of kilobytes.
MAX_QUERY_CHARS = 10_000
# Undecodable bytes on the command line arrive as lone surrogates (PEP 383).
_SURROGATE = re.compile("[\ud800-\udfff]")


def owner_query(text: str, owner: str) -> str:
    """Prepend the owner's name to a first-person query, as personal notes name the owner.

    For full-text search only (see `search`). Measured against rewriting "I" and "my" into
    the name (docs/retrieval.md): the same for full-text search."""
    if FIRST_PERSON.search(text) and owner.lower() not in text.lower():
        return f"{owner}: {text}"
    return text


# How many chunks each list contributes to a hybrid search before fusion.
CANDIDATES = 40


def fused_order(
    found: Candidates, mode: SearchMode, fusion: Fusion, period: Period | None = None
) -> list[Fused]:
    """The candidates in the mode's order: one list alone, or both fused; those of notes
    from the `period` a question names first, each group in that order."""
    if mode == "vector":
        order = single(found.vector, vector=True)
    elif mode == "text":
        order = single(found.text, vector=False)
    else:
        order = fuse(found.vector, found.text, fusion)
    if period is not None:
        order.sort(key=lambda f: not period.holds(found.rows[f.id].own_date))
    return order


@dataclass(frozen=True)
class Judge:
    """The learned ranker, what it reads of the question beside the candidates, and how
    many of its first hits are explained (what moved them costs as much again as their
    scores: worked out only for the hits a search returns)."""

    ranker: Ranker
    question: str
    owner: str | None
    explained: int = 10


def rank(
    found: Candidates,
    mode: SearchMode,
    fusion: Fusion,
    period: Period | None = None,
    *,
    judge: Judge | None = None,
) -> list[SearchHit]:
    """The candidates best first: kb's order (`fused_order`), then, with a `judge` and both
    lists, the learned ranker's order of them (kb.search.ranker)."""
    order = fused_order(found, mode, fusion, period)
    if judge is None or mode != "hybrid" or not order:
        return [_hit(found, f) for f in order]
    rows = features.rows(judge.question, judge.owner, found, order, period)
    judged = ranker.order(judge.ranker, order, rows)
    row_of = {f.id: row for f, row in zip(order, rows, strict=True)}
    return [
        replace(
            _hit(found, f),
            fused_rank=judged.fused_rank[f.id],
            judged=judged.scores[f.id],
            lifted_by=ranker.reasons(judge.ranker, row_of[f.id]) if n < judge.explained else None,
        )
        for n, f in enumerate(judged.order)
    ]


def _hit(found: Candidates, fused: Fused) -> SearchHit:
    row = found.rows[fused.id]
    return SearchHit(
        vault=row.vault,
        path=row.path,
        header_path=row.header_path,
        content=row.content,
        score=fused.score,
        similarity=row.similarity,
        start_line=row.start_line,
        end_line=row.end_line,
        vector_rank=fused.vector_rank,
        vector_score=fused.vector_score,
        text_rank=fused.text_rank,
        text_score=fused.text_score,
        date=row.note_date.isoformat() if row.note_date else None,
    )


def search(
    store: Store,
    embedder: Embedder,
    text: str,
    *,
    owner: str | None,
    top_k: int,
    threshold: float | None = None,
    mode: SearchMode = "hybrid",
    fusion: Fusion = DEFAULT_FUSION,
    filters: SearchFilter = NO_FILTER,
    reranker: HitReranker | None = None,
    learned: Ranker | None = None,
    depth: int = CANDIDATES,
    voiced_index: bool = False,
    today: dt.date | None = None,
) -> SearchResult:
    """Best chunks first; `owner` set means first-person queries are about the owner.

    `threshold` is a minimum cosine similarity in every mode, so it means the same thing
    whichever list a chunk came from. With a `reranker`, its candidates are fetched and
    judged by it (the chat model or a cross-encoder) before the top `top_k` are kept. With a
    `learned` ranker, a hybrid search orders its candidates by it (kb.search.ranker),
    fusion's order where the query could not be embedded.

    Full-text search needs no model: text mode embeds the query only for a `threshold`, and
    a hybrid search whose embedder fails answers from the text list, with a warning. Vector
    mode, and a threshold, cannot do without the embedder: its error is raised.

    `voiced_index`: the index's passages speak in their writers' voices (context.passages),
    so the owner's notes say the owner's name where they said "I"; a first-person query is
    then embedded in the owner's voice too.

    A question that names a time ("in March 2023", "yesterday", read from `today`) puts the
    chunks of notes from that time first (kb.search.when).
    """
    if not text.strip():
        raise KbError("the query is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise KbError(f"the query is {len(text)} characters long; at most {MAX_QUERY_CHARS}")
    if not text.isascii() and _SURROGATE.search(text):
        raise KbError("the query holds bytes that are not valid UTF-8")
    if not 1 <= top_k <= MAX_TOP_K:
        raise KbError(f"top_k is {top_k}: it must be from 1 to {MAX_TOP_K}")
    if threshold is not None and not -1 <= threshold <= 1:
        raise KbError(f"the threshold is {threshold}: a cosine similarity, from -1 to 1")
    space = store.vectors.space()
    if space is None:
        raise KbError("the index is empty: run `kb index` first")
    model, dimensions = space
    if model != embedder.name:
        raise KbError(
            f"the index holds vectors of '{model}' but the config says '{embedder.name}': "
            "run `kb index` to re-embed"
        )
    # Without voiced passages the owner's name is a word to match, not a meaning to embed:
    # BM25 uses it to prefer the owner's own notes, while an embedder pulls the question
    # toward every note that names the owner (first-person questions on personal-dev: vector
    # recall@5 0.41 with the name, 0.63 without, with e5; 0.24 and 0.38 with MiniLM).
    vector: list[float] | None = None
    used: SearchMode = mode
    warnings: list[str] = []
    if mode != "text" or threshold is not None:
        try:
            vector = embedder.embed_query(voiced(text, owner) if owner and voiced_index else text)
        except LLMError as exc:
            if threshold is not None:
                raise type(exc)(f"a similarity threshold needs the embedder: {exc}") from None
            if mode == "vector":
                raise
            # A model server that is off (a laptop after a restart) must not stop a search
            # that full-text search alone can answer.
            used = "text"
            warnings.append(f"full-text search only (the query could not be embedded): {exc}")
    fetch = max(top_k, reranker.candidates) if reranker else top_k
    found = store.search.candidates(
        vector,
        owner_query(text, owner) if owner else text,
        model=model,
        dimensions=dimensions,
        depth=max(depth, fetch),
        lists="both" if used == "hybrid" else used,
        filters=filters,
    )
    period = question_period(text, today or dt.date.today())
    judge = Judge(learned, text, owner, explained=fetch) if learned else None
    hits = rank(found, used, fusion, period, judge=judge)[:fetch]
    if threshold is not None:
        hits = [h for h in hits if h.similarity is not None and h.similarity >= threshold]
    if reranker:
        try:
            # The model reads the user's own words; the owner's name is for full-text search.
            hits = reranker.rerank(text, hits)
        except LLMError as exc:
            # The search itself worked: its answer is still worth having.
            warnings.append(f"re-ranking skipped, results in search order: {exc}")
    return SearchResult(hits[:top_k], used, tuple(warnings))
