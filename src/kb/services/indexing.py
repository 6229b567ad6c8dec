"""After a sync, the notes queued for their vectors and their LLM context: what is waiting,
and `kb index --wait`'s policy of seeing them done.

The policy (`next_step`): embed and enrich here while no worker runs; while some do, watch
them instead of competing for the same notes. Notes a worker that died still holds under its
lease are waited for until the lease runs out, then done here. It returns once both queues
are empty, or hold only failing notes waiting for their retry, or when stopped (the notes
in hand finished first). The face renders progress from the callback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from kb.indexing.enrich import Attempt, EnrichReport
from kb.store import QueueStatus
from kb.store.queue import SPEEDS, Queue
from kb.store.workers import Workers
from kb.vault.sync_plan import VaultFilter

# While workers do the work, how often the queues are looked at (seconds).
WATCH_INTERVAL = 1.0
# While the work is done here, at most this often (seconds): a claim of the embedding queue
# finishes many notes at once.
PROGRESS_INTERVAL = 0.2


@dataclass(frozen=True)
class Queues:
    """The queues of the later speeds, as they are now: the notes waiting for their vectors,
    and those waiting for their LLM context."""

    vectors: QueueStatus
    context: QueueStatus

    @property
    def items(self) -> int:
        return self.vectors.items + self.context.items

    @property
    def in_progress(self) -> int:
        return self.vectors.in_progress + self.context.in_progress

    @property
    def failing(self) -> int:
        return self.vectors.failing + self.context.failing

    @property
    def eta_seconds(self) -> float | None:
        """Until both are done, when both have a rate (or nothing waits in one)."""
        parts = [q.eta_seconds if q.items else 0.0 for q in (self.vectors, self.context)]
        return None if None in parts else sum(p for p in parts if p is not None) or None


def queues(queue: Queue, vaults: VaultFilter = None) -> Queues:
    """The queues of `vaults` (None: every vault)."""
    return Queues(queue.status(vaults, "embed"), queue.status(vaults, "enrich"))


# Told what was done here so far, and the queues as they are now.
Progress = Callable[[EnrichReport, Queues], None]


class Drain(Protocol):
    """Embeds and enriches every queued note this process can claim, here and now,
    reporting each attempt, until none is left or `stop` is set (`Container.drain`)."""

    def __call__(
        self, on_attempt: Callable[[Attempt], None], *, stop: threading.Event
    ) -> EnrichReport: ...


@dataclass(frozen=True)
class Backlog:
    """The notes waiting for their vectors or their LLM context, and how many workers are
    on them."""

    queues: Queues
    workers: int  # alive now


@dataclass(frozen=True)
class Enrichment:
    """What waiting for the queues did: the notes done here, and the queues it left."""

    report: EnrichReport  # its `failed`: the notes still failing in the queues
    left: Queues
    stopped: bool = False  # by the caller, before the queues were done


# What the wait does next: return, work here, watch the running workers, or wait for the
# leases of a worker that died to run out.
Step = Literal["done", "enrich", "watch", "wait"]


def next_step(left: Queues, *, workers: int, claimable: int) -> Step:
    """The policy, over the queues as they are (`claimable`: the notes no lease holds and
    whose back-off is over) and the workers alive."""
    if not left.items:
        return "done"
    if workers:
        return "done" if left.items == left.failing and not left.in_progress else "watch"
    if claimable:
        return "enrich"
    # Leased, with no worker alive: a worker that died holds them until its lease runs out.
    return "wait" if left.in_progress else "done"


def backlog(queue: Queue, workers: Workers, vaults: VaultFilter = None) -> Backlog | None:
    """The backlog of `vaults` (None: every vault), or None when no note is waiting."""
    left = queues(queue, vaults)
    if not left.items:
        return None
    return Backlog(left, _alive(workers, vaults))


def _alive(workers: Workers, vaults: VaultFilter) -> int:
    """The workers alive that claim notes of `vaults`."""
    return sum(1 for w in workers.listed() if w.alive and w.serves(vaults))


def finish(
    queue: Queue,
    workers: Workers,
    drain: Drain,
    on_progress: Progress,
    vaults: VaultFilter = None,
    *,
    stop: threading.Event | None = None,
) -> Enrichment:
    """See the queues of `vaults` (None: every vault) done, here or by the running workers
    (the policy above), or until `stop` is set."""
    stop = stop or threading.Event()
    report = EnrichReport()
    adding = threading.Lock()  # the drain's slots report from their own threads
    shown = [0.0]

    def progress() -> Queues:
        left = queues(queue, vaults)
        on_progress(report, left)
        shown[0] = time.monotonic()
        return left

    def on_attempt(attempt: Attempt) -> None:
        with adding:
            report.add(attempt)
            due = time.monotonic() - shown[0] >= PROGRESS_INTERVAL
        if due:
            progress()

    while not stop.is_set():
        alive = _alive(workers, vaults)
        claimable = sum(queue.waiting(vaults, speed) for speed in SPEEDS)
        step = next_step(progress(), workers=alive, claimable=claimable)
        if step == "done":
            break
        if step == "enrich":
            drain(on_attempt, stop=stop)
        else:
            stop.wait(WATCH_INTERVAL)
    left = queues(queue, vaults)
    report.failed = left.failing
    return Enrichment(report, left, stopped=stop.is_set())
