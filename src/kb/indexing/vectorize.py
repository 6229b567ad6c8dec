"""The middle speed: the vectors of queued notes, written by a worker.

claim a few notes, newest first → read their texts that wait for a vector → take the
vectors this model made before for the same texts (by hash; not for a `kb reindex`) →
embed the rest once each, `llm.concurrency` requests in flight → write them into the rows
that still hold those texts, and take the items off the queue, in one transaction
(`Texts.finish_vectors`).

A note is found by its words from the moment it is stored; once its item is done, by its
meaning too. Nothing here reads the vault. The loop that drains the queue is
`kb.indexing.worker`; the LLM context (`kb.indexing.enrich`) comes after.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from kb.context.embedding import Embedding
from kb.errors import KbError
from kb.indexing.enrich import Attempt
from kb.note_writing.bulk import bulk_load
from kb.store import Claim, Vector
from kb.store.caches import Caches
from kb.store.passages import Passages
from kb.store.queue import Queue
from kb.store.texts import Texts, Unembedded, VectorsDone
from kb.store.vectors import Vectors

# Notes claimed at once: texts for thirty or so full requests (a note has about twenty), so
# the last, part-full request of each claim costs little (with sixteen notes, a claim's ten
# or eleven requests made the server's work 4% longer than the same texts sent alone).
NOTES_PER_CLAIM = 48


class Vectorizer:
    """Embeds claimed notes' texts; `llm.concurrency` requests of `llm.embed_batch` texts in
    flight at once."""

    def __init__(
        self,
        *,
        texts: Texts,
        queue: Queue,
        vectors: Vectors,
        caches: Caches,
        passages: Passages,
        embedding: Embedding,
        batch: int,
        concurrency: int,
    ) -> None:
        self.texts = texts
        self.queue = queue
        self.vectors = vectors
        self.caches = caches
        self.passages = passages
        self.embedder = embedding.embedder
        self.batch = batch
        self.notes = NOTES_PER_CLAIM
        self.embedding = embedding
        self._pool = ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="kb-embed")
        # A worker's threads that find a new index make its space once: one probe, not one
        # each.
        self._making_space = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def vectorize(self, claims: Sequence[Claim], owner: str) -> list[Attempt]:
        """Embed and write the vectors of some claimed notes; an attempt for each."""
        started = time.monotonic()
        space = self._space()
        self._indexes(space)
        texts = self.texts.unembedded([c.document_id for c in claims])
        fresh = {c.document_id for c in claims if c.fresh}
        known = self._known([t for t in texts if t.document_id not in fresh])
        # Each text once, however many rows hold it.
        wanted = list({t.text_hash: t.text for t in texts if t.text_hash not in known}.items())
        vectors = dict(known)
        vectors.update(
            zip((h for h, _ in wanted), self._embed([t for _, t in wanted]), strict=True)
        )
        sent = {h for h, _ in wanted}
        embedded: dict[int, int] = {}
        for t in texts:
            if t.text_hash in sent:
                sent.discard(t.text_hash)  # counted for the first note that holds it
                embedded[t.document_id] = embedded.get(t.document_id, 0) + 1
        finished = set(
            self.texts.finish_vectors(
                owner,
                self.embedder.name,
                [(t, vectors[t.text_hash]) for t in texts],
                [VectorsDone(c, embedded.get(c.document_id, 0)) for c in claims],
            )
        )
        self._indexes(space)
        seconds = time.monotonic() - started
        return [
            Attempt(
                c.document_id,
                "",
                "",
                "done" if c.document_id in finished else "dropped",
                embedded=embedded.get(c.document_id, 0),
                seconds=seconds,
                speed="embed",
            )
            for c in claims
        ]

    def _indexes(self, space: tuple[str, int]) -> None:
        """The vector indexes dropped for a bulk load of vectors (kb.note_writing.bulk), and
        built again once nothing waits."""
        # Counting the backlog reads both tables whole: during a bulk load (no indexes),
        # each claim asks only whether anything still waits.
        if self.vectors.has_index():
            waiting, notes = self.queue.backlog()
            if bulk_load(waiting, lambda: notes - waiting):
                self.vectors.drop_index()
        elif not self.queue.vectors_awaited():
            self.vectors.build_index(*space)

    def _space(self) -> tuple[str, int]:
        """The index's embedding space, made here from the first vectors of a new index; a
        worker that embeds with another model than the index holds refuses."""
        space = self.vectors.space()
        if space is None:
            with self._making_space:
                space = self.vectors.space()
                if space is None:
                    dimensions = len(self.embedding.embed(["dimension probe"], probe=True)[0])
                    self.vectors.switch(self.embedder.name, dimensions)
                    space = (self.embedder.name, dimensions)
        if space[0] != self.embedder.name:
            raise KbError(
                f"the index holds vectors of '{space[0]}', this worker embeds with "
                f"'{self.embedder.name}': give workers the indexer's embed_model, or run "
                "`kb index` with this one to switch"
            )
        self.embedding.space = space
        return space

    def _known(self, texts: Sequence[Unembedded]) -> dict[str, Vector]:
        """Vectors this model made before for some of the texts, by their hash."""
        model = self.embedder.name
        known = dict(
            self.caches.known_embeddings([t.text_hash for t in texts if not t.passage], model)
        )
        known.update(
            self.passages.known_embeddings([t.text_hash for t in texts if t.passage], model)
        )
        return known

    def _embed(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors for texts, a request per batch, as many in flight as the server serves."""
        batches = [texts[i : i + self.batch] for i in range(0, len(texts), self.batch)]
        return [v for vectors in self._pool.map(self.embedding.embed, batches) for v in vectors]
