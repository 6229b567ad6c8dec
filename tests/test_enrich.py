"""Two speeds: notes searchable at once without a chat model, their LLM context written later
by workers draining a queue in PostgreSQL (claims, leases, stale results, several workers)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kb.container import Container
from kb.context import full_context, header_line
from kb.indexing.enrich import Attempt
from kb.indexing.verify import verify
from kb.llm.fake import FakeChat
from kb.models.base import Prompt
from kb.note_writing.events import SyncReport
from kb.search.plan import SearchPlan
from kb.store import Claim, Store
from support.configs import SUMMARIES, summaries_config, write_config
from support.fake_kb import Kb, file_summaries
from support.reading import rows, search_store, stored_chunks

# The queue's tests count the file summaries each note is enriched with.
pytestmark = pytest.mark.kb_config(context=SUMMARIES)


LONG_NOTE = "Projects/Home Server.md"
# Every note of the example vault but the empty one has LLM context to wait for.
QUEUED = 14


def fast_sync(kb: Kb, **options: Any) -> SyncReport:
    """A sync, as `kb index` runs it, then the vectors of its notes: nothing enriched yet."""
    report = Container.sync(kb, **options)
    embed_all(kb)
    return report


def embed_all(kb: Kb) -> None:
    """The middle speed alone: every queued note given its vectors, no LLM context."""
    kb.worker(until_empty=True, fail_fast=True, speeds=("embed",)).run()


def _doc(store: Store, path: str) -> dict:
    [row] = rows(store, "SELECT * FROM documents WHERE path = %s", path)
    return row


def _claim_all(store: Store, owner: str, lease: float = 60) -> list[Claim]:
    claims = []
    while batch := store.queue.claim(owner, lease=lease):
        claims += batch
    return claims


def _path_of(store: Store, claim: Claim) -> str:
    [row] = rows(store, "SELECT path FROM documents WHERE id = %s", claim.document_id)
    return row["path"]


def _edit_first_paragraph(vault: Path, path: str) -> None:
    """A change the file summary reads (it is written from the first and last chunks)."""
    file = vault / path
    file.write_text(file.read_text().replace(" the ", " the zebra" * 9 + " ", 1))


def test_a_note_is_searchable_before_its_enrichment(kb: Kb) -> None:
    report = Container.sync(kb)
    assert report.indexed == 15 and report.queued == QUEUED
    assert kb.chat.total_calls == 0 and kb.embedder.calls == 0
    status = kb.store.queue.status()
    assert status.items == QUEUED and status.in_progress == 0 and status.failing == 0
    assert kb.store.queue.status(speed="embed").items == QUEUED  # the empty note has no text
    # Stored with structural context and its words, its vectors to come: the index equals
    # the vault.
    doc = _doc(kb.store, LONG_NOTE)
    named = 'Note "Home Server" (also "homelab", "NAS", "box") in Projects.'
    assert doc["summary"].startswith(named)
    for chunk in stored_chunks(kb.store, LONG_NOTE):
        assert chunk["summary"].startswith('Part of the note "Home Server"')
        assert chunk["embedding"] is None
        assert chunk["full_context"] == full_context(
            doc["summary"], chunk["summary"], header_line(tuple(chunk["header_path"])),
            chunk["content"],
        )  # fmt: skip
    assert verify(kb.config, kb.store.documents).in_sync
    found = search_store(kb.store, kb.embedder, SearchPlan("restic offsite backups", top_k=3))
    assert found.hits and found.hits[0].path == LONG_NOTE and found.mode_used == "text"
    assert found.warnings == (
        f"{QUEUED} notes are not in the vector list yet (their vectors are being embedded):"
        " found by their words only",
    )

    embed_all(kb)
    assert kb.chat.total_calls == 0 and kb.store.queue.status(speed="embed").items == 0
    assert all(c["embedding"] is not None for c in stored_chunks(kb.store, LONG_NOTE))
    found = search_store(kb.store, kb.embedder, SearchPlan("restic offsite backups", top_k=3))
    assert found.hits[0].path == LONG_NOTE and found.mode_used == "hybrid"
    assert found.warnings == ()

    enriched = kb.drain()
    assert enriched.done == QUEUED and enriched.llm_calls == kb.chat.total_calls > 0
    assert kb.store.queue.status().items == 0
    doc = _doc(kb.store, LONG_NOTE)
    assert doc["summary"].startswith("A note covering")
    assert all(
        c["summary"].startswith("This part covers") for c in stored_chunks(kb.store, LONG_NOTE)
    )
    assert verify(kb.config, kb.store.documents).in_sync


def test_a_note_with_every_output_cached_is_stored_whole(kb: Kb, vault: Path) -> None:
    kb.sync()
    kb.reset_counts()
    (vault / "Projects/Home Server copy.md").write_bytes((vault / LONG_NOTE).read_bytes())
    report = fast_sync(kb)
    assert report.indexed == 1 and report.queued == 0
    assert kb.chat.total_calls == 0 and kb.store.queue.status().items == 0
    copy = stored_chunks(kb.store, "Projects/Home Server copy.md")
    assert [c["full_context"] for c in copy] == [
        c["full_context"] for c in stored_chunks(kb.store, LONG_NOTE)
    ]


def test_a_first_index_looks_up_no_llm_output_until_the_index_holds_one(
    kb: Kb, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caches = kb.store.caches
    looked: list[str] = []

    def watched(name: str) -> Callable[..., Any]:
        real = getattr(caches, name)

        def call(*args: Any) -> Any:
            looked.append(name)
            return real(*args)

        return call

    for name in ("known_outputs", "stored_voice"):
        monkeypatch.setattr(caches, name, watched(name))
    report = fast_sync(kb)
    assert report.queued == QUEUED and looked == []  # an empty index holds nothing to find
    kb.drain()
    # A copy then finds every output its original paid for, and the edited note its own.
    looked.clear()
    kb.reset_counts()
    (vault / "Projects/Home Server copy.md").write_bytes((vault / LONG_NOTE).read_bytes())
    report = fast_sync(kb)
    assert report.indexed == 1 and report.queued == 0 and kb.chat.total_calls == 0
    assert "known_outputs" in looked


def test_an_edit_keeps_the_cached_context_of_the_rest_of_the_note(kb: Kb, vault: Path) -> None:
    kb.sync()
    before = stored_chunks(kb.store, LONG_NOTE)
    summary = _doc(kb.store, LONG_NOTE)["summary"]
    lines = (vault / LONG_NOTE).read_text().split("\n")
    middle = [i for i, line in enumerate(lines) if " the " in line][3]
    lines[middle] = lines[middle].replace(" the ", " the EDITED ", 1)
    (vault / LONG_NOTE).write_text("\n".join(lines))
    fast_sync(kb)
    after = stored_chunks(kb.store, LONG_NOTE)
    changed = [a for a, b in zip(after, before, strict=True) if a["content"] != b["content"]]
    kept = [a for a, b in zip(after, before, strict=True) if a["content"] == b["content"]]
    # While it waits, the edited chunk has a structural summary; the others keep theirs,
    # with the note's file summary, so what they are found by does not change.
    assert len(changed) == 1 and changed[0]["summary"].startswith('Part of the note "')
    assert all(a["full_context"] in {b["full_context"] for b in before} for a in kept)
    assert _doc(kb.store, LONG_NOTE)["summary"] == summary
    assert kb.store.queue.status().items == 1


def test_the_queue_gives_the_newest_notes_first(kb: Kb, vault: Path) -> None:
    notes = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))
    for i, path in enumerate(notes):
        os.utime(vault / path, ns=(0, 1_700_000_000_000_000_000 + i * 1_000_000_000))
    fast_sync(kb)
    claimed = [_path_of(kb.store, c) for c in _claim_all(kb.store, "w")]
    queued = [p for p in notes if p in set(claimed)]
    assert len(claimed) == QUEUED and claimed == queued[::-1]


def test_an_edit_before_enrichment_replaces_the_item(kb: Kb, vault: Path) -> None:
    fast_sync(kb)
    [first] = rows(kb.store, "SELECT ticket FROM enrichment_queue q JOIN documents d"
                    " ON d.id = q.document_id WHERE d.path = %s", LONG_NOTE)  # fmt: skip
    _edit_first_paragraph(vault, LONG_NOTE)
    fast_sync(kb)
    [second] = rows(kb.store, "SELECT q.ticket, q.content_hash, d.content_hash AS now"
                     " FROM enrichment_queue q JOIN documents d ON d.id = q.document_id"
                     " WHERE d.path = %s", LONG_NOTE)  # fmt: skip
    assert second["ticket"] != first["ticket"] and second["content_hash"] == second["now"]
    assert kb.store.queue.status().items == QUEUED
    enriched = kb.drain()
    # Enriched once, for the latest content.
    assert enriched.done == QUEUED and file_summaries(kb.chat) == QUEUED
    assert "zebra" in _doc(kb.store, LONG_NOTE)["summary"]


def test_a_result_for_an_older_version_is_dropped(kb: Kb, vault: Path) -> None:
    fast_sync(kb)
    claims = {_path_of(kb.store, c): c for c in _claim_all(kb.store, "slow")}
    _edit_first_paragraph(vault, LONG_NOTE)
    fast_sync(kb)  # queued again, with a new ticket, while "slow" still works on it
    enricher = kb.enricher()
    attempt = enricher.enrich(claims[LONG_NOTE], "slow")
    assert attempt.outcome == "dropped" and attempt.llm_calls > 0
    assert _doc(kb.store, LONG_NOTE)["summary"].startswith('Note "Home Server"')
    kb.reset_counts()
    enriched = kb.drain()  # the new item; the others are still held by "slow"
    assert enriched.done == 1 and file_summaries(kb.chat) == 1
    assert "zebra" in _doc(kb.store, LONG_NOTE)["summary"]


def test_an_expired_lease_hands_the_note_to_another_worker(kb: Kb) -> None:
    fast_sync(kb)
    [dead] = kb.store.queue.claim("dead", lease=60)  # a worker that dies holding a note
    others = _claim_all(kb.store, "alive")
    assert dead.document_id not in {c.document_id for c in others}
    _expire_leases(kb.store, "dead")
    [taken] = kb.store.queue.claim("alive", lease=60)
    assert taken.document_id == dead.document_id and taken.attempts == 2
    enricher = kb.enricher()
    assert enricher.enrich(taken, "alive").outcome == "done"
    # The dead worker, back from a long pause, finds its lease gone: nothing is written.
    assert enricher.enrich(dead, "dead").outcome == "dropped"
    assert len(rows(kb.store, "SELECT * FROM enrichment_done")) == 1


def test_concurrent_claims_never_share_an_item(kb: Kb) -> None:
    fast_sync(kb)
    start = threading.Barrier(8)
    claimed: dict[str, list[int]] = {}

    def claim(owner: str) -> None:
        start.wait()
        claimed[owner] = [c.document_id for c in _claim_all(kb.store, owner)]

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [d for ids in claimed.values() for d in ids]
    assert len(every) == len(set(every)) == QUEUED


def test_workers_draining_together_do_nothing_twice(kb: Kb) -> None:
    Container.sync(kb)  # both speeds left to the workers
    attempts: list[Attempt] = []
    workers = [kb.worker(until_empty=True, concurrency=2, on_attempt=attempts.append)]
    workers.append(kb.worker(until_empty=True, concurrency=2, on_attempt=attempts.append))
    threads = [threading.Thread(target=w.run) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    enriching = [a for a in attempts if a.speed == "enrich"]
    assert [a.outcome for a in enriching] == ["done"] * QUEUED
    assert len({a.document_id for a in enriching}) == QUEUED
    vectored = [a.document_id for a in attempts if a.speed == "embed" and a.outcome == "done"]
    assert sorted(vectored) == sorted({a.document_id for a in enriching})  # each note once
    assert file_summaries(kb.chat) == QUEUED  # each note's summary written once
    done = rows(kb.store, "SELECT worker, count(*) AS n FROM enrichment_done GROUP BY 1")
    assert sum(r["n"] for r in done) == QUEUED and {r["worker"] for r in done} <= {
        w.id for w in workers
    }
    assert kb.store.queue.status().items == 0 and verify(kb.config, kb.store.documents).in_sync


def test_stopping_a_worker_finishes_the_note_in_hand(kb: Kb) -> None:
    fast_sync(kb)
    in_call = threading.Event()
    release = threading.Event()

    class SlowChat(FakeChat):
        def complete(self, prompt: Prompt) -> str:
            in_call.set()
            release.wait(30)
            return super().complete(prompt)

    kb.chat = SlowChat("fake-chat")
    attempts: list[Attempt] = []
    worker = kb.worker(on_attempt=attempts.append)
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert in_call.wait(30)
    worker.stop()
    release.set()
    thread.join(30)
    assert not thread.is_alive()
    assert [a.outcome for a in attempts if a.speed == "enrich"] == ["done"]
    assert kb.store.queue.status().items == QUEUED - 1 and kb.store.workers.listed() == []


def test_a_failed_attempt_is_recorded_and_retried_later(kb: Kb) -> None:
    fast_sync(kb)
    [claim] = kb.store.queue.claim("w", lease=60)
    kb.store.queue.release(claim, "w", error="cannot reach the LLM server", retry_in=3600)
    status = kb.store.queue.status()
    assert status.items == QUEUED and status.failing == 1
    [failing] = status.failures
    assert failing.error == "cannot reach the LLM server" and failing.attempts == 1
    assert failing.path == _path_of(kb.store, claim)
    # Not claimed again before its back-off is over.
    assert claim.document_id not in {c.document_id for c in _claim_all(kb.store, "w2")}


def test_a_model_server_down_stops_an_interactive_drain(kb: Kb) -> None:
    from kb.errors import LLMUnavailable

    class DeadChat(FakeChat):
        def complete(self, prompt: Prompt) -> str:
            raise LLMUnavailable("cannot reach the LLM server")

    fast_sync(kb)
    kb.chat = DeadChat("fake-chat")
    with pytest.raises(LLMUnavailable):
        kb.drain()
    status = kb.store.queue.status()
    assert status.items == QUEUED and status.failing >= 1 and status.in_progress == 0


def test_queue_status_rate_and_eta(kb: Kb) -> None:
    fast_sync(kb)
    assert kb.store.queue.status().rate is None
    [claim] = kb.store.queue.claim("w", lease=60)
    time.sleep(0.2)
    enricher = kb.enricher()
    assert enricher.enrich(claim, "w").outcome == "done"
    status = kb.store.queue.status()
    assert status.done_last_hour == status.done_last_day == 1
    assert status.rate is not None and status.rate > 0
    assert status.eta_seconds == pytest.approx((QUEUED - 1) / status.rate)


def test_a_deleted_note_leaves_the_queue(kb: Kb, vault: Path) -> None:
    fast_sync(kb)
    [claim] = [c for c in _claim_all(kb.store, "w") if _path_of(kb.store, c) == LONG_NOTE]
    (vault / LONG_NOTE).unlink()
    fast_sync(kb)
    assert kb.store.queue.status().items == QUEUED - 1
    enricher = kb.enricher()
    assert enricher.enrich(claim, "w").outcome == "dropped"


def test_a_worker_built_for_other_settings_refuses_the_note(store: Store, vault: Path) -> None:
    indexing = Kb(store, summaries_config(vault))
    fast_sync(indexing)
    other = Kb(store, summaries_config(vault, llm={"embed_window": 64}))
    with pytest.raises(Exception, match="context build"):
        other.drain()
    assert store.queue.status().failing == 1


def test_enrichment_off_writes_the_llm_context_while_indexing(store: Store, vault: Path) -> None:
    on = Kb(store, summaries_config(vault))
    fast_sync(on)
    assert store.queue.status().items == QUEUED
    off = Kb(store, summaries_config(vault, enrich={"enabled": False}))
    report = fast_sync(off)
    # The notes still queued are indexed again, with the model, and leave the queue.
    assert report.indexed == QUEUED and report.queued == 0
    assert file_summaries(off.chat) == QUEUED
    assert store.queue.status().items == 0
    assert _doc(store, LONG_NOTE)["summary"].startswith("A note covering")
    off.reset_counts()
    assert fast_sync(off).indexed == 0 and off.chat.total_calls == 0


def test_other_levels_queue_nothing(store: Store, vault: Path) -> None:
    for level in ("structure", "none"):
        kb = Kb(store, summaries_config(vault, context={"summaries": level}))
        assert fast_sync(kb).queued == 0 and store.queue.status().items == 0


class HangingChatServer:
    """An OpenAI-compatible server whose chat requests never get an answer."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.released = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                server.asked.set()
                server.released.wait()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()


def test_a_killed_worker_leaves_its_note_to_another(
    kb: Kb, vault: Path, tmp_path: Path, db_url: str
) -> None:
    fast_sync(kb)
    server = HangingChatServer()
    config = write_config(
        tmp_path / "worker.toml",
        vault,
        llm={"provider": "openai", "host": server.url, "retries": 0, "timeout": 600},
        enrich={"lease": 5},
        context=SUMMARIES,
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "kb", "--config", str(config), "worker"],
        env={**os.environ, "KB_DATABASE_URL": db_url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert server.asked.wait(60), "the worker never asked the model"
        assert kb.store.queue.status().in_progress == 1
        worker.kill()  # mid-note: no chance to give it back
        worker.wait(30)
        assert kb.store.queue.status().in_progress == 1  # held until its lease runs out
        _expire_leases(kb.store)
        enriched = kb.drain()
    finally:
        if worker.poll() is None:
            worker.kill()
        server.close()
    assert enriched.done == QUEUED and kb.store.queue.status().items == 0
    assert len(rows(kb.store, "SELECT * FROM enrichment_done")) == QUEUED
    assert verify(kb.config, kb.store.documents).in_sync


def test_vector_search_reads_past_the_index_entries_enrichment_leaves(kb: Kb) -> None:
    fast_sync(kb)
    kb.drain()  # every chunk updated: its old vector stays in the HNSW index until a vacuum
    chunks = kb.store.state.status().chunks
    assert chunks > 2 * 40
    found = kb.store.candidates.find(
        kb.embedder.embed_query("postgres backups"),
        "postgres backups",
        model="hash-256",
        dimensions=256,
        depth=40,
        lists="vector",
    )
    assert len(found.vector) == 40


def _expire_leases(store: Store, owner: str | None = None) -> None:
    """The leases of `owner` (of everyone when None) run out now: their time written into
    the past, as a worker that died long ago left them."""
    rows(
        store,
        "UPDATE enrichment_queue SET lease_until = now() - interval '1 second'"
        " WHERE lease_until IS NOT NULL AND (%s::text IS NULL OR lease_owner = %s)"
        " RETURNING document_id",
        owner,
        owner,
    )
