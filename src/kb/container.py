"""The composition root: a Config turned into ready parts.

The one place kb is wired. Every entry point (the CLI's commands, the daemon, workers,
benchmarks, tests) opens a Container and takes its parts from it, so a part is built
the same way wherever it is used. The schema is migrated here, once, when the database
is opened; the parts themselves never migrate. The models are made in
`kb.composition.models`, the parts that write the index in `kb.composition.indexing_parts`;
the container joins them to the store and builds the services the faces call.

Heavy modules (the indexing pipeline, the daemon) are imported only by the methods that
build them: `kb query` does not load Markdown parsing or file watching.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from kb import db
from kb.composition.indexing_parts import IndexingParts
from kb.composition.models import Models
from kb.config import Config
from kb.models.base import ChatModel, Embedder
from kb.store import Store, schema

if TYPE_CHECKING:
    from kb.daemon.daemon import Daemon
    from kb.note_writing.events import SyncReport
    from kb.search.ranker import Ranker
    from kb.services.note_links import NoteFinder
    from kb.services.relating import RelatedService
    from kb.services.searching import SearchService
    from kb.services.status_report import StatusReport


def open_store(url: str, *, max_connections: int = 8) -> Store:
    """The store of a database, its schema migrated first."""
    schema.migrate(url)
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
        self.models = Models(config, store.caches, chat=chat, embedder=embedder)
        self.indexing = IndexingParts(config, store, self.models)
        # What the faces ask the container for, each its part's own method: attributes, so
        # none is a method a subclass could override (`sync`, which may be, is the
        # container's own).
        self.cross_encoder = self.models.cross_encoder
        self.reranker = self.models.reranker
        self.embedding = self.indexing.embedding
        self.builder = self.indexing.builder
        self.indexer = self.indexing.indexer
        self.enricher = self.indexing.enricher
        self.vectorizer = self.indexing.vectorizer
        self.worker = self.indexing.worker
        self.drain = self.indexing.drain

    @classmethod
    def open(cls, config: Config, *, url: str | None = None) -> Container:
        """Parts for `config`, on its database (or on `url`), migrated and connected."""
        return cls(config, open_store(url or db.database_url(config.database_url, config.data_dir)))

    def sync(self, **options: Any) -> SyncReport:
        """One whole sync of the configured vaults (`Indexer.sync`'s options)."""
        with self.indexer() as indexer:
            return indexer.sync(**options)

    @property
    def chat(self) -> ChatModel:
        return self.models.chat

    @chat.setter
    def chat(self, model: ChatModel) -> None:
        self.models.chat = model

    @property
    def answer_chat(self) -> ChatModel:
        return self.models.answer_chat

    @property
    def embedder(self) -> Embedder:
        return self.models.embedder

    @embedder.setter
    def embedder(self, model: Embedder) -> None:
        self.models.embedder = model

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
            own_vaults=self.config.folders(),
            config_file=self.config.file,
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
        self.models.close()
        self.indexing.close()
        self.store.close()

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
