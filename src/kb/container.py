"""The composition root: a Config turned into ready parts.

The one place kb is wired. Every entry point (the CLI's commands, the daemon, workers,
benchmarks, tests) opens a Container and takes its parts from it, so a part is built
the same way wherever it is used. The schema is migrated here, once, when the database
is opened; the parts themselves never migrate.

Heavy modules (the indexing pipeline, the daemon) are imported only by the methods that
build them: `kb query` does not load Markdown parsing or file watching.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from kb import db
from kb.config import Config
from kb.llm import make_chat, make_cross_encoder, make_embedder
from kb.llm.base import ChatModel, CrossEncoder, Embedder
from kb.store import Store

if TYPE_CHECKING:
    from kb.daemon.daemon import Daemon
    from kb.indexing.building import NoteBuilder
    from kb.indexing.embedding import Embedding
    from kb.indexing.enrich import Attempt, Enricher, EnrichReport
    from kb.indexing.events import FileEvent, SyncReport
    from kb.indexing.indexer import Indexer
    from kb.indexing.vectorize import Vectorizer
    from kb.indexing.worker import Worker
    from kb.search.ranker import Ranker
    from kb.search.rerank import HitReranker
    from kb.services.note_links import NoteFinder
    from kb.services.relating import RelatedService
    from kb.services.searching import SearchService
    from kb.services.status_report import StatusReport
    from kb.store.queue import Speed


def open_store(url: str, *, max_connections: int = 8) -> Store:
    """The store of a database, its schema migrated first."""
    db.migrate(url)
    return Store(url, max_connections=max_connections)


class Container:
    """A config's parts: the open store, the models, and builders for everything else.

    `chat` and `embedder` may be given or set (tests use counting or failing fakes);
    otherwise they are made from `config.llm` when first used.
    """

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        chat: ChatModel | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self._chat = chat
        self._embedder = embedder
        self._answer_chat: ChatModel | None = None
        # Kept once made: a local cross-encoder loads its model on its first use, once for
        # all the searches of a daemon or a web page.
        self._cross_encoder: CrossEncoder | None = None
        self._making = threading.Lock()
        # One a process, for the indexer, enrichment and vectors alike: one pool of LLM calls
        # and one bound on embedding requests in flight. Made again when a model is swapped.
        self._llm_pool: ThreadPoolExecutor | None = None
        self._embedding: Embedding | None = None
        self._builder: NoteBuilder | None = None

    @classmethod
    def open(cls, config: Config, *, url: str | None = None) -> Container:
        """Parts for `config`, on its database (or on `url`), migrated and connected."""
        return cls(config, open_store(url or db.database_url(config.database_url, config.data_dir)))

    @property
    def chat(self) -> ChatModel:
        if self._chat is None:
            self._chat = make_chat(self.config.llm)
        return self._chat

    @chat.setter
    def chat(self, model: ChatModel) -> None:
        self._chat = model
        self._builder = None

    @property
    def answer_chat(self) -> ChatModel:
        """The chat model that answers questions: `[ask]`'s when it names one of its own
        (made when first used), else `chat`."""
        if not self.config.ask.own_model():
            return self.chat
        if self._answer_chat is None:
            self._answer_chat = make_chat(self.config.ask.llm(self.config.llm), section="ask")
        return self._answer_chat

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = make_embedder(self.config.llm)
        return self._embedder

    @embedder.setter
    def embedder(self, model: Embedder) -> None:
        self._embedder = model
        self._embedding = self._builder = None

    def embedding(self) -> Embedding:
        """The process's embedding of texts (the embedder, its batches and requests in
        flight)."""
        from kb.indexing.embedding import Embedding

        with self._making:
            if self._embedding is None:
                llm = self.config.llm
                self._embedding = Embedding(
                    caches=self.store.caches,
                    vectors=self.store.vectors,
                    passages=self.store.passages,
                    embedder=self.embedder,
                    batch=llm.embed_batch,
                    in_flight=llm.concurrency,
                )
            return self._embedding

    def builder(self) -> NoteBuilder:
        """The process's note builder: the chat model's context on the one LLM pool, and
        the vectors of `embedding()`."""
        from kb.context.contextualizer import Contextualizer
        from kb.indexing.building import NoteBuilder

        embedding = self.embedding()
        with self._making:
            if self._llm_pool is None:
                self._llm_pool = ThreadPoolExecutor(
                    max(1, self.config.llm.concurrency), thread_name_prefix="kb-llm"
                )
            if self._builder is None:
                context = Contextualizer.for_config(self.chat, self.config, self._llm_pool)
                self._builder = NoteBuilder(context, embedding, self.store.caches)
            return self._builder

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

    def sync(self, **options: Any) -> SyncReport:
        """One whole sync of the configured vaults (`Indexer.sync`'s options)."""
        with self.indexer() as indexer:
            return indexer.sync(**options)

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
            vaults=[v.name for v in self.config.vaults],
            speeds=speeds,
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

    def reranker(self) -> HitReranker:
        """The re-ranker `rerank.backend` names: the chat model's judge, or a cross-encoder."""
        candidates, chars = self.config.rerank.bounds(self.config.query)
        if self.config.rerank.backend != "chat":
            from kb.search.crossencoder import CrossEncoderReranker

            return CrossEncoderReranker(
                self.cross_encoder(), self.store.caches, candidates=candidates, chars=chars
            )
        from kb.search.rerank import Reranker

        return Reranker(
            self.chat,
            self.store.caches,
            candidates=candidates,
            chars=chars,
            context_window=self.config.llm.context_window,
            concurrency=self.config.llm.concurrency,
        )

    def cross_encoder(self) -> CrossEncoder:
        """The cross-encoder of `[rerank]`: a /rerank server's client, or a local ONNX model
        (loaded when it first scores)."""
        with self._making:
            if self._cross_encoder is None:
                self._cross_encoder = make_cross_encoder(self.config.rerank)
            return self._cross_encoder

    def search_service(self) -> SearchService:
        """Searches and questions with this config's `[query]` settings, for every face."""
        from kb.services.searching import SearchService

        return SearchService(
            self.embedder,
            self.config.query,
            candidates=self.store.candidates,
            vectors=self.store.vectors,
            queue=self.store.queue,
            documents=self.store.documents,
            vaults=self.store.vaults,
            owner_name=self.config.owner_name,
            own_vaults={v.name: v.folder for v in self.config.vaults},
            config_file=os.path.realpath(self.config.source) if self.config.source else None,
            context_window=self.config.ask.llm(self.config.llm).context_window,
            answer_passages=self.config.ask.passages,
            chat=lambda: self.answer_chat,
            reranker=self.reranker,
            ranker=self.ranker if self.config.query.ranker == "learned" else None,
            voiced_index=self.config.context.voiced_passages(),
        )

    def related_service(self) -> RelatedService:
        """Related notes over this config's vaults, for every face."""
        from kb.related import scorer
        from kb.services.relating import RelatedService

        return RelatedService(
            related=self.store.related,
            links=self.store.links,
            vectors=self.store.vectors,
            own_vaults=[v.name for v in self.config.vaults],
            ranker=scorer.load,
            owner_name=self.config.owner_name,
        )

    def note_finder(self) -> NoteFinder:
        """NOTE arguments made this config's indexed notes, and their links, for every face."""
        from kb.services.note_links import NoteFinder

        return NoteFinder(self.config.vaults, self.store.links)

    def status_reader(self) -> Callable[[], StatusReport]:
        """The status report of this config over the seven repositories it reads, read anew at
        each call: for every face that shows it."""
        from kb.services.status_report import StatusSources, status_report

        s = self.store
        sources = StatusSources(
            s.vaults, s.state, s.daemons, s.queue, s.workers, s.documents, s.links
        )
        return partial(status_report, self.config, sources)

    def ranker(self) -> Ranker:
        """The learned ranker of `query.ranker_file`, or the one kb ships."""
        from kb.search import ranker
        from kb.search.features import SCHEMA

        return ranker.load(self.config.query.ranker_file or ranker.DEFAULT_MODEL, SCHEMA)

    def daemon(
        self,
        *,
        stop: threading.Event | None = None,
        daemon_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> Daemon:
        """A daemon over this config's store, given the builders of its indexer and its
        background worker (not the container: the daemon sits below it) and the clock its
        timers read."""
        from kb.daemon.daemon import Daemon

        enrich = self.config.enrich
        return Daemon(
            self.config.daemon,
            vaults=self.config.vaults,
            enrich_here=enrich.enabled and enrich.in_daemon,
            state=self.store.state,
            database_url=self.store.url,
            indexer=self.indexer,
            worker=self.worker,
            stop=stop,
            daemon_id=daemon_id,
            clock=clock,
        )

    def close(self) -> None:
        with self._making:
            if self._cross_encoder is not None:
                self._cross_encoder.close()
            if self._llm_pool is not None:
                self._llm_pool.shutdown(wait=True, cancel_futures=True)
        self.store.close()

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
