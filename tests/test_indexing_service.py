"""`kb index --wait`'s policy (kb.services.indexing): enrich here while no worker runs, watch
the workers while some do."""

from __future__ import annotations

import threading

from conftest import Kb
from kb.container import Container
from kb.indexing.enrich import EnrichReport
from kb.services import indexing
from kb.store import QueueStatus, WorkerBeat

QUEUED = 14  # the example vault's notes long enough for an LLM context


def _progress() -> tuple[list[tuple[int, int]], indexing.Progress]:
    seen: list[tuple[int, int]] = []

    def on_progress(report: EnrichReport, left: QueueStatus) -> None:
        seen.append((report.done, left.items))

    return seen, on_progress


def test_no_worker_running_enriches_here(kb: Kb) -> None:
    Container.sync(kb)  # searchable, the LLM context queued
    backlog = indexing.backlog(kb.store.queue)
    assert backlog is not None and (backlog.queue.items, backlog.workers) == (QUEUED, 0)
    seen, on_progress = _progress()

    done = indexing.finish(kb.store.queue, kb.drain, on_progress)

    assert (done.report.done, done.report.failed, done.left.items) == (QUEUED, 0, 0)
    assert seen[-1] == (QUEUED, 0) and len(seen) >= QUEUED
    assert indexing.backlog(kb.store.queue) is None


def test_running_workers_are_watched_not_competed_with(kb: Kb) -> None:
    Container.sync(kb)
    # A worker that looks alive: the wait leaves the queue to the workers.
    kb.store.queue.beat(WorkerBeat("elsewhere", "laptop", 1, 1, 0, 60.0))
    backlog = indexing.backlog(kb.store.queue)
    assert backlog is not None and backlog.workers == 1
    worker = kb.worker(until_empty=True)
    running = threading.Thread(target=worker.run, name="test-worker", daemon=True)
    running.start()
    seen, on_progress = _progress()

    done = indexing.finish(kb.store.queue, kb.drain, on_progress)
    running.join(60)

    assert done.report.done == 0 and done.left.items == 0, "every note enriched by the worker"
    assert seen and all(enriched_here == 0 for enriched_here, _ in seen)
