"""The watcher's parts on their own: the recorder, the debouncer, the overflow alarm, logfmt."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
    FileSystemEvent,
)

from kb.config import ConflictMode, VaultConfig
from kb.daemon.watcher import OVERFLOW_LOGGER, Debouncer, Due, OverflowAlarm, Recorder
from kb.logfmt import LogfmtFormatter

ROOT = Path("/vault")


def _recorded(*events: FileSystemEvent, conflicts: ConflictMode = "ignore") -> list[str]:
    seen: list[str] = []
    vault = VaultConfig("v", ROOT, ignore=("Templates/**",), conflicts=conflicts)
    recorder = Recorder(vault, lambda name, *keys: seen.extend(keys))
    for e in events:
        recorder.dispatch(e)
    return seen


@pytest.mark.parametrize(
    ("event", "keys"),
    [
        (FileModifiedEvent("/vault/a.md"), ["a.md"]),
        (FileClosedEvent("/vault/a.md"), ["a.md"]),
        (FileCreatedEvent("/vault/Sub/B.Markdown"), ["Sub/B.Markdown"]),
        (FileDeletedEvent("/vault/a.md"), ["a.md"]),
        (FileMovedEvent("/vault/.a.md.tmp", "/vault/a.md"), ["a.md"]),  # atomic save
        (FileMovedEvent("/vault/a.md", "/vault/a.md~"), ["a.md"]),  # vim's backup
        (FileMovedEvent("/vault/a.md", "/elsewhere/a.md"), ["a.md"]),  # moved out
        (FileMovedEvent("/vault/a.md", "/vault/.trash/a.md"), ["a.md"]),
        (DirMovedEvent("/vault/A", "/vault/B"), ["A/", "B/"]),
        (DirDeletedEvent("/vault/A/B"), ["A/B/"]),
        (DirCreatedEvent("/vault/New"), ["New/"]),
        (DirCreatedEvent("/vault/.git/objects"), []),
        (DirCreatedEvent("/vault/Templates"), []),
        (DirModifiedEvent("/vault/A"), []),  # its files have their own events
        (DirDeletedEvent("/vault"), []),  # the root: the watcher's identity check deals
        (FileOpenedEvent("/vault/a.md"), []),  # our own reads
        (FileClosedNoWriteEvent("/vault/a.md"), []),
        (FileAttribEvent("/vault/a.md"), []),  # touch
        (FileCreatedEvent("/vault/4913"), []),
        (FileCreatedEvent("/vault/.a.md.swp"), []),
        (FileCreatedEvent("/vault/.syncthing.a.md.tmp"), []),
        (FileCreatedEvent("/vault/a.sync-conflict-20240101-101010-ABCDEFG.md"), []),
        (FileCreatedEvent("/vault/Board.canvas"), []),
        (FileCreatedEvent("/vault/image.png"), []),
        (FileCreatedEvent("/vault/Templates/t.md"), []),
        (FileCreatedEvent("/vaultish/a.md"), []),  # a sibling folder sharing the prefix
        # The Obsidian settings kb follows: a change reconciles the vault.
        (FileModifiedEvent("/vault/.obsidian/daily-notes.json"), [".obsidian/daily-notes.json"]),
        (
            FileMovedEvent("/vault/.obsidian/app.json.tmp", "/vault/.obsidian/app.json"),
            [".obsidian/app.json"],
        ),
        (FileModifiedEvent("/vault/.obsidian/workspace.json"), []),
    ],
)
def test_recorder_keys(event: FileSystemEvent, keys: list[str]) -> None:
    assert _recorded(event) == keys


def test_names_that_are_not_utf8_are_recorded_to_be_listed_as_failed() -> None:
    assert _recorded(FileCreatedEvent(b"/vault/caf\xe9.md")) == ["caf\udce9.md"]


def test_conflict_copies_recorded_when_configured() -> None:
    event = FileCreatedEvent("/vault/a.sync-conflict-20240101-101010-ABCDEFG.md")
    assert _recorded(event, conflicts="index") == ["a.sync-conflict-20240101-101010-ABCDEFG.md"]


def test_recorder_never_raises() -> None:
    def broken(vault: str, *keys: str) -> None:
        raise RuntimeError("sink failed")

    recorder = Recorder(VaultConfig("v", ROOT), broken)
    recorder.dispatch(FileModifiedEvent("/vault/a.md"))
    recorder.dispatch(FileModifiedEvent(b"/vault/\xff.md"))  # undecodable bytes


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _debouncer(clock: Clock, overflows: list[int], max_pending: int = 100) -> Debouncer:
    return Debouncer(
        quiet=1.0,
        max_delay=5.0,
        max_pending=max_pending,
        on_overflow=lambda: overflows.append(1),
        clock=clock,
    )


def test_debouncer_waits_for_quiet() -> None:
    clock = Clock()
    d = _debouncer(clock, [])
    d.add("v", "a.md")
    clock.now = 0.5
    d.add("v", "a.md")
    clock.now = 1.2
    assert d.take_due(0) == []
    clock.now = 1.5
    assert d.take_due(0) == [Due("v", "a.md", settled=True)]
    assert len(d) == 1  # in hand until done()
    d.done()
    assert len(d) == 0


def test_a_wait_for_due_paths_is_bounded_on_the_walls_clock() -> None:
    """What is due reads the debouncer's clock; how long take_due waits reads the wall's: on
    a clock that stands still (a test's), it still answers within its timeout."""
    clock = Clock()
    d = _debouncer(clock, [])
    d.add("v", "a.md")
    answers: list[list[Due]] = []
    waiting = threading.Thread(target=lambda: answers.append(d.take_due(0.2)), daemon=True)
    waiting.start()
    waiting.join(10)
    assert answers == [[]], "take_due waited past its timeout for a clock that never moved"
    clock.now = 1.0
    assert d.take_due(0.2) == [Due("v", "a.md", settled=True)]


def test_the_two_ends_of_a_move_fall_due_together() -> None:
    class Ticking(Clock):
        def __call__(self) -> float:
            self.now += 0.01  # every reading is later than the last
            return self.now

    clock = Ticking()
    d = _debouncer(clock, [])
    d.add("v", "old.md", "new.md")
    # Woken exactly when the first end is due: the second must be due too.
    clock.now = 1.0
    assert d.take_due(0) == [Due("v", "old.md", True), Due("v", "new.md", True)]


def test_recorder_passes_a_move_as_one_change() -> None:
    seen: list[tuple[str, ...]] = []
    recorder = Recorder(VaultConfig("v", ROOT), lambda name, *keys: seen.append(keys))
    recorder.dispatch(FileMovedEvent("/vault/a.md", "/vault/Sub/b.md"))
    assert seen == [("a.md", "Sub/b.md")]


def test_debouncer_caps_the_delay_of_a_busy_path() -> None:
    clock = Clock()
    d = _debouncer(clock, [])
    while clock.now < 5.0:
        d.add("v", "busy.md")
        assert d.take_due(0) == []
        clock.now += 0.5
    d.add("v", "busy.md")
    assert d.take_due(0) == [Due("v", "busy.md", settled=False)]


def test_pending_folder_stands_for_everything_under_it() -> None:
    clock = Clock()
    d = _debouncer(clock, [])
    d.add("v", "A/x.md")
    d.add("v", "A/B/y.md")
    d.add("v", "C/z.md")
    clock.now = 0.5
    d.add("v", "A/")
    d.add("v", "A/B/w.md")  # covered: extends the folder's quiet period
    d.add("other", "A/q.md")  # another vault
    assert len(d) == 4 - 2 + 1
    clock.now = 1.2
    assert d.take_due(0) == [Due("v", "C/z.md", settled=True)]
    clock.now = 2.0
    assert sorted(x.key for x in d.take_due(0)) == ["A/", "A/q.md"]


def test_debouncer_is_bounded_and_asks_for_a_reconciliation() -> None:
    clock = Clock()
    overflows: list[int] = []
    d = _debouncer(clock, overflows, max_pending=10)
    for i in range(25):
        d.add("v", f"n{i}.md")
    assert overflows == [1, 1]
    assert len(d) <= 10


def test_overflow_alarm_catches_watchdogs_warning() -> None:
    calls: list[int] = []
    alarm = OverflowAlarm(lambda: calls.append(1))
    logger = logging.getLogger(OVERFLOW_LOGGER)
    with alarm.installed():
        logger.warning("Inotify queue overflowed; filesystem events were lost")
        logger.warning("something else")
    logger.warning("Inotify queue overflowed; after removal")
    assert calls == [1]


def test_logfmt_lines() -> None:
    record = logging.LogRecord("kb.daemon", logging.INFO, __file__, 1, "indexed", (), None)
    record.fields = {"path": 'Notes/a "b".md', "chunks": 3, "seconds": 0.25, "empty": ""}
    line = LogfmtFormatter().format(record)
    assert line.startswith("ts=") and line.endswith(
        'level=info src=kb.daemon msg=indexed path="Notes/a \\"b\\".md" chunks=3'
        ' seconds=0.25 empty=""'
    )
    assert "\n" not in LogfmtFormatter().format(
        logging.LogRecord("x", logging.ERROR, __file__, 1, "two\nlines", (), None)
    )
