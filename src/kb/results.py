"""What a search finds, as plain records.

No database, model or command-line code behind them: the `kb` launcher rebuilds them from a
daemon's answer and shows them (see kb.daemon.query_socket) having loaded little more than this.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal, get_args

# How a search ranks: by embedding, by full-text match, or both fused (see kb.fusion).
SearchMode = Literal["vector", "text", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = get_args(SearchMode)


@dataclass(frozen=True)
class SearchHit:
    vault: str
    path: str
    header_path: list[str]
    content: str
    # What the mode ranks by: cosine similarity (vector), BM25 (text) or the fused score
    # (hybrid, see kb.fusion). Only comparable within one query.
    score: float
    # Cosine similarity of chunk and query, whatever the mode; None when the query was not
    # embedded (text mode, or a hybrid search that could not reach the embedder).
    similarity: float | None
    start_line: int
    end_line: int
    # The chat model's 0-10 judgement when the hit was re-ranked; None otherwise, or when
    # its answer was unusable.
    relevance: int | None = None
    # A cross-encoder's score when the hit was re-ranked by one (rerank.backend "http" or
    # "onnx"): on that model's own scale, comparable only within one query and model.
    rerank_score: float | None = None
    # Where each list put the chunk (1-based) and what it scored there; None when the
    # chunk was not among that list's candidates: why a note came first.
    vector_rank: int | None = None
    vector_score: float | None = None
    text_rank: int | None = None
    text_score: float | None = None
    # The note's date (kb.dates), YYYY-MM-DD: what --after and --before filter on.
    date: str | None = None
    # The learned ranker's verdict (kb.search.ranker), None where it did not order the
    # hits: the chunk's place in fusion's order, its score, and the features that moved
    # that score most ("text_rank +0.42").
    fused_rank: int | None = None
    judged: float | None = None
    lifted_by: list[str] | None = None


@dataclass(frozen=True)
class SearchResult:
    """What a search found, and how: every face (command line, MCP, web) shows the same."""

    hits: list[SearchHit]
    # The lists the hits came from: "text" when a hybrid search could not embed the query.
    mode_used: SearchMode
    # One line each, for the user: a list left out, a re-ranking skipped.
    warnings: tuple[str, ...] = ()


def scores(hit: SearchHit) -> list[str]:
    """What a hit scored, for a person: its cosine similarity (its BM25 score when the query
    was not embedded), and the chat model's judgement when it was re-ranked."""
    if hit.similarity is not None:
        scores = [f"similarity {hit.similarity:.3f}"]
    else:
        scores = [f"BM25 {hit.score:.3f}"]
    if hit.relevance is not None:
        scores.append(f"relevance {hit.relevance}/10")
    return scores


def explanation(hit: SearchHit) -> str:
    """Why a hit is where it is (`kb query --explain`, the web page's cards): its place and
    score in each list, the fused score, what the learned ranker made of it, and a
    cross-encoder's score, in the order they were applied."""

    def place(rank: int | None, score: float | None, what: str) -> str:
        return f"{what} #{rank} ({score:.3f})" if rank is not None else f"{what} -"

    parts = [
        place(hit.vector_rank, hit.vector_score, "vector"),
        place(hit.text_rank, hit.text_score, "text BM25"),
        f"score {hit.score:.4f}",
    ]
    if hit.judged is not None:
        lifted = f": {', '.join(hit.lifted_by)}" if hit.lifted_by else ""
        parts.append(f"fused #{hit.fused_rank}  ranker {hit.judged:+.3f}{lifted}")
    if hit.rerank_score is not None:
        parts.append(f"rerank {hit.rerank_score:.4f}")
    return "  ".join(parts)


def hits_json(found: SearchResult) -> str:
    """`kb query --json`: the hits, each saying which lists found it ("text" when a hybrid
    search had no embedder)."""
    hits = [{**asdict(h), "mode_used": found.mode_used} for h in found.hits]
    return json.dumps(hits, ensure_ascii=False, indent=2) + "\n"
