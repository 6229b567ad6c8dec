"""After a sync, the notes queued for their LLM context: what is waiting, and `kb index
--wait`'s policy of seeing them done.

The policy (`next_step`): enrich here while no worker runs; while some do, watch them
instead of competing for the same notes. Notes a worker that died still holds under its
lease are waited for until the lease runs out, then enriched here. It returns once the
queue is empty, or holds only failing notes waiting for their retry, or when stopped (the
notes in hand finished first). The face renders progress from the callback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from kb.indexing.enrich import Attempt, EnrichReport
from kb.store import QueueStatus
from kb.store.queue import Queue

# While workers do the enriching, how often the queue is looked at (seconds).
WATCH_INTERVAL = 1.0

# Told what was enriched here so far, and the queue as it is now.
Progress = Callable[[EnrichReport, QueueStatus], None]


class Drain(Protocol):
    """Enriches every queued note this process can claim, here and now, reporting each
    attempt, until none is left or `stop` is set (`Container.drain`)."""

    def __call__(
        self, on_attempt: Callable[[Attempt], None], *, stop: threading.Event
    ) -> EnrichReport: ...


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
    stopped: bool = False  # by the caller, before the queue was done


# What the wait does next: return, enrich here, watch the running workers, or wait for the
# leases of a worker that died to run out.
Step = Literal["done", "enrich", "watch", "wait"]


def next_step(left: QueueStatus, *, workers: int, claimable: int) -> Step:
    """The policy, over the queue as it is (`claimable`: the notes no lease holds and whose
    back-off is over) and the workers alive."""
    if not left.items:
        return "done"
    if workers:
        return "done" if left.items == left.failing and not left.in_progress else "watch"
    if claimable:
        return "enrich"
    # Leased, with no worker alive: a worker that died holds them until its lease runs out.
    return "wait" if left.in_progress else "done"


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
    *,
    stop: threading.Event | None = None,
) -> Enrichment:
    """See the queue of `vaults` (empty: every vault) done, here or by the running workers
    (the policy above), or until `stop` is set."""
    stop = stop or threading.Event()
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

    while not stop.is_set():
        alive = sum(1 for w in queue.workers() if w.alive and w.serves(vaults))
        step = next_step(progress(), workers=alive, claimable=queue.waiting(vaults))
        if step == "done":
            break
        if step == "enrich":
            drain(on_attempt, stop=stop)
        else:
            stop.wait(WATCH_INTERVAL)
    left = queue.status(vaults)
    report.failed = left.failing
    return Enrichment(report, left, stopped=stop.is_set())
