"""Running a daemon in a test, and waiting on conditions rather than sleeping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kb.daemon.daemon import Daemon
from kb.indexing.verify import VerifyReport, verify
from kb.store import Reconciliation, Store
from support.configs import make_config
from support.fake_kb import Kb

# Short enough for quick tests, long enough for a loaded machine to finish a save.
FAST = {
    "debounce": 0.3,
    "max_delay": 3.0,
    "heartbeat": 0.5,
    "shutdown_grace": 10.0,
}
TIMEOUT = 120.0


class SteppedClock:
    """A daemon's clock (seconds) that moves only when the test steps it: its timers fall
    due when the test says, however long the wall's clock takes."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


def wait_for(
    condition: Callable[[], Any], what: str, timeout: float = TIMEOUT, every: float = 0.1
) -> Any:
    """Poll until `condition()` is truthy; fail with `what` after `timeout` seconds."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def daemon_kb(
    store: Store,
    vault: Path,
    llm: dict[str, Any] | None = None,
    enrich: dict[str, Any] | None = None,
    **daemon: Any,
) -> Kb:
    return Kb(
        store, make_config(vault, daemon={**FAST, **daemon}, llm=llm or {}, enrich=enrich or {})
    )


@contextmanager
def running(kb: Kb, **kwargs: Any) -> Iterator[Daemon]:
    """A daemon on its own thread, past its start-up reconciliation; stopped afterwards."""
    daemon = kb.daemon(**kwargs)
    thread = threading.Thread(target=daemon.run, name="test-daemon", daemon=True)
    thread.start()
    try:
        wait_for(
            lambda: daemon.role == "writer" and daemon.idle and enriched(daemon, kb),
            "the start-up reconciliation and enrichment",
        )
        yield daemon
    finally:
        daemon.stop()
        thread.join(30)
        assert not thread.is_alive(), "the daemon did not stop within 30 s"


def enriched(daemon: Daemon, kb: Kb) -> bool:
    """No note waits for its vectors, nor for its LLM context when the daemon writes it
    (none is in a worker's hands either)."""
    return all(kb.store.queue.status(speed=s).items == 0 for s in daemon.enrichment.speeds)


def settle(
    daemon: Daemon, kb: Kb, timeout: float = TIMEOUT, clock: SteppedClock | None = None
) -> VerifyReport:
    """Wait until the index equals the vault, every note has its LLM context, and the
    daemon has nothing left to do. On a stepped `clock`, each look first steps it by the
    quiet period, so a change the watcher records late falls due too."""
    last: list[VerifyReport] = []

    def synced() -> bool:
        if clock is not None:
            clock.step(daemon.settings.debounce)
        if not daemon.idle:
            return False
        last[:] = [verify(kb.config, kb.store.documents)]
        return last[0].in_sync and daemon.idle and enriched(daemon, kb)

    try:
        wait_for(synced, "the index to equal the vault", timeout, every=0.2)
    except AssertionError as exc:
        diffs = last[0].differences[:20] if last else "never idle"
        raise AssertionError(f"{exc}: {diffs}") from None
    return last[0]


def reconcile_now(daemon: Daemon, kb: Kb) -> Reconciliation:
    """Ask for a reconciliation and wait for it to finish; returns its record."""
    before = kb.store.state.last_reconcile()
    daemon.request_reconcile("test")
    wait_for(
        lambda: kb.store.state.last_reconcile() != before and daemon.idle,
        "a reconciliation",
    )
    record = kb.store.state.last_reconcile()
    assert record is not None
    return record


def no_calls(kb: Kb) -> bool:
    return kb.chat.total_calls == 0 and kb.embedder.calls == 0
