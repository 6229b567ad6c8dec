"""Three speeds: a note is found by its words as soon as it is stored, by its meaning once the
embedding queue has given it its vectors, and its LLM context comes last. Searches use what
exists meanwhile; a stop between the speeds loses nothing; no text is embedded twice."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from kb.container import Container
from kb.errors import Interrupted
from kb.indexing.verify import verify
from kb.llm.fake import FakeEmbedder
from kb.note_writing import bulk
from kb.note_writing.events import FileEvent
from kb.search.plan import SearchPlan
from kb.store import Store
from kb.store.texts import VectorsDone
from support.fake_kb import Kb
from support.reading import rows, search_store

NOTES = 15
WITH_TEXT = 14  # the example vault's empty note has nothing to embed
RAMEN = "Reference/Recipes/Weeknight Miso Ramen.md"


# Structural context only: the vectors are the last speed of this module's notes.
pytestmark = pytest.mark.kb_config(context={"summaries": "structure"})


class NoEmbedder(FakeEmbedder):
    """An embedder that must not be asked."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise AssertionError("the embedder was asked")


class GatedEmbedder(FakeEmbedder):
    """Answers its first request, then holds the next until let go."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.held = threading.Event()
        self.go = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.calls >= 1 and not self.go.is_set():
            self.held.set()
            assert self.go.wait(60)
        return super().embed(texts)


def _embed_all(kb: Kb) -> None:
    kb.worker(until_empty=True, fail_fast=True, speeds=("embed",)).run()


def _waiting(store: Store) -> int:
    return store.queue.status(speed="embed").items


def test_every_note_is_found_by_its_words_before_any_embedding_call(kb: Kb) -> None:
    kb.embedder = NoEmbedder(kb.config.llm.embed_model)
    report = Container.sync(kb)
    assert report.indexed == NOTES and report.embedded == 0
    assert _waiting(kb.store) == WITH_TEXT
    assert verify(kb.config, kb.store.documents).in_sync  # every note stored, its vectors queued
    for query, path in (("miso ramen chili oil", RAMEN), ("restic offsite", "Projects/Home")):
        found = search_store(kb.store, kb.embedder, SearchPlan(query, top_k=3))
        assert found.mode_used == "text" and found.hits[0].path.startswith(path), query
        assert found.warnings == (
            f"{WITH_TEXT} notes are not in the vector list yet (their vectors are being"
            " embedded): found by their words only",
        )


def test_a_query_while_the_vectors_are_embedded_searches_what_exists(kb: Kb) -> None:
    Container.sync(kb)
    gated = GatedEmbedder(kb.config.llm.embed_model)
    kb.embedder = gated
    worker = kb.worker(until_empty=True, fail_fast=True, speeds=("embed",))
    running = threading.Thread(target=worker.run, daemon=True)
    running.start()
    try:
        # The first request made the space; the first notes' vectors wait on the second.
        assert gated.held.wait(60)
        waiting = _waiting(kb.store)
        assert 0 < waiting <= WITH_TEXT
        found = search_store(kb.store, FakeEmbedder(gated.name), SearchPlan("miso ramen", top_k=5))
        assert found.hits and found.hits[0].path == RAMEN
        assert found.mode_used == "hybrid"  # the vector list exists, with what it holds
        assert found.warnings and found.warnings[0].startswith(f"{waiting} notes are not")
    finally:
        gated.go.set()
        running.join(60)
    found = search_store(kb.store, kb.embedder, SearchPlan("miso ramen", top_k=5, mode="vector"))
    assert found.hits[0].path == RAMEN and found.warnings == ()
    assert _waiting(kb.store) == 0


def test_a_worker_that_dies_between_the_speeds_loses_nothing(kb: Kb) -> None:
    Container.sync(kb)
    # A worker claimed every note for its vectors, then died: no heartbeat, nothing written.
    claimed = kb.store.queue.claim("died", lease=3600, limit=NOTES, speed="embed")
    assert len(claimed) == WITH_TEXT
    _embed_all(kb)
    assert _waiting(kb.store) == WITH_TEXT  # held by the dead worker's leases
    assert verify(kb.config, kb.store.documents).in_sync
    rows(kb.store, "UPDATE embedding_queue SET lease_until = now() RETURNING 1")
    _embed_all(kb)
    assert _waiting(kb.store) == 0
    assert not rows(kb.store, "SELECT 1 FROM chunks WHERE embedding IS NULL")
    assert not rows(kb.store, "SELECT 1 FROM passages WHERE embedding IS NULL")
    done = rows(kb.store, "SELECT worker FROM embedding_done")
    assert len(done) == WITH_TEXT and {r["worker"] for r in done} != {"died"}


def test_a_late_result_of_a_dead_worker_writes_nothing_stale(kb: Kb, vault: Path) -> None:
    Container.sync(kb)
    [claim] = kb.store.queue.claim("slow", lease=3600, speed="embed")
    [path] = rows(kb.store, "SELECT path FROM documents WHERE id = %s", claim.document_id)
    texts = kb.store.texts.unembedded([claim.document_id])
    # The note is edited and stored again before the slow worker is done with it.
    note = vault / path["path"]
    note.write_text(note.read_text() + "\n\nOne more paragraph about kayaks.\n")
    Container.sync(kb)
    vectors = FakeEmbedder(kb.config.llm.embed_model).embed([t.text for t in texts])
    done = kb.store.texts.finish_vectors(
        "slow",
        kb.embedder.name,
        list(zip(texts, vectors, strict=True)),
        [VectorsDone(claim, len(texts))],
    )
    assert done == []  # its item was replaced: a new ticket
    # Its new item waits under a new ticket; the rows it had read are gone.
    assert kb.store.queue.claim("w", lease=60, limit=NOTES, speed="embed")
    assert not rows(
        kb.store, "SELECT 1 FROM chunks WHERE id = ANY(%s)", [t.id for t in texts if not t.passage]
    )


def test_no_text_is_embedded_twice(kb: Kb, vault: Path) -> None:
    kb.sync()
    texts = rows(kb.store, "SELECT context_hash FROM chunks UNION SELECT text_hash FROM passages")
    assert kb.embedder.texts == len(texts) + 1  # and one probe of the model's size
    # A paragraph edited: only the texts it changed are embedded.
    kb.reset_counts()
    note = vault / RAMEN
    note.write_text(note.read_text().replace("miso", "white miso", 1))
    assert kb.sync().indexed == 1
    after = rows(kb.store, "SELECT context_hash FROM chunks UNION SELECT text_hash FROM passages")
    new = {r["context_hash"] for r in after} - {r["context_hash"] for r in texts}
    assert 0 < kb.embedder.texts == len(new)
    # Unchanged notes, a copy: nothing to embed.
    kb.reset_counts()
    (note.parent / "Ramen, a copy.md").write_bytes(note.read_bytes())
    assert kb.sync().indexed == 1 and kb.embedder.calls == 0
    assert _waiting(kb.store) == 0


def test_a_bulk_load_builds_the_vector_index_once_after_the_vectors(
    kb: Kb, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BULK_LOAD_NOTES", 5)
    dropped: list[bool] = []
    drop = kb.store.vectors.drop_index

    def watched_drop() -> None:
        dropped.append(kb.store.vectors.has_index())
        drop()

    monkeypatch.setattr(kb.store.vectors, "drop_index", watched_drop)
    Container.sync(kb)
    _embed_all(kb)  # the first vectors make the space and its indexes, then drop them
    assert True in dropped and kb.store.vectors.has_index()  # two slots may both drop it
    hits = search_store(
        kb.store, kb.embedder, SearchPlan("miso ramen", top_k=3, mode="vector")
    ).hits
    assert hits and hits[0].path == RAMEN


def test_a_few_notes_are_embedded_through_the_vector_index(kb: Kb, vault: Path) -> None:
    kb.sync()
    kb.store.vectors.drop_index = lambda: pytest.fail("the index dropped for one note")  # type: ignore[method-assign]
    note = vault / RAMEN
    note.write_text(note.read_text() + "\n\nA new paragraph about kayaks.\n")
    kb.sync()
    assert kb.store.vectors.has_index() and _waiting(kb.store) == 0


def _postings_index(store: Store) -> str | None:
    """The text index's postings B-tree as PostgreSQL would make it again; None if missing."""
    if not store.text_index.present():
        return None
    found = rows(store, "SELECT pg_get_indexdef('text_postings_order'::regclass) AS d")
    return str(found[0]["d"])


def test_a_bulk_load_of_notes_builds_the_text_index_once_after_them(
    kb: Kb, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BULK_LOAD_NOTES", 5)
    migrated = _postings_index(kb.store)
    assert migrated is not None
    during: list[str | None] = []

    def on_event(event: FileEvent) -> None:
        if event.path == RAMEN:
            during.append(_postings_index(kb.store))
            # Found by its words as soon as it is written, without the index.
            found = search_store(kb.store, kb.embedder, SearchPlan("miso ramen chili oil"))
            assert found.mode_used == "text" and found.hits[0].path == RAMEN

    with kb.indexer(on_event=on_event) as ix:
        assert ix.sync().indexed == NOTES
    assert during == [None]
    assert _postings_index(kb.store) == migrated  # built again as the migration made it
    # A write smaller than the index goes through it.
    kb.store.text_index.drop = lambda: pytest.fail("dropped for one note")  # type: ignore[method-assign]
    note = vault / RAMEN
    note.write_text(note.read_text() + "\n\nWombats at the market.\n")
    assert Container.sync(kb).indexed == 1
    note.write_text(note.read_text().replace("Wombats", "Quokkas"))
    assert Container.sync(kb).indexed == 1
    assert not search_store(kb.store, kb.embedder, SearchPlan("wombats", mode="text")).hits
    assert search_store(kb.store, kb.embedder, SearchPlan("quokkas", mode="text")).hits


def test_a_bulk_load_stopped_midway_loses_nothing_and_the_next_sync_builds_the_index(
    kb: Kb, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BULK_LOAD_NOTES", 5)
    calls = 0

    def checkpoint() -> None:
        nonlocal calls
        calls += 1
        if calls >= 4:  # once each of the two groups being written has a note done
            raise Interrupted("stop")

    with kb.indexer(checkpoint=checkpoint) as ix, pytest.raises(Interrupted):
        ix.sync()
    written = kb.store.documents.states("v")
    assert 0 < len(written) < NOTES
    assert _postings_index(kb.store) is None  # the stop left it dropped
    assert set(kb.store.documents.row_problems().values()) == {0}
    # What was written is found by its words meanwhile, and a note written again replaces
    # its postings (found without the index).
    path = next(iter(written))
    note = vault / path
    note.write_text(note.read_text() + "\n\nA paragraph about quokkas.\n")
    assert Container.sync(kb).indexed == NOTES - len(written) + 1
    assert _postings_index(kb.store) is not None
    found = search_store(kb.store, kb.embedder, SearchPlan("quokkas", mode="text"))
    assert [h.path for h in found.hits] == [path]
    orphans = (
        "SELECT 1 FROM text_postings p"
        " WHERE NOT EXISTS (SELECT 1 FROM text_chunks t WHERE t.chunk_id = p.chunk_id)"
    )
    assert not rows(kb.store, orphans)  # the note's old postings went with its old chunks
    assert verify(kb.config, kb.store.documents).in_sync
