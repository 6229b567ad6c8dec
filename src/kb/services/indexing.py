"""After a sync, the notes queued for their LLM context: what is waiting, and `kb index
--wait`'s policy of seeing them done.

The policy: enrich here while no worker runs; while some do, watch them instead of
competing for the same notes. It returns once the queue is empty, or holds only notes that
cannot be enriched now (failing ones waiting for their retry, ones leased by a worker that
died). The face renders progress from the callback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kb.indexing.enrich import Attempt, EnrichReport
from kb.store import QueueStatus
from kb.store.queue import Queue

# While workers do the enriching, how often the queue is looked at (seconds).
WATCH_INTERVAL = 1.0

# Told what was enriched here so far, and the queue as it is now.
Progress = Callable[[EnrichReport, QueueStatus], None]


class Drain(Protocol):
    """Enriches every queued note this process can claim, here and now, reporting each
    attempt (`Container.drain`)."""

    def __call__(self, on_attempt: Callable[[Attempt], None]) -> EnrichReport: ...


@dataclass(frozen=True)
class Backlog:
    """The notes waiting for their LLM context, and how many workers are on them."""

    queue: QueueStatus
    workers: int  # alive now


@dataclass(frozen=True)
class Enrichment:
    """What waiting for the queue did: the notes enriched here, and the queue it left."""

    report: EnrichReport  # its `failed`: the notes still failing in the queue
    left: QueueStatus


def backlog(queue: Queue, vaults: Sequence[str] = ()) -> Backlog | None:
    """The backlog of `vaults` (empty: every vault), or None when no note is waiting."""
    status = queue.status(vaults)
    if not status.items:
        return None
    return Backlog(status, sum(1 for w in queue.workers() if w.alive and w.serves(vaults)))


def finish(
    queue: Queue,
    drain: Drain,
    on_progress: Progress,
    vaults: Sequence[str] = (),
) -> Enrichment:
    """See the queue of `vaults` (empty: every vault) done, here or by the running workers
    (the policy above)."""
    report = EnrichReport()
    adding = threading.Lock()  # the drain's slots report from their own threads

    def progress() -> QueueStatus:
        left = queue.status(vaults)
        on_progress(report, left)
        return left

    def on_attempt(attempt: Attempt) -> None:
        with adding:
            report.add(attempt)
        progress()

    while True:
        if any(w.alive and w.serves(vaults) for w in queue.workers()):
            left = progress()
            if not left.items or (left.items == left.failing and not left.in_progress):
                break
            time.sleep(WATCH_INTERVAL)
            continue
        drain(on_attempt)
        if not progress().items or not queue.waiting(vaults):
            break
    left = queue.status(vaults)
    report.failed = left.failing
    return Enrichment(report, left)
