"""The index's embedding space: the model its vectors are of and their size, followed at
each sync and switched when the configured model changes (its notes then wait in the
embedding queue for new vectors), never under another configuration's vaults."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kb.context.embedding import Embedding
from kb.errors import KbError
from kb.store.queue import Queue
from kb.store.vaults import VaultRows
from kb.store.vectors import Vectors

log = logging.getLogger("kb.indexer")


class EmbeddingSpace:
    """`embedding`'s model as the index's; `own_vaults` names the configuration's vaults."""

    def __init__(
        self,
        *,
        vectors: Vectors,
        queue: Queue,
        vaults: VaultRows,
        embedding: Embedding,
        model: str,
        own_vaults: Sequence[str],
    ) -> None:
        self.vectors = vectors
        self.queue = queue
        self.vaults = vaults
        self.embedding = embedding
        self.model = model
        self.own_vaults = frozenset(own_vaults)

    def follow(self) -> None:
        """A new embedding model is switched to at the start of a sync (its old vectors
        dropped, their notes queued for new ones); an index with no vector yet gets its space
        from the first vectors the embedding queue writes, so no text waits on the embedder
        here."""
        space = self.vectors.space()
        if space is None:
            return
        if space[0] != self.model:
            self.ensure()
        elif not self.vectors.has_index() and not self.queue.vectors_awaited():
            self.vectors.build_index(*space)  # a bulk load was cut short

    def ensure(self) -> None:
        """Make the configured embedding model the index's, asking it for its size: the
        notes whose vectors it drops wait for new ones in the embedding queue, and stored
        contexts are embedded as they are (a model change never costs a summary)."""
        space = self.vectors.space()
        if space is not None and space[0] == self.model:
            return
        if space is not None:
            self._refuse_switch_under(space[0])
        dimensions = len(self.embedding.embed(["dimension probe"], probe=True)[0])
        if space is not None:
            log.info(
                "embedding model changed from %s to %s (%d dimensions): its notes are queued"
                " for new vectors",
                space[0],
                self.model,
                dimensions,
            )
        self.vectors.switch(self.model, dimensions)

    def reembed_all(self) -> None:
        """Drop every vector of the index: each note waits for new ones in the embedding
        queue (the stored contexts are embedded as they are)."""
        space = self.vectors.space()
        if space is not None and space[0] != self.model:
            self._refuse_switch_under(space[0])
        self.vectors.clear()
        self.ensure()

    def _refuse_switch_under(self, model: str) -> None:
        """A switch re-embeds every vault of the index: never those of another configuration
        (or ones no config names any more) without a word."""
        stored = self.vaults.stored()
        others = sorted(v.name for v in stored if v.notes and v.name not in self.own_vaults)
        if others:
            raise KbError(
                f"the index is embedded with {model}, which vaults {', '.join(others)} also use;"
                f" this config embeds with {self.model}: give it a data_dir or database"
                " of its own, the same embed_model, or `kb forget` those vaults"
            )
