"""A worker draining the queues of the later speeds: `kb worker`, the daemon's background
work, and `kb index --wait`.

`concurrency` slot threads each claim work (newest notes first, never one another worker
holds) and claim again when it is done: a few notes waiting for their vectors
(`kb.indexing.vectorize`) while any wait, else one note waiting for its LLM context
(`kb.indexing.enrich`), so a note is found by its meaning before any note's context is
written. The thread that called `run` renews the leases of the notes in hand and records the
worker's heartbeat, so a note is taken by another worker only when this one died or lost the
database. At each heartbeat it asks again which vaults it claims notes of: on a shared index,
never a name another configuration holds for another folder (`kb.vault.sync_plan.own_vaults`).

Stopping (the stop event, SIGTERM/SIGINT in `kb worker`) lets each slot finish the note in
hand. A failed attempt gives the note back with its error and a back-off that grows with
its attempts; the slot pauses too, so a dead model server is not hammered with every note.
With `fail_fast` (an interactive `kb index --wait`), an error that would stop every note
alike (a model server gone, the database gone) stops the worker and is raised by `run`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence

import psycopg

from kb.db import first_line
from kb.errors import KbError
from kb.indexing.enrich import Attempt, Enricher, EnrichReport
from kb.indexing.vectorize import Vectorizer
from kb.logfmt import event
from kb.store import Claim, Queue, WorkerBeat
from kb.store.queue import SPEEDS, Speed
from kb.store.workers import Workers
from kb.vault.sync_plan import VaultFilter

log = logging.getLogger("kb.worker")

# How often the run thread looks around (seconds); an idle slot polls the queue this often.
TICK = 0.25
IDLE_POLL = 1.0
HEARTBEAT = 5.0
# Back-off after a failed attempt: the note's grows with its attempts, the slot's with its
# failures in a row.
MIN_BACKOFF = 2.0
MAX_NOTE_BACKOFF = 600.0
MAX_SLOT_BACKOFF = 60.0


class Worker:
    def __init__(
        self,
        enricher: Enricher,
        vectorizer: Vectorizer,
        queue: Queue,
        workers: Workers,
        *,
        concurrency: int,
        lease: float,
        stop: threading.Event | None = None,
        until_empty: bool = False,
        fail_fast: bool = False,
        on_attempt: Callable[[Attempt], None] | None = None,
        heartbeat: float = HEARTBEAT,
        vaults: Callable[[], VaultFilter] | None = None,
        speeds: Sequence[Speed] = SPEEDS,
    ) -> None:
        self.enricher = enricher
        self.vectorizer = vectorizer
        # The queues it drains, in this order.
        self.speeds = tuple(s for s in SPEEDS if s in speeds)
        # The vaults whose notes it claims (None: any), asked at its start and at each
        # heartbeat of `vaults` (not given: any vault): another configuration's notes on a
        # shared index are that configuration's workers' to build, and which those are may
        # change while it runs (`kb forget`). None is claimed until they are known.
        self.claimable = vaults
        self.vaults: VaultFilter = None if vaults is None else ()
        self._told_none = False  # that it has no vault to claim notes of, said once
        self.queue = queue
        self.workers = workers  # where its heartbeat goes
        self.concurrency = concurrency
        self.lease = lease
        self.stop_event = stop or threading.Event()
        self.until_empty = until_empty
        self.fail_fast = fail_fast
        self.on_attempt = on_attempt or (lambda attempt: None)
        self.heartbeat = heartbeat
        self.host = socket.gethostname()
        # The pid alone is not unique: a daemon and a test may run several in one process.
        self.id = f"{self.host}:{os.getpid()}:{secrets.token_hex(3)}"
        self.last_error: str | None = None
        # Set when run() ends for any reason; the stop event may be the caller's (a daemon's).
        self._halt = threading.Event()
        self._in_hand: dict[tuple[Speed, int], Claim] = {}
        self._lock = threading.Lock()
        self._fatal: BaseException | None = None
        self._slots: list[threading.Thread] = []

    def stop(self) -> None:
        """Finish the notes in hand, then return from run()."""
        self.stop_event.set()

    def _stopping(self) -> bool:
        return self.stop_event.is_set() or self._halt.is_set()

    def _pause(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._stopping() and (left := end - time.monotonic()) > 0:
            self._halt.wait(min(TICK, left))

    @property
    def busy(self) -> bool:
        """Whether a slot still has a note in hand (after run() returned: abandoned)."""
        return any(slot.is_alive() for slot in self._slots)

    def run(self) -> None:
        """Drain the queues until stopped (or, with until_empty, until nothing is left to
        claim)."""
        self._follow_vaults()
        self._start_slots()
        next_beat = next_renewal = 0.0
        try:
            while any(slot.is_alive() for slot in self._slots) or self._more():
                if not any(slot.is_alive() for slot in self._slots):
                    self._start_slots()
                now = time.monotonic()
                if now >= next_renewal:
                    self._renew()
                    next_renewal = now + self.lease / 3
                if now >= next_beat:
                    self._follow_vaults()
                    self._beat()
                    next_beat = now + self.heartbeat
                for slot in self._slots:
                    slot.join(TICK / len(self._slots))
        finally:
            self._halt.set()
            for slot in self._slots:
                slot.join()
            self._leave()
            self.vectorizer.close()
        if self._fatal is not None:
            raise self._fatal

    # -- the slots ---------------------------------------------------------------------------------

    def _start_slots(self) -> None:
        self._slots = [
            threading.Thread(target=self._slot, args=(self.speeds,), name=f"kb-work-{i}")
            for i in range(self.concurrency)
        ]
        if "embed" in self.speeds:
            # One more, for vectors only: the embedding server is sent the next notes' texts
            # while a slot reads or writes rows, and is never left waiting on a note's
            # LLM context.
            self._slots.append(
                threading.Thread(target=self._slot, args=(("embed",),), name="kb-vectors")
            )
        for slot in self._slots:
            slot.daemon = True
            slot.start()

    def _more(self) -> bool:
        """Whether slots that stopped, run until empty, left work to claim: a slot stops when
        it finds none while another's notes, embedded since, are then to be enriched."""
        if not self.until_empty or self._stopping() or self._fatal is not None:
            return False
        try:
            return any(self.queue.waiting(self.vaults, s) for s in self.speeds)
        except psycopg.Error:
            return False

    def _slot(self, speeds: Sequence[Speed]) -> None:
        failures = 0
        while not self._stopping():
            try:
                claims = self._claim(speeds)
            except (KbError, psycopg.Error) as exc:
                failures += 1
                self._failed([], exc, failures)
                continue
            if not claims:
                if self.until_empty:
                    return
                self._pause(IDLE_POLL)
                continue
            held = [(c.speed, c.document_id) for c in claims]
            with self._lock:
                self._in_hand.update(zip(held, claims, strict=True))
            try:
                if claims[0].speed == "embed":
                    attempts = self.vectorizer.vectorize(claims, self.id)
                else:
                    attempts = [self.enricher.enrich(claim, self.id) for claim in claims]
            except Exception as exc:
                failures += 1
                self._failed(claims, exc, failures)
            else:
                failures = 0
                self.last_error = None
                for attempt in attempts:
                    self._report(attempt)
            finally:
                with self._lock:
                    for key in held:
                        self._in_hand.pop(key, None)

    def _claim(self, speeds: Sequence[Speed]) -> list[Claim]:
        """The next work: a few notes waiting for their vectors, else one for its context."""
        for speed in speeds:
            limit = self.vectorizer.notes if speed == "embed" else 1
            claims = self.queue.claim(
                self.id, lease=self.lease, limit=limit, vaults=self.vaults, speed=speed
            )
            if claims:
                return claims
        return []

    def _failed(self, claims: Sequence[Claim], exc: Exception, failures: int) -> None:
        error = (
            first_line(exc)
            if isinstance(exc, KbError)
            else f"{type(exc).__name__}: {first_line(exc)}"
        )
        self.last_error = error
        for claim in claims:
            retry_in = min(MIN_BACKOFF * 2 ** (claim.attempts - 1), MAX_NOTE_BACKOFF)
            # With the database gone, the lease runs out and the note is claimed again.
            with contextlib.suppress(psycopg.Error):
                self.queue.release(claim, self.id, error=error, retry_in=retry_in)
            self._report(
                Attempt(claim.document_id, "", "", "failed", error=error, speed=claim.speed)
            )
        # A note's own failure (a bug it triggers) is its alone; a model server or the
        # database failing would fail every note alike.
        if self.fail_fast and isinstance(exc, KbError | psycopg.Error):
            self._fatal = exc
            self._halt.set()
            return
        pause = min(MIN_BACKOFF * 2 ** (failures - 1), MAX_SLOT_BACKOFF)
        event(log, "enrichment failed: retrying", logging.ERROR, error=error, retry_in=pause)
        self._pause(pause)

    def _report(self, attempt: Attempt) -> None:
        if attempt.outcome == "done" and attempt.speed == "embed":
            event(
                log,
                "embedded",
                document=attempt.document_id,
                embedded=attempt.embedded,
                seconds=round(attempt.seconds, 3),
            )
        elif attempt.outcome == "done":
            event(
                log,
                "enriched",
                vault=attempt.vault,
                path=attempt.path,
                llm_calls=attempt.llm_calls,
                embedded=attempt.embedded,
                seconds=round(attempt.seconds, 3),
            )
        self.on_attempt(attempt)

    # -- the run thread ----------------------------------------------------------------------------

    def _renew(self) -> None:
        with self._lock:
            held = list(self._in_hand)
        try:
            for speed in self.speeds:
                ids = [doc for s, doc in held if s == speed]
                self.queue.renew(self.id, ids, lease=self.lease, speed=speed)
        except psycopg.Error as exc:
            event(log, "cannot renew leases", logging.WARNING, error=first_line(exc))

    def _follow_vaults(self) -> None:
        """Ask again which vaults it claims notes of; say once, in one line, when none."""
        if self.claimable is None:
            return
        try:
            vaults = self.claimable()
        except psycopg.Error as exc:
            # The claims fail too meanwhile; the vaults asked last are kept.
            event(log, "cannot read the vaults to claim", logging.WARNING, error=first_line(exc))
            return
        if vaults == () and not self._told_none:
            event(
                log,
                "no vault to claim notes of: each of this config's names is another"
                " configuration's vault at another folder (`kb index` says which)",
                logging.WARNING,
            )
        self._told_none = vaults == ()
        self.vaults = vaults

    def _beat(self) -> None:
        with self._lock:
            in_hand = len(self._in_hand)
        try:
            self.queue.prune()
            if self.vaults == ():
                # A heartbeat's empty list would say every vault: one claiming none is no
                # worker of any vault.
                self.workers.leave(self.id)
                return
            self.workers.beat(
                WorkerBeat(
                    id=self.id,
                    host=self.host,
                    pid=os.getpid(),
                    concurrency=self.concurrency,
                    in_hand=in_hand,
                    heartbeat_interval=self.heartbeat,
                    last_error=self.last_error,
                    # A heartbeat's empty list is every vault.
                    vaults=() if self.vaults is None else self.vaults,
                )
            )
        except psycopg.Error as exc:
            event(log, "cannot record the heartbeat", logging.WARNING, error=first_line(exc))

    def _leave(self) -> None:
        # With the database gone, the row goes stale and another worker's heartbeat drops it.
        with contextlib.suppress(psycopg.Error):
            self.workers.leave(self.id)


def drained(
    worker: Callable[[Callable[[Attempt], None]], Worker],
    on_attempt: Callable[[Attempt], None] | None = None,
) -> EnrichReport:
    """Run the worker `worker` builds around an attempt hook to its end, and add up what
    each attempt did; `on_attempt` sees each one too."""
    report = EnrichReport()
    adding = threading.Lock()  # slots report from their own threads

    def attempted(attempt: Attempt) -> None:
        with adding:
            report.add(attempt)
        if on_attempt is not None:
            on_attempt(attempt)

    worker(attempted).run()
    return report
