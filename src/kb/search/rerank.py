"""Re-ranking search hits with the chat model; and what any re-ranker is to a search.

Each of the best candidates is judged on its own (query, header path and the start of the
chunk, one short call, a score from 0 to 10): small local models judge one passage far more
reliably than they order a list. The cost is bounded by `candidates` and `chars`, and every
judgement is cached in the store, so repeating a query asks the model nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Protocol

from kb.errors import LLMError
from kb.hashes import cache_key
from kb.models.base import ChatModel
from kb.prompting import prompts
from kb.prompting.outputs import parse_relevance
from kb.store import Caches, SearchHit

# Where a candidate whose judgement was unusable goes: the middle of the scale, so it
# neither jumps ahead of nor falls behind the candidates the model judged.
UNJUDGED = 5


class HitReranker(Protocol):
    """What a search asks of a re-ranker: the chat judge below, or a cross-encoder
    (kb.search.crossencoder). A model server that cannot answer is an LLMError, and the
    search keeps its own order."""

    # How many of the search's best hits it reads: the search fetches at least these.
    candidates: int

    def rerank(self, query: str, hits: Sequence[SearchHit]) -> list[SearchHit]: ...


class Reranker:
    def __init__(
        self,
        chat: ChatModel,
        caches: Caches,
        *,
        candidates: int,
        chars: int,
        context_window: int,
        concurrency: int = 1,
    ) -> None:
        self.chat = chat
        self.caches = caches
        self.candidates = candidates
        self.chars = chars
        self.context_window = context_window
        self.concurrency = concurrency

    def passage(self, hit: SearchHit) -> str:
        text = hit.content.strip()
        return text if len(text) <= self.chars else text[: self.chars].rstrip() + " […]"

    def key(self, query: str, hit: SearchHit) -> str:
        header = " > ".join(hit.header_path)
        return cache_key(prompts.RERANK_VERSION, self.chat.name, query, header, self.passage(hit))

    def rerank(self, query: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
        """The first `candidates` hits reordered by the model's judgement; the rest after them.

        Ties keep the order they came in, so equal judgements defer to the search itself.
        """
        head, tail = list(hits[: self.candidates]), list(hits[self.candidates :])
        keys = [self.key(query, h) for h in head]
        scores = self.caches.known_relevance(keys)
        todo = [i for i, k in enumerate(keys) if k not in scores]
        if todo:
            with ThreadPoolExecutor(self.concurrency, thread_name_prefix="kb-rerank") as pool:
                try:
                    fresh = list(pool.map(lambda i: self._judge(query, head[i]), todo))
                except LLMError:
                    # A server that failed one judgement fails the next: the waiting ones
                    # would each sit out the same retries before the search could answer.
                    pool.shutdown(cancel_futures=True)
                    raise
            new = {keys[i]: score for i, score in zip(todo, fresh, strict=True)}
            self.caches.save_relevance(self.chat.name, new)
            scores.update(new)
        judged = [replace(h, relevance=scores[k]) for h, k in zip(head, keys, strict=True)]
        order = sorted(
            range(len(judged)),
            key=lambda i: (-_or_unjudged(judged[i].relevance), i),
        )
        return [judged[i] for i in order] + tail

    def _judge(self, query: str, hit: SearchHit) -> int | None:
        prompt = prompts.rerank_prompt(
            query,
            " > ".join(hit.header_path),
            self.passage(hit),
            context_window=self.context_window,
        )
        return parse_relevance(self.chat.complete(prompt))


def _or_unjudged(score: int | None) -> int:
    return UNJUDGED if score is None else score
