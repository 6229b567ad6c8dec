"""When the daemon acts, as data: readings of a clock in, the actions due out.

The daemon (kb.daemon.daemon) reads its clock and asks what is due: a heartbeat (which also
checks the writer lock), a reconciliation at the interval, a look at folders it could not
read, a pause after an error. Nothing here reads a clock, sleeps or draws a random number:
the interval's jitter is a number the driver draws, so a test steps time by numbers and
sees every decision.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from kb.config import DaemonConfig

Action = Literal["beat", "reconcile"]

# Back-off after an error the worker cannot fix itself (a dead LLM server, say), seconds.
MIN_BACKOFF = 2.0
MAX_BACKOFF = 300.0
# A vault folder that cannot be read is reconciled again after this long (seconds), then
# twice as long each time, up to the reconciliation interval: a privacy prompt is answered
# within seconds, a folder made private may stay so for good.
UNREADABLE_RETRY = 5.0


@dataclass(frozen=True)
class Schedule:
    """The main thread's next heartbeat and next reconciliation, in the clock's seconds."""

    heartbeat: float
    interval: float
    jitter: float
    next_beat: float
    next_reconcile: float

    @classmethod
    def starting(cls, settings: DaemonConfig, now: float, draw: float) -> Schedule:
        """A beat at once, the first reconciliation one interval away; `draw` is uniform in
        [-1, 1] (the interval's jitter, so daemons started together spread out)."""
        interval, jitter = settings.reconcile_interval, settings.reconcile_jitter
        return cls(
            heartbeat=settings.heartbeat,
            interval=interval,
            jitter=jitter,
            next_beat=now,
            next_reconcile=now + interval * (1 + jitter * draw),
        )

    def due(self, now: float, draw: float) -> tuple[Schedule, tuple[Action, ...]]:
        """What is due at `now`, and the schedule after it: each timer runs again from now
        (a daemon that stalled beats once, not once per missed beat)."""
        actions: list[Action] = []
        after = self
        if now >= self.next_beat:
            actions.append("beat")
            after = replace(after, next_beat=now + self.heartbeat)
        if now >= self.next_reconcile:
            actions.append("reconcile")
            after = replace(after, next_reconcile=now + self.interval * (1 + self.jitter * draw))
        return after, tuple(actions)


def backoff(previous: float) -> float:
    """The pause after another failed turn of work, `previous` the pause before it (0 after
    a turn that went through)."""
    return min(max(previous * 2, MIN_BACKOFF), MAX_BACKOFF)


Folder = tuple[str, str]  # (vault, folder path: "" for the vault's root, else ending in "/")


class UnreadableFolders:
    """The folders the syncs could not read, and when to look at them again.

    The worker tells it what a sync met and when a reconciliation ended; the main thread
    asks whether a look is due. Times are the caller's clock readings.
    """

    def __init__(self, ceiling: float) -> None:
        self._ceiling = ceiling  # the longest wait between two looks
        self._lock = threading.Lock()
        self._folders: set[Folder] = set()
        self._seen: set[Folder] = set()  # met by the reconciliation running
        self._wait = UNREADABLE_RETRY
        self._look_at = math.inf

    def reconciling(self) -> None:
        """A reconciliation starts: what it meets is counted afresh."""
        with self._lock:
            self._seen = set()

    def met(self, folder: Folder) -> bool:
        """A sync could not read `folder`: True the first time (to say so once)."""
        with self._lock:
            self._seen.add(folder)
            new = folder not in self._folders
            self._folders.add(folder)
            return new

    def reconciled(self, vaults: set[str], now: float) -> list[Folder]:
        """A reconciliation of `vaults` ended: the folders it could read again (forgotten),
        and the next look planned at those it still cannot."""
        with self._lock:
            again = readable_again(self._folders, self._seen, vaults)
            self._folders.difference_update(again)
            if self._folders:
                self._plan(now)
            else:
                self._wait, self._look_at = UNREADABLE_RETRY, math.inf
            return again

    def scoped(self, now: float) -> None:
        """A sync of changed paths ended: a folder it met unreadable gets a look planned."""
        with self._lock:
            if self._folders and self._look_at == math.inf:
                self._plan(now)

    def due(self, now: float) -> bool:
        """Whether a look (a reconciliation) is due now; it is then taken."""
        with self._lock:
            if self._look_at == math.inf or now < self._look_at:
                return False
            self._look_at = math.inf
            return True

    def _plan(self, now: float) -> None:
        self._look_at = now + self._wait
        self._wait = min(self._wait * 2, self._ceiling)


def readable_again(
    unreadable: Iterable[Folder], seen: set[Folder], reconciled: set[str]
) -> list[Folder]:
    """Of the folders once unreadable, those a reconciliation of the vaults `reconciled`
    read: not `seen` unreadable again, nor under a folder (or a vault's root, "") it could
    not read, where it never looked."""

    def looked_at(vault: str, path: str) -> bool:
        return not any(
            v == vault and p != path and (p == "" or p.endswith("/")) and path.startswith(p)
            for v, p in seen
        )

    return [k for k in unreadable if k[0] in reconciled and k not in seen and looked_at(*k)]
