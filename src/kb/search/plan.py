"""A search resolved: everything one search, or the retrieval of a question's passages, runs
with, checked once when it is made.

The search service makes a plan of each request (what the request leaves out taken from
the `[query]` settings, the vault filter set, the ranker read); `kb.search.hybrid.run` and
`kb.search.answer.ask` run one and decide nothing about it, and every benchmark makes one
of each question it asks (`kb.search.hybrid.retrieve`).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING

from kb.config import MAX_TOP_K, QueryConfig, SearchMode
from kb.errors import KbError
from kb.fusion import DEFAULT_FUSION, Fusion
from kb.search.ranker import Ranker
from kb.store import NO_FILTER, SearchFilter

if TYPE_CHECKING:
    # Re-ranking needs the chat model's prompts; a plain query loads none of them.
    from kb.search.rerank import HitReranker

# A question, or a pasted paragraph, is far shorter; PostgreSQL's full-text parser runs out
# of stack on a query of some tens of kilobytes.
MAX_QUERY_CHARS = 10_000
# Undecodable bytes on the command line arrive as lone surrogates (PEP 383).
_SURROGATE = re.compile("[\ud800-\udfff]")
# How many chunks each list contributes to a hybrid search before fusion.
CANDIDATES = 40


@dataclass(frozen=True)
class SearchPlan:
    """One search as it runs. Making one checks it: a KbError says, in one line, what is
    wrong with the query, `top_k` or `threshold`."""

    text: str
    _: KW_ONLY
    # Set: a first-person query is about the owner (kb.search.hybrid.owner_query).
    owner: str | None = None
    top_k: int = QueryConfig.top_k
    # A minimum cosine similarity, in every mode, so it means the same whichever list a
    # chunk came from.
    threshold: float | None = None
    mode: SearchMode = "hybrid"
    fusion: Fusion = DEFAULT_FUSION
    # With the vault filter: only the configuration's vaults, where another shares the index.
    filters: SearchFilter = NO_FILTER
    depth: int = CANDIDATES  # how deep each list is read; a reranker's candidates go deeper
    # The index's passages speak in their writers' voices (context.passages), so a
    # first-person query is embedded in the owner's voice too.
    voiced_index: bool = False
    # Orders a hybrid search's candidates (kb.search.ranker); None: fusion's order.
    learned: Ranker | None = None
    # Judges the best candidates (the chat model or a cross-encoder) before the top `top_k`
    # are kept.
    reranker: HitReranker | None = None
    # What relative dates in the question ("yesterday") are read from (kb.search.when).
    today: dt.date = field(default_factory=dt.date.today)
    # Each hit says what moved it (SearchHit.lifted_by); else the ranker's scores alone.
    explain: bool = False

    @property
    def fetch(self) -> int:
        """How many of its best candidates the search keeps before the top `top_k`: as many
        as a reranker judges, where it judges more."""
        return max(self.top_k, self.reranker.candidates) if self.reranker else self.top_k

    @property
    def uses_vectors(self) -> bool:
        """Whether the search reads the query's vector: every mode but text, and text mode
        with a threshold (a cosine similarity)."""
        return self.mode != "text" or self.threshold is not None

    def __post_init__(self) -> None:
        text = self.text
        if not text.strip():
            raise KbError("the query is empty")
        if len(text) > MAX_QUERY_CHARS:
            raise KbError(f"the query is {len(text)} characters long; at most {MAX_QUERY_CHARS}")
        if not text.isascii() and _SURROGATE.search(text):
            raise KbError("the query holds bytes that are not valid UTF-8")
        if not 1 <= self.top_k <= MAX_TOP_K:
            raise KbError(f"top_k is {self.top_k}: it must be from 1 to {MAX_TOP_K}")
        if self.threshold is not None and not -1 <= self.threshold <= 1:
            raise KbError(f"the threshold is {self.threshold}: a cosine similarity, from -1 to 1")
