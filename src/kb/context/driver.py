"""Runs a context core's prompts on the chat model, through the pool.

A core (kb.context.summaries, kb.context.writers) is a generator: it yields the prompts it
needs next, all of which may run at once, and is sent their answers in the same order; its
return value is what it built. This module is the only place context building waits on the
model, as psycopg's `waiting` runs its pure protocol generators.
"""

from __future__ import annotations

from collections.abc import Generator
from concurrent.futures import Executor
from typing import TypeVar

from kb.models.base import ChatModel, Prompt

T = TypeVar("T")

# A core: yields prompts, is sent their answers, returns its result.
Asking = Generator[list[Prompt], list[str], T]


def drive(core: Asking[T], chat: ChatModel, executor: Executor) -> tuple[T, int]:
    """The core's result and how many calls it took. Every call goes through `executor`, so
    each counts against the concurrency limit; a failed call stops the core."""
    calls = 0
    try:
        asked = next(core)
        while True:
            answers = list(executor.map(chat.complete, asked))
            calls += len(asked)
            asked = core.send(answers)
    except StopIteration as done:
        return done.value, calls
    finally:
        core.close()


def without_model(core: Asking[T]) -> T:
    """The result of a core that was told not to ask (what is known, and stand-ins)."""
    try:
        asked = next(core)
    except StopIteration as done:
        return done.value
    core.close()
    raise AssertionError(f"a core told not to ask asked for {len(asked)} prompts")
