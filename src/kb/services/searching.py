"""Searching and asking, for every face: `kb query`, `kb ask`, the MCP tools `search` and
`ask`, and the daemon answering a launcher's `kb query`.

A face hands over what its user asked for as a `SearchRequest`; it is resolved here, once,
into the `SearchPlan` that runs (kb.search.plan): what the user left out taken from the
`[query]` settings (the mode, how many, re-ranking, the fusion, the owner rule), so that no
face can run a search the configuration does not describe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kb.config import QueryConfig, SearchMode
from kb.errors import KbError
from kb.models.base import ChatModel, Embedder
from kb.results import SearchResult
from kb.search import hybrid
from kb.search.plan import SearchPlan
from kb.search.ranker import Ranker
from kb.store import NO_FILTER, SearchFilter
from kb.store.candidates import CandidateReads
from kb.store.documents import Documents
from kb.store.queue import Queue
from kb.store.vaults import VaultRows
from kb.store.vectors import Vectors
from kb.vault.sync_plan import VaultFilter, searched_vaults

if TYPE_CHECKING:
    # A search that is not re-ranked loads no prompts, and one that is not a question no
    # answering code.
    from kb.search.answer import Answer
    from kb.search.rerank import HitReranker


@dataclass(frozen=True)
class SearchRequest:
    """A search, or the retrieval of a question's passages, as a face received it. None
    leaves the choice to the configuration."""

    text: str
    top_k: int | None = None
    mode: SearchMode | None = None
    threshold: float | None = None  # a minimum cosine similarity, in every mode
    filters: SearchFilter = NO_FILTER
    rerank: bool | None = None
    # False: a first-person query is not read as the owner's (`--no-owner`), whatever
    # `query.owner_in_first_person` says.
    owner: bool = True
    # Work out what moved each hit (`kb query --explain`, the page's "why"): as costly as
    # the ranker's scores, so only the faces that show it ask.
    explain: bool = False


class SearchService:
    """Runs requests on one index and embedder with one configuration's `[query]` settings.

    `chat` is the model that answers (`[ask]`'s, else `[llm]`'s), and `context_window` its
    window; it is asked for only when a request needs it: a plain search never builds it.
    """

    def __init__(
        self,
        embedder: Embedder,
        settings: QueryConfig,
        *,
        candidates: CandidateReads,
        vectors: Vectors,
        queue: Queue,
        documents: Documents,
        vaults: VaultRows,
        owner_name: str,
        own_vaults: Mapping[str, str],
        config_file: str | None,
        context_window: int,
        answer_passages: int,
        chat: Callable[[], ChatModel],
        reranker: Callable[[], HitReranker],
        ranker: Callable[[], Ranker] | None = None,
        voiced_index: bool = False,
    ) -> None:
        self.candidates = candidates
        self.vectors = vectors
        self.queue = queue
        self.documents = documents
        self.vaults = vaults
        self.embedder = embedder
        self.settings = settings
        self.owner_name = owner_name
        # The config's vaults by folder (`VaultConfig.folder`), and its file:
        # the only vaults it searches.
        self.own_vaults = dict(own_vaults)
        self.config_file = config_file
        self.context_window = context_window
        self.answer_passages = answer_passages  # `[ask] passages`: a question's top-k
        self._chat = chat
        self._reranker = reranker
        # The learned ranker (kb.search.ranker), read on the first search; None: fusion's
        # order.
        self._ranker = ranker
        # The index's passages say writers' names for "I" (ContextConfig.voiced_passages).
        self.voiced_index = voiced_index

    def searched(self) -> VaultFilter:
        """The vaults a read of this config keeps to (None: every vault, the index holding
        only its vaults), asked at each read: another configuration may add one meanwhile.
        A KbError when the index holds none of them."""
        only = searched_vaults(self.own_vaults, self.config_file, self.vaults.holders())
        if only == ():
            raise KbError(
                "the index holds none of this config's vaults: each of its names is another"
                " configuration's vault at another folder (`kb index` says which)"
            )
        return only

    def plan(self, request: SearchRequest) -> SearchPlan:
        """The request resolved into the one plan its search runs: what it leaves out taken
        from `[query]`, the vault filter set, the rankers made. A KbError says what is wrong
        with it (kb.search.plan)."""
        owner = request.owner and self.settings.owner_in_first_person
        rerank = self.settings.rerank if request.rerank is None else request.rerank
        # The vaults are asked at each search: another configuration may add one meanwhile.
        only = self.searched()
        return SearchPlan(
            request.text,
            owner=self.owner_name if owner else None,
            top_k=request.top_k or self.settings.top_k,
            threshold=request.threshold,
            mode=request.mode or self.settings.mode,
            fusion=self.settings.fusion,
            filters=replace(request.filters, vaults=only),
            voiced_index=self.voiced_index,
            learned=self._ranker() if self._ranker else None,
            reranker=self._reranker() if rerank else None,
            explain=request.explain,
        )

    def search(self, request: SearchRequest) -> SearchResult:
        """The best chunks for the request, best first (see kb.search.hybrid.run)."""
        return hybrid.run(
            self.embedder,
            self.plan(request),
            candidates=self.candidates,
            vectors=self.vectors,
            queue=self.queue,
        )

    def ask(
        self,
        request: SearchRequest,
        *,
        on_text: Callable[[str], None] | None = None,
        stop: threading.Event | None = None,
    ) -> Answer:
        """The chat model's answer to the request's question from the passages the same
        search finds (see kb.search.answer.ask); `on_text` receives it as it streams, and
        `stop`, once set, ends it (kb.search.answer.Stopped)."""
        from kb.search.answer import ask

        plan = self.plan(replace(request, top_k=request.top_k or self.answer_passages))
        return ask(
            self.embedder,
            self._chat(),
            plan,
            candidates=self.candidates,
            vectors=self.vectors,
            queue=self.queue,
            documents=self.documents,
            context_window=self.context_window,
            on_text=on_text,
            stop=stop,
        )
