"""A model that answers badly: structural context is stored, the fallback is recorded, the
same model is not asked again, and a different model redoes exactly those outputs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import OWNER, Kb
from kb.llm.base import Prompt
from kb.llm.fake import FakeChat
from kb.store import Store

JOURNAL = "Alex/Journal/2024-04-12.md"
RAMEN = "Reference/Recipes/Weeknight Miso Ramen.md"


class BadChat(FakeChat):
    """The fake model, except that `bad(prompt)` picks prompts it answers with `answer`."""

    def __init__(
        self, name: str, bad: Callable[[Prompt], bool], answer: Callable[[Prompt], str]
    ) -> None:
        super().__init__(name)
        self.bad = bad
        self.answer = answer

    def complete(self, prompt: Prompt) -> str:
        good = super().complete(prompt)
        return self.answer(prompt) if self.bad(prompt) else good


def _rows(store: Store, sql: str, *params: object) -> list[dict]:
    with store.pool.connection() as conn:
        return conn.execute(sql, params).fetchall()


def _chunks(store: Store, path: str) -> list[dict]:
    return _rows(
        store,
        "SELECT c.* FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE d.path = %s ORDER BY position",
        path,
    )


def _fallback_chunks(store: Store) -> list[dict]:
    return _rows(
        store,
        "SELECT * FROM chunks WHERE summary_fallback IS NOT NULL OR rewrite_fallback IS NOT NULL",
    )


def _echo_chunk(prompt: Prompt) -> str:
    return prompt.inputs["content"]


def _is_ramen_chunk(prompt: Prompt) -> bool:
    return prompt.task == "chunk_summary" and "miso" in prompt.inputs["content"].lower()


def test_echoed_chunk_summaries_fall_back_to_structure(kb: Kb) -> None:
    kb.chat = BadChat("small", _is_ramen_chunk, _echo_chunk)
    report = kb.sync()
    assert report.failed == 0
    failed = _fallback_chunks(kb.store)
    assert {c["document_id"] for c in failed} >= {
        c["document_id"] for c in _chunks(kb.store, RAMEN)
    }, "the ramen recipe mentions miso"
    assert report.fallbacks == len(failed)
    for chunk in failed:
        assert chunk["summary_fallback"] == "small"
        assert chunk["summary"].startswith('Part of the note "')
        assert chunk["content"] not in chunk["summary"]
        assert f"\n\n{chunk['summary']}\n\n" in chunk["full_context"]
    status = kb.store.state.status()
    assert status.fallbacks == {"chunk_summary": len(failed)}


def test_same_model_is_not_asked_again(kb: Kb) -> None:
    kb.chat = BadChat("small", _is_ramen_chunk, _echo_chunk)
    kb.sync()
    kb.reset_counts()
    report = kb.sync()
    assert kb.chat.total_calls == 0 and kb.embedder.texts == 0
    assert report.indexed == 0


def test_another_model_redoes_only_the_fallbacks(kb: Kb) -> None:
    kb.chat = BadChat("small", _is_ramen_chunk, _echo_chunk)
    kb.sync()
    failed = _fallback_chunks(kb.store)
    kept = {c["summary_key"]: c["summary"] for c in _chunks(kb.store, JOURNAL) if c["summary"]}

    kb.chat = FakeChat("better")
    kb.reset_counts()
    report = kb.sync()
    assert dict(kb.chat.calls) == {"chunk_summary": len(failed)}
    assert report.indexed == len({c["document_id"] for c in failed}) and report.fallbacks == 0
    assert kb.embedder.texts == len(failed)  # only the chunks whose context changed
    assert _fallback_chunks(kb.store) == []
    assert kb.store.state.status().fallbacks == {}
    # Good answers of the first model stay: the cache is keyed by content, not by model.
    assert {
        c["summary_key"]: c["summary"] for c in _chunks(kb.store, JOURNAL) if c["summary"]
    } == kept


def test_a_still_failing_model_keeps_its_fallback_once(kb: Kb) -> None:
    kb.chat = BadChat("small", _is_ramen_chunk, _echo_chunk)
    kb.sync()
    kb.chat = BadChat("other", _is_ramen_chunk, _echo_chunk)
    kb.sync()
    failed = _fallback_chunks(kb.store)
    assert failed and all(c["summary_fallback"] == "other" for c in failed)
    kb.reset_counts()
    kb.sync()
    assert kb.chat.total_calls == 0


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (lambda p: "", "empty"),
        (lambda p: "I'm sorry, but I can't help with that request.", "refusal"),
        (lambda p: "The note. " * 40, "repetition"),
    ],
)
def test_bad_file_summaries_fall_back_to_title_and_sections(
    kb: Kb, answer: Callable[[Prompt], str], why: str
) -> None:
    kb.chat = BadChat("small", lambda p: p.task == "file_summary", answer)
    report = kb.sync()
    assert report.fallbacks == 14, why  # one per non-empty note
    assert kb.store.state.status().fallbacks == {"file_summary": 14}
    doc = _rows(kb.store, "SELECT * FROM documents WHERE path = %s", JOURNAL)[0]
    assert doc["summary_fallback"] == "small"
    assert doc["summary"].startswith('Note "Friday, 12 April 2024 — Mount Takao" in Alex/Journal.')
    assert "Sections: Getting there, The climb" in doc["summary"]
    assert f"Written by {OWNER}" in doc["summary"]
    ramen = _rows(kb.store, "SELECT * FROM documents WHERE path = %s", RAMEN)[0]
    assert OWNER not in ramen["summary"]
    for chunk in _chunks(kb.store, JOURNAL):
        assert chunk["full_context"].endswith(f"\n\n{doc['summary']}")


def test_failed_rewrites_keep_the_text_attributed_to_the_owner(kb: Kb) -> None:
    kb.chat = BadChat("small", lambda p: p.task == "rewrite", _echo_chunk)
    kb.sync()
    asked = kb.chat.calls["rewrite"]
    journal = _chunks(kb.store, JOURNAL)
    first_person = [c for c in journal if " I " in f" {c['content']} "]
    assert first_person
    for chunk in first_person:
        assert chunk["rewrite_fallback"] == "small"
        assert chunk["rewrite"] == f"{OWNER} wrote (in the first person):\n{chunk['content']}"
        assert chunk["rewrite"] in chunk["full_context"]
    # Every rewrite asked for was an echo, so every one of them fell back.
    assert kb.store.state.status().fallbacks["rewrite"] == asked

    kb.chat = FakeChat("better")
    kb.reset_counts()
    kb.sync()
    assert kb.chat.calls["rewrite"] == asked
    assert _fallback_chunks(kb.store) == []


def test_fallback_notes_are_retried_even_when_untouched(kb: Kb, vault: Path) -> None:
    kb.chat = BadChat("small", _is_ramen_chunk, _echo_chunk)
    kb.sync()
    stat = (vault / RAMEN).stat()
    kb.chat = FakeChat("better")
    kb.sync()
    assert kb.chat.calls["chunk_summary"] > 0
    assert (vault / RAMEN).stat().st_mtime_ns == stat.st_mtime_ns
