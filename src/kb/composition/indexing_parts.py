"""The parts that write the index, built for a config over its store and its models: the
embedding of texts and the note builder (one of each a process), the indexer, the enricher,
the vectorizer, the workers that drain the queues.

The indexing pipeline is imported only by the methods that build it: `kb query` does not
load Markdown parsing or file watching.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from kb.composition.models import Models
from kb.config import Config
from kb.store import Store
from kb.vault.sync_plan import own_vaults

if TYPE_CHECKING:
    from kb.context.embedding import Embedding
    from kb.indexing.enrich import Attempt, Enricher, EnrichReport
    from kb.indexing.indexer import Indexer
    from kb.indexing.vectorize import Vectorizer
    from kb.indexing.worker import Worker
    from kb.models.base import ChatModel
    from kb.note_writing.building import NoteBuilder
    from kb.note_writing.events import FileEvent
    from kb.store.queue import Speed


class IndexingParts:
    """What writes a config's index. One LLM pool and one embedding a process, for the
    indexer, enrichment and vectors alike: one pool of LLM calls and one bound on embedding
    requests in flight; the embedding and the note builder made again when a model is
    swapped."""

    def __init__(self, config: Config, store: Store, models: Models) -> None:
        self.config = config
        self.store = store
        self.models = models
        self._making = threading.Lock()
        self._llm_pool: ThreadPoolExecutor | None = None
        self._embedding: Embedding | None = None
        self._builder: NoteBuilder | None = None
        self._builder_chat: ChatModel | None = None  # the chat model `_builder` was made with

    def embedding(self) -> Embedding:
        """The process's embedding of texts (the embedder, its batches and requests in
        flight)."""
        from kb.context.embedding import Embedding

        embedder = self.models.embedder
        with self._making:
            if self._embedding is None or self._embedding.embedder is not embedder:
                llm = self.config.llm
                self._embedding = Embedding(
                    caches=self.store.caches,
                    vectors=self.store.vectors,
                    passages=self.store.passages,
                    embedder=embedder,
                    batch=llm.embed_batch,
                    in_flight=llm.concurrency,
                )
            return self._embedding

    def builder(self) -> NoteBuilder:
        """The process's note builder: the chat model's context on the one LLM pool, and
        the vectors of `embedding()`."""
        from kb.context.contextualizer import Contextualizer
        from kb.note_writing.building import NoteBuilder

        embedding = self.embedding()
        chat = self.models.chat
        with self._making:
            if self._llm_pool is None:
                self._llm_pool = ThreadPoolExecutor(
                    max(1, self.config.llm.concurrency), thread_name_prefix="kb-llm"
                )
            built = self._builder
            if built is None or built.embedding is not embedding or self._builder_chat is not chat:
                context = Contextualizer.for_config(chat, self.config, self._llm_pool)
                built = self._builder = NoteBuilder(context, embedding, self.store.caches)
                self._builder_chat = chat
            return built

    def indexer(
        self,
        *,
        on_event: Callable[[FileEvent], None] | None = None,
        on_scan: Callable[[int], None] | None = None,
        checkpoint: Callable[[], None] | None = None,
    ) -> Indexer:
        from kb.indexing.indexer import Indexer, SyncSettings

        return Indexer(
            SyncSettings.of(self.config),
            self.builder(),
            documents=self.store.documents,
            vaults=self.store.vaults,
            state=self.store.state,
            caches=self.store.caches,
            queue=self.store.queue,
            vectors=self.store.vectors,
            text_index=self.store.text_index,
            links=self.store.links,
            on_event=on_event,
            on_scan=on_scan,
            checkpoint=checkpoint,
        )

    def enricher(self) -> Enricher:
        from kb.indexing.enrich import Enricher

        return Enricher(self.store.enriched, self.builder())

    def vectorizer(self) -> Vectorizer:
        from kb.indexing.vectorize import Vectorizer

        llm = self.config.llm
        return Vectorizer(
            texts=self.store.texts,
            queue=self.store.queue,
            vectors=self.store.vectors,
            caches=self.store.caches,
            passages=self.store.passages,
            embedding=self.embedding(),
            batch=llm.embed_batch,
            concurrency=llm.concurrency,
        )

    def worker(
        self,
        *,
        stop: threading.Event | None = None,
        until_empty: bool = False,
        fail_fast: bool = False,
        on_attempt: Callable[[Attempt], None] | None = None,
        concurrency: int | None = None,
        speeds: Sequence[Speed] = ("embed", "enrich"),
    ) -> Worker:
        """A worker draining the queues of `speeds` (`Worker.run`): vectors first, then LLM
        context; it closes its enricher and vectorizer when it is done."""
        from kb.indexing.worker import Worker

        return Worker(
            self.enricher(),
            self.vectorizer(),
            self.store.queue,
            self.store.workers,
            concurrency=concurrency or self.config.enrich.concurrency,
            lease=self.config.enrich.lease,
            stop=stop,
            until_empty=until_empty,
            fail_fast=fail_fast,
            on_attempt=on_attempt,
            vaults=self.claimed_vaults,
            speeds=speeds,
        )

    def claimed_vaults(self) -> tuple[str, ...]:
        """The vaults whose notes this config's workers claim, now: its own, by the rule its
        searches keep to (`own_vaults`), and never a name the index holds for another
        configuration's folder, whose notes that one builds with its settings."""
        return own_vaults(
            self.config.folders(),
            self.config.file,
            self.store.vaults.holders(),
        )

    def drain(
        self,
        on_attempt: Callable[[Attempt], None] | None = None,
        *,
        stop: threading.Event | None = None,
    ) -> EnrichReport:
        """Embed and enrich every queued note this process can claim, here and now (`kb index
        --wait`), until `stop` is set (the notes in hand are finished); a model server or
        database that fails stops it with the error."""
        from kb.indexing.worker import drained

        return drained(
            lambda hook: self.worker(stop=stop, until_empty=True, fail_fast=True, on_attempt=hook),
            on_attempt,
        )

    def close(self) -> None:
        with self._making:
            if self._llm_pool is not None:
                self._llm_pool.shutdown(wait=True, cancel_futures=True)
