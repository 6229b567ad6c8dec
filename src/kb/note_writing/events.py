"""What a sync reports: each file's event, as progress displays and the daemon's log take
them, and the run's totals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

# "unlistable": a folder that could not be read; the notes stored under it are kept.
Action = Literal["indexed", "unchanged", "moved", "deleted", "failed", "unlistable"]


@dataclass(frozen=True)
class FileEvent:
    """What happened to one file during a sync; fed to progress displays."""

    vault: str
    path: str
    action: Action
    chunks: int = 0
    llm_calls: int = 0
    embedded: int = 0
    fallbacks: int = 0  # model outputs rejected and replaced by structural context
    queued: bool = False  # stored without all of its LLM context, which workers will add
    error: str = ""
    moved_from: str = ""


# Where a sync hands each file's event as it goes (its report, and the caller's on_event).
Emit: TypeAlias = Callable[[FileEvent], None]


@dataclass
class SyncReport:
    files: int = 0
    indexed: int = 0
    unchanged: int = 0
    moved: int = 0
    deleted: int = 0
    failed: int = 0
    chunks: int = 0
    llm_calls: int = 0
    embedded: int = 0
    fallbacks: int = 0
    queued: int = 0
    unlistable: int = 0
    failures: list[FileEvent] = field(default_factory=list)
    unlisted: list[FileEvent] = field(default_factory=list)

    def add(self, event: FileEvent) -> None:
        if event.action not in ("deleted", "unlistable"):
            self.files += 1
        setattr(self, event.action, getattr(self, event.action) + 1)
        self.chunks += event.chunks
        self.llm_calls += event.llm_calls
        self.embedded += event.embedded
        self.fallbacks += event.fallbacks
        self.queued += event.queued
        if event.action == "failed":
            self.failures.append(event)
        elif event.action == "unlistable":
            self.unlisted.append(event)
