"""The daemon's timing and its decisions as data: clock readings in, actions out; no test
here waits on a clock."""

from __future__ import annotations

import math

from kb.config import DaemonConfig
from kb.daemon.schedule import (
    MAX_BACKOFF,
    MIN_BACKOFF,
    UNREADABLE_RETRY,
    Schedule,
    UnreadableFolders,
    backoff,
    readable_again,
)
from kb.daemon.watcher import Due
from kb.daemon.writer import Reconciliations, sort_due

SETTINGS = DaemonConfig(heartbeat=5.0, reconcile_interval=100.0, reconcile_jitter=0.1)


def test_a_beat_at_once_then_every_heartbeat() -> None:
    schedule = Schedule.starting(SETTINGS, now=1000.0, draw=0.0)
    schedule, due = schedule.due(1000.0, draw=0.0)
    assert due == ("beat",)
    schedule, due = schedule.due(1004.9, draw=0.0)
    assert due == ()
    schedule, due = schedule.due(1005.0, draw=0.0)
    assert due == ("beat",)
    assert schedule.next_beat == 1010.0


def test_a_stalled_daemon_beats_once_and_runs_on_from_then() -> None:
    schedule = Schedule.starting(SETTINGS, now=0.0, draw=0.0)
    schedule, _ = schedule.due(0.0, draw=0.0)
    schedule, due = schedule.due(42.0, draw=0.0)  # eight beats late
    assert due == ("beat",)
    assert schedule.due(43.0, draw=0.0)[1] == ()
    assert schedule.due(47.0, draw=0.0)[1] == ("beat",)


def test_reconciliations_at_the_interval_with_its_jitter() -> None:
    # The drawn jitter stretches or shrinks each interval by up to reconcile_jitter.
    schedule = Schedule.starting(SETTINGS, now=0.0, draw=-1.0)
    assert schedule.next_reconcile == 90.0
    schedule, due = schedule.due(89.0, draw=1.0)
    assert "reconcile" not in due
    schedule, due = schedule.due(90.0, draw=1.0)
    assert due == ("reconcile",)  # the beat was at 89
    assert schedule.next_reconcile == 90.0 + 110.0
    no_jitter = DaemonConfig(reconcile_interval=100.0, reconcile_jitter=0.0)
    assert Schedule.starting(no_jitter, now=0.0, draw=1.0).next_reconcile == 100.0


def test_the_pause_after_errors_doubles_up_to_its_ceiling() -> None:
    pauses = [backoff(0.0)]
    for _ in range(12):
        pauses.append(backoff(pauses[-1]))
    assert pauses[:4] == [MIN_BACKOFF, 2 * MIN_BACKOFF, 4 * MIN_BACKOFF, 8 * MIN_BACKOFF]
    assert pauses[-1] == MAX_BACKOFF and max(pauses) == MAX_BACKOFF


def test_an_unreadable_folder_is_looked_at_again_later_each_time() -> None:
    folders = UnreadableFolders(ceiling=30.0)
    assert not folders.due(math.inf)  # nothing unreadable: no look is ever due
    looks: list[float] = []
    now = 0.0
    for _ in range(5):
        folders.reconciling()
        assert folders.met(("v", "Private/")) == (not looks)
        assert folders.reconciled({"v"}, now) == []
        assert not folders.due(now)
        wait = 0.0
        while not folders.due(now + wait):
            wait += 1.0
        looks.append(wait)
        now += wait
    assert looks == [UNREADABLE_RETRY, 10.0, 20.0, 30.0, 30.0]
    assert not folders.due(now + 1000.0)  # taken: the next look is planned by the next sync

    # Readable again: forgotten, and the waits start over.
    folders.reconciling()
    assert folders.reconciled({"v"}, now) == [("v", "Private/")]
    assert not folders.due(math.inf)
    folders.reconciling()
    assert folders.met(("v", "Private/"))
    folders.reconciled({"v"}, now)
    assert folders.due(now + UNREADABLE_RETRY)


def test_a_folder_met_by_a_sync_of_changed_paths_gets_a_look() -> None:
    folders = UnreadableFolders(ceiling=30.0)
    folders.scoped(0.0)
    assert not folders.due(math.inf)
    folders.met(("v", "Private/"))
    folders.scoped(10.0)
    folders.scoped(12.0)  # a look already planned is kept
    assert not folders.due(14.9) and folders.due(15.0)


def test_a_folder_under_an_unreadable_one_was_not_looked_at() -> None:
    once = [("v", "Reference/"), ("v", ""), ("w", "Notes/")]
    # The vault's root could not be read: nothing under it was looked at.
    assert readable_again(once, {("v", "")}, {"v", "w"}) == [("w", "Notes/")]
    # Its root read again, the folder not: the root alone is readable again.
    assert readable_again(once, {("v", "Reference/")}, {"v"}) == [("v", "")]
    # A vault not reconciled keeps its folders.
    assert readable_again(once, set(), {"v"}) == [("v", "Reference/"), ("v", "")]


def test_due_paths_sorted_into_syncs_waits_and_settings() -> None:
    here = {"Notes/a.md", "Projects/"}
    due = [
        Due("v", "Notes/a.md", settled=True),
        Due("v", "Notes/gone.md", settled=True),  # settled and missing: a delete to sync
        Due("v", "Notes/saving.md", settled=False),  # missing mid-save: waits for quiet
        Due("v", "Projects/", settled=False),
        Due("v", ".obsidian/app.json", settled=True),
    ]
    paths = sort_due(due, here.__contains__)
    assert paths.files == {"Notes/a.md", "Notes/gone.md"}
    assert paths.folders == {"Projects/"}
    assert paths.waiting == (due[2],)
    assert paths.settings == (".obsidian/app.json",)


def test_a_reconciliation_is_pending_from_its_asking_to_its_end() -> None:
    asked = Reconciliations()
    assert not asked.pending and asked.take() == []
    asked.ask("interval")
    asked.ask("start-up")
    asked.ask("interval")
    assert asked.pending
    assert asked.take() == ["interval", "start-up"]
    assert asked.pending  # in hand
    asked.done()
    assert not asked.pending
