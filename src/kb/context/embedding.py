"""A note's built context turned into chunk rows with vectors: the vectors of texts embedded
before (by this model) are reused by context hash, the rest embedded, each checked. So are
the chunks' passages (kb.context.passage_texts), by the hash of their text.

Shared by the indexer (a note stored as it is saved, its texts not embedded yet: `embed`
off leaves them to the embedding queue), the embedding queue's worker (kb.indexing.vectorize)
and the enricher (a note's LLM context written later), so all embed and check the same way.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

from kb.context import ContextChunk
from kb.context.passage_texts import Passage
from kb.errors import LLMError
from kb.models.base import Embedder
from kb.store import ChunkRecord, LinesRecord, PassageRecord, Vector
from kb.store.caches import Caches
from kb.store.passages import Passages
from kb.store.vectors import Vectors


class Embedding:
    """`batch` texts per request, at most `in_flight` requests at once however many threads
    embed (llm.concurrency: a server serves that many at once)."""

    def __init__(
        self,
        *,
        caches: Caches,
        vectors: Vectors,
        passages: Passages,
        embedder: Embedder,
        batch: int,
        in_flight: int,
    ) -> None:
        self.caches = caches
        self._vectors = vectors  # `vectors` is the method that embeds chunks
        self.passages = passages
        self.embedder = embedder
        self.batch = batch
        self._in_flight = threading.Semaphore(max(1, in_flight))
        # The embedding space as its user last made sure of it (the indexer, at the start of a
        # sync): every vector is checked against its size without asking the database each
        # time. None: asked each time.
        self.space: tuple[str, int] | None = None

    def records(
        self,
        chunks: Sequence[ContextChunk],
        *,
        chat_model: str,
        reuse: bool,
        passages: Sequence[Sequence[Passage]] = (),
        embed: bool = True,
    ) -> tuple[list[ChunkRecord], int]:
        """The rows of a note's chunks (with each chunk's `passages`, when given), and how
        many texts had to be embedded for them (`embed` off: none, they wait for a vector)."""
        vectors, embedded = self.vectors(chunks, reuse=reuse, embed=embed)
        passage_records, embedded_passages = self.passage_records(
            passages, reuse=reuse, embed=embed
        )
        records = [
            ChunkRecord(
                position=c.chunk.position,
                header_path=c.chunk.header_path,
                content=c.chunk.content,
                content_hash=c.chunk.content_hash,
                start_line=c.chunk.start_line,
                end_line=c.chunk.end_line,
                summary=c.summary,
                summary_key=c.summary_key,
                rewrite=c.rewrite,
                rewrite_key=c.rewrite_key,
                full_context=c.full_context,
                summaries_at=c.summaries_at,
                embed_text=c.embed_text,
                context_hash=c.context_hash,
                chat_model=chat_model,
                embedding=v,
                embed_model=None if v is None else self.embedder.name,
                summary_fallback=chat_model if c.summary_fallback else None,
                rewrite_fallback=chat_model if c.rewrite_fallback else None,
                lines=tuple(
                    LinesRecord(
                        w.kind, w.output.text, w.key, chat_model if w.output.fallback else None
                    )
                    for w in c.lines
                ),
                passages=p,
            )
            for c, v, p in zip(chunks, vectors, passage_records or [()] * len(chunks), strict=True)
        ]
        return records, embedded + embedded_passages

    def passage_records(
        self, passages: Sequence[Sequence[Passage]], *, reuse: bool, embed: bool
    ) -> tuple[list[tuple[PassageRecord, ...]], int]:
        """Each chunk's passages as rows with vectors, embedding only the texts this model
        has not embedded before (`embed` off: none, they wait); and how many it embedded."""
        hashes = [p.text_hash for chunk in passages for p in chunk]
        model = self.embedder.name
        vectors: dict[str, Vector | None] = {}
        if reuse and hashes:
            vectors.update(self.passages.known_embeddings(hashes, model))
        missing = list(
            {
                p.text_hash: p.text
                for chunk in passages
                for p in chunk
                if p.text_hash not in vectors
            }.items()
        )
        fresh = self._embed_or_wait([text for _, text in missing], embed)
        vectors.update(zip((h for h, _ in missing), fresh, strict=True))
        records = [
            tuple(
                PassageRecord(
                    p.position,
                    p.kind,
                    p.text,
                    p.text_hash,
                    vectors[p.text_hash],
                    None if vectors[p.text_hash] is None else model,
                )
                for p in chunk
            )
            for chunk in passages
        ]
        return records, len(missing) if embed else 0

    def vectors(
        self, chunks: Sequence[ContextChunk], *, reuse: bool, embed: bool = True
    ) -> tuple[list[Vector | None], int]:
        """A vector per chunk, embedding only texts not embedded before by this model
        (`embed` off: None for those)."""
        hashes = [c.context_hash for c in chunks]
        vectors: dict[str, Vector | None] = {}
        if reuse and hashes:
            vectors.update(self.caches.known_embeddings(hashes, self.embedder.name))
        missing = [c for c in chunks if c.context_hash not in vectors]
        fresh = self._embed_or_wait([c.embed_text for c in missing], embed)
        vectors.update(zip((c.context_hash for c in missing), fresh, strict=True))
        return [vectors[h] for h in hashes], len(missing) if embed else 0

    def _embed_or_wait(self, texts: Sequence[str], embed: bool) -> Sequence[Vector | None]:
        return self.embed(texts) if embed else [None] * len(texts)

    def embed(self, texts: Sequence[str], *, probe: bool = False) -> list[Vector]:
        """Vectors for texts, each checked: the size the index holds, and finite numbers."""
        if not texts:
            return []
        space = None if probe else (self.space or self._vectors.space())
        dimensions = space[1] if space else None
        out: list[Vector] = []
        for start in range(0, len(texts), self.batch):
            with self._in_flight:
                vectors = self.embedder.embed(texts[start : start + self.batch])
            for v in vectors:
                # A server that swapped its model, or broke, must not fill the index with
                # vectors no search can compare.
                if len(v) == 0 or (dimensions is not None and len(v) != dimensions):
                    raise LLMError(
                        f"embedding model '{self.embedder.name}' returned a vector of {len(v)} "
                        f"dimensions where the index holds {dimensions}: check the server's "
                        "model, or run `kb reindex --embeddings-only` after changing it"
                    )
                if not all(map(math.isfinite, v)):
                    raise LLMError(
                        f"embedding model '{self.embedder.name}' returned a vector that is "
                        "not finite numbers"
                    )
            out.extend(vectors)
        return out
