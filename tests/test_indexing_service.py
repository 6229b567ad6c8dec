"""`kb index --wait`'s policy (kb.services.indexing): embed and enrich here while no worker
runs, watch the workers while some do."""

from __future__ import annotations

import threading

from kb.container import Container
from kb.indexing.enrich import EnrichReport
from kb.services import indexing
from kb.store import WorkerBeat
from support.daemons import wait_for
from support.fake_kb import Kb
from support.reading import rows

QUEUED = 14  # the example vault's notes long enough for an LLM context


def _progress() -> tuple[list[tuple[int, int]], indexing.Progress]:
    seen: list[tuple[int, int]] = []

    def on_progress(report: EnrichReport, left: indexing.Queues) -> None:
        seen.append((report.done, left.context.items))

    return seen, on_progress


def test_no_worker_running_enriches_here(kb: Kb) -> None:
    Container.sync(kb)  # searchable by words, the vectors and the LLM context queued
    backlog = indexing.backlog(kb.store.queue, kb.store.workers)
    assert backlog is not None and backlog.workers == 0
    assert (backlog.queues.vectors.items, backlog.queues.context.items) == (QUEUED, QUEUED)
    seen, on_progress = _progress()

    done = indexing.finish(kb.store.queue, kb.store.workers, kb.drain, on_progress)

    assert (done.report.done, done.report.vectored, done.report.failed) == (QUEUED, QUEUED, 0)
    assert done.left.items == 0
    assert seen[-1] == (QUEUED, 0) and len(seen) > 1  # as it went, at most every 0.2 s
    assert indexing.backlog(kb.store.queue, kb.store.workers) is None


def test_running_workers_are_watched_not_competed_with(kb: Kb) -> None:
    Container.sync(kb)
    # A worker that looks alive: the wait leaves the queue to the workers.
    kb.store.workers.beat(WorkerBeat("elsewhere", "laptop", 1, 1, 0, 60.0))
    backlog = indexing.backlog(kb.store.queue, kb.store.workers)
    assert backlog is not None and backlog.workers == 1
    worker = kb.worker(until_empty=True)
    running = threading.Thread(target=worker.run, name="test-worker", daemon=True)
    running.start()
    seen, on_progress = _progress()

    done = indexing.finish(kb.store.queue, kb.store.workers, kb.drain, on_progress)
    running.join(60)

    assert done.report.done == 0 and done.left.items == 0, "every note enriched by the worker"
    assert seen and all(enriched_here == 0 for enriched_here, _ in seen)


def test_a_dead_workers_leases_are_waited_out_and_their_notes_enriched(kb: Kb) -> None:
    Container.sync(kb)
    kb.worker(until_empty=True, speeds=("embed",)).run()
    # A worker that died holding three notes: no heartbeat, its leases good for an hour.
    assert len(kb.store.queue.claim("died-meanwhile", lease=3600, limit=3)) == 3
    seen, on_progress = _progress()
    waited: list[indexing.Enrichment] = []
    waiting = threading.Thread(
        target=lambda: waited.append(
            indexing.finish(kb.store.queue, kb.store.workers, kb.drain, on_progress)
        ),
        name="test-wait",
        daemon=True,
    )
    waiting.start()
    wait_for(lambda: seen and seen[-1] == (QUEUED - 3, 3), "the other notes enriched")
    waiting.join(0.5)
    assert waiting.is_alive(), "returned while a dead worker's notes were still to enrich"
    # Their leases run out (written into the past rather than waited for).
    expired = rows(
        kb.store,
        "UPDATE enrichment_queue SET lease_until = now() - interval '1 second'"
        " WHERE lease_owner = %s RETURNING document_id",
        "died-meanwhile",
    )
    assert len(expired) == 3
    waiting.join(30)
    assert not waiting.is_alive() and waited, "still waiting after the leases ran out"
    done = waited[0]
    assert (done.report.done, done.left.items) == (QUEUED, 0)
