"""Re-ranking search hits with a cross-encoder: a model trained to score how well a passage
answers a query, reading both together (kb.models.base.CrossEncoder).

It reads the first `candidates` hits of kb's own ranking, each as its header path and the
start of its chunk, in one batch, and orders them by score; the rest follow in search order.
Every score is cached in the store, so repeating a query asks the model nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kb.errors import LLMError
from kb.hashes import cache_key
from kb.models.base import CrossEncoder
from kb.results import SearchHit
from kb.store import Caches

# The version of what a cross-encoder is shown (`passage`): a change makes every cached
# score stale.
PASSAGE_VERSION = "1"


class CrossEncoderReranker:
    def __init__(self, model: CrossEncoder, caches: Caches, *, candidates: int, chars: int) -> None:
        self.model = model
        self.caches = caches
        self.candidates = candidates
        self.chars = chars

    def passage(self, hit: SearchHit) -> str:
        """What the model reads of a hit: where it sits in its note (the headings say what a
        short chunk is about), then the start of the chunk."""
        text = hit.content.strip()
        text = text if len(text) <= self.chars else text[: self.chars].rstrip() + " …"
        headings = " > ".join(h.lstrip("# ") for h in hit.header_path)
        return f"{headings}\n\n{text}" if headings else text

    def rerank(self, query: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
        """The first `candidates` hits reordered by the model's scores; the rest after them.

        Ties keep the order they came in, so equal scores defer to the search itself.
        """
        head, tail = list(hits[: self.candidates]), list(hits[self.candidates :])
        if not head:
            return list(hits)
        identity = self.model.identity()
        passages = [self.passage(h) for h in head]
        keys = [cache_key("cross-encoder", PASSAGE_VERSION, identity, query, p) for p in passages]
        scores = self.caches.known_rerank_scores(keys)
        # Each text once: two hits may show the model the same words.
        todo = {k: p for k, p in zip(keys, passages, strict=True) if k not in scores}
        if todo:
            fresh = self.model.score(query, list(todo.values()))
            if len(fresh) != len(todo):
                raise LLMError(
                    f"the re-ranker {self.model.name} gave {len(fresh)} scores "
                    f"for {len(todo)} passages"
                )
            new = dict(zip(todo, fresh, strict=True))
            self.caches.save_rerank_scores(self.model.name, new)
            scores.update(new)
        scored = [replace(h, rerank_score=scores[k]) for h, k in zip(head, keys, strict=True)]
        order = sorted(range(len(scored)), key=lambda i: (-scores[keys[i]], i))
        return [scored[i] for i in order] + tail
