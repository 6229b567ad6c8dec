"""The driver: a context core's prompts run on the pool, batch by batch, answers in order."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from kb.context.driver import Asking, drive, without_model
from kb.errors import LLMError
from kb.llm.fake import FakeChat
from kb.models.base import Prompt


def _prompt(text: str) -> Prompt:
    return Prompt(task="rerank", system="", user=text, max_tokens=4, num_ctx=2048)


class Echo(FakeChat):
    """Answers each prompt with its own text, and notes the threads it ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    def complete(self, prompt: Prompt) -> str:
        self.threads.add(threading.current_thread().name)
        return prompt.user


def _two_rounds() -> Asking[list[str]]:
    first = yield [_prompt("a"), _prompt("b"), _prompt("c")]
    # The second round is made from the first's answers, in the order asked.
    second = yield [_prompt("".join(first))]
    return [*first, *second]


def test_rounds_run_on_the_pool_in_order_and_are_counted() -> None:
    chat = Echo()
    with ThreadPoolExecutor(2, thread_name_prefix="pool") as pool:
        result, calls = drive(_two_rounds(), chat, pool)
    assert result == ["a", "b", "c", "abc"] and calls == 4
    assert chat.threads and all(name.startswith("pool") for name in chat.threads)


def test_a_core_that_asks_nothing_costs_nothing() -> None:
    def known() -> Asking[str]:
        return "known"
        yield []  # a generator that never asks

    with ThreadPoolExecutor(1) as pool:
        assert drive(known(), Echo(), pool) == ("known", 0)
    assert without_model(known()) == "known"


def test_a_failed_call_stops_the_core_and_reaches_the_caller() -> None:
    class Down(FakeChat):
        def complete(self, prompt: Prompt) -> str:
            raise LLMError("cannot reach the model server")

    closed: list[bool] = []

    def core() -> Asking[None]:
        try:
            yield [_prompt("a")]
        finally:
            closed.append(True)

    with ThreadPoolExecutor(1) as pool, pytest.raises(LLMError, match="cannot reach"):
        drive(core(), Down(), pool)
    assert closed == [True]


def test_a_core_told_not_to_ask_may_not_ask() -> None:
    with pytest.raises(AssertionError, match="asked for 3 prompts"):
        without_model(_two_rounds())
