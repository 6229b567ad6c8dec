"""A model that answers badly: structural context is stored, the fallback is recorded, the
same model is not asked again, and a different model redoes exactly those outputs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kb.llm.fake import FakeChat
from kb.models.base import Prompt
from kb.prompting.outputs import split_parts
from kb.store import Store
from kb.vault.wikitext import readable
from support.configs import OWNER, SUMMARIES
from support.fake_kb import Kb
from support.reading import rows, stored_chunks

# This module's notes get the file and chunk summaries.
pytestmark = pytest.mark.kb_config(context=SUMMARIES)


JOURNAL = "Alex/Journal/2024-04-12.md"
RAMEN = "Reference/Recipes/Weeknight Miso Ramen.md"


class BadChat(FakeChat):
    """The fake model, except for the pieces `spoil(kind, source)` gives an answer for.

    A piece is a "file_summary", a "chunk_summary" or a "rewrite" of the text `source`,
    whether it is asked for alone or as one line of a several-part answer.
    """

    def __init__(self, name: str, spoil: Callable[[str, str], str | None]) -> None:
        super().__init__(name)
        self.spoil = spoil

    def complete(self, prompt: Prompt) -> str:
        good = super().complete(prompt)
        inputs = prompt.inputs
        if prompt.task not in ("note_summary", "chunk_summaries"):
            source = inputs.get("content") or inputs.get("excerpt", "")
            return self._piece(prompt.task, source, good)
        asked = [int(n) for n in inputs["asked"].split()]
        note, parts = split_parts(good, max(asked))
        lines = []
        if prompt.task == "note_summary":
            whole = " ".join(v for k, v in inputs.items() if k.startswith("content_"))
            lines.append(f"Note: {self._piece('file_summary', whole, note)}")
        for n in asked:
            lines.append(
                f"Part {n}: {self._piece('chunk_summary', inputs[f'content_{n}'], parts[n])}"
            )
        return "\n".join(lines)

    def _piece(self, kind: str, source: str, good: str) -> str:
        spoiled = self.spoil(kind, source)
        return good if spoiled is None else spoiled


def asked_parts(chat: FakeChat) -> int:
    """How many chunk summaries the model was asked for, alone or several to a call."""
    return sum(
        len(p.inputs["asked"].split()) if "asked" in p.inputs else p.task == "chunk_summary"
        for p in chat.prompts
    )


def _fallback_chunks(store: Store) -> list[dict]:
    return rows(
        store,
        "SELECT * FROM chunks WHERE summary_fallback IS NOT NULL OR rewrite_fallback IS NOT NULL",
    )


def _echo_ramen(kind: str, source: str) -> str | None:
    """The chunks that mention miso, echoed back as their summary."""
    return source if kind == "chunk_summary" and "miso" in source.lower() else None


def _echo_rewrite(kind: str, source: str) -> str | None:
    return source if kind == "rewrite" else None


def test_echoed_chunk_summaries_fall_back_to_structure(kb: Kb) -> None:
    kb.chat = BadChat("small", _echo_ramen)
    report = kb.sync()
    assert report.failed == 0
    failed = _fallback_chunks(kb.store)
    assert {c["document_id"] for c in failed} >= {
        c["document_id"] for c in stored_chunks(kb.store, RAMEN)
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
    kb.chat = BadChat("small", _echo_ramen)
    kb.sync()
    kb.reset_counts()
    report = kb.sync()
    assert kb.chat.total_calls == 0 and kb.embedder.texts == 0
    assert report.indexed == 0


def test_another_model_redoes_only_the_fallbacks(kb: Kb) -> None:
    kb.chat = BadChat("small", _echo_ramen)
    kb.sync()
    failed = _fallback_chunks(kb.store)
    kept = {
        c["summary_key"]: c["summary"] for c in stored_chunks(kb.store, JOURNAL) if c["summary"]
    }

    kb.chat = FakeChat("better")
    kb.reset_counts()
    report = kb.sync()
    # Only the chunks that fell back are asked for again, a few to a call.
    assert set(kb.chat.calls) <= {"chunk_summary", "chunk_summaries"}
    assert asked_parts(kb.chat) == len(failed)
    assert report.indexed == len({c["document_id"] for c in failed}) and report.fallbacks == 0
    assert kb.embedder.texts == len(failed)  # only the chunks whose context changed
    assert _fallback_chunks(kb.store) == []
    assert kb.store.state.status().fallbacks == {}
    # Good answers of the first model stay: the cache is keyed by content, not by model.
    assert {
        c["summary_key"]: c["summary"] for c in stored_chunks(kb.store, JOURNAL) if c["summary"]
    } == kept


def test_a_still_failing_model_keeps_its_fallback_once(kb: Kb) -> None:
    kb.chat = BadChat("small", _echo_ramen)
    kb.sync()
    kb.chat = BadChat("other", _echo_ramen)
    kb.sync()
    failed = _fallback_chunks(kb.store)
    assert failed and all(c["summary_fallback"] == "other" for c in failed)
    kb.reset_counts()
    kb.sync()
    assert kb.chat.total_calls == 0


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("", "empty"),
        ("I'm sorry, but I can't help with that request.", "refusal"),
        ("The note. " * 40, "repetition"),
    ],
)
def test_bad_file_summaries_fall_back_to_title_and_sections(kb: Kb, answer: str, why: str) -> None:
    kb.chat = BadChat("small", lambda kind, _: answer if kind == "file_summary" else None)
    report = kb.sync()
    assert report.fallbacks == 14, why  # one per non-empty note
    assert kb.store.state.status().fallbacks == {"file_summary": 14}
    doc = rows(kb.store, "SELECT * FROM documents WHERE path = %s", JOURNAL)[0]
    assert doc["summary_fallback"] == "small"
    title = 'Note "Friday, 12 April 2024 — Mount Takao" (also "Takao hike") in Alex/Journal.'
    assert doc["summary"].startswith(title)
    assert "Sections: Getting there, The climb" in doc["summary"]
    assert f"Written by {OWNER}" in doc["summary"]
    ramen = rows(kb.store, "SELECT * FROM documents WHERE path = %s", RAMEN)[0]
    assert OWNER not in ramen["summary"]
    for chunk in stored_chunks(kb.store, JOURNAL):
        assert chunk["full_context"].endswith(f"\n\n{doc['summary']}")


def test_failed_rewrites_keep_the_text_attributed_to_the_owner(kb: Kb) -> None:
    kb.chat = BadChat("small", _echo_rewrite)
    kb.sync()
    asked = kb.chat.calls["rewrite"]
    journal = stored_chunks(kb.store, JOURNAL)
    first_person = [c for c in journal if " I " in f" {c['content']} "]
    assert first_person
    for chunk in first_person:
        assert chunk["rewrite_fallback"] == "small"
        assert chunk["rewrite"] == f"{OWNER} wrote (in the first person):\n{chunk['content']}"
        assert readable(chunk["rewrite"]) in chunk["full_context"]
    # Every rewrite asked for was an echo, so every one of them fell back.
    assert kb.store.state.status().fallbacks["rewrite"] == asked

    kb.chat = FakeChat("better")
    kb.reset_counts()
    kb.sync()
    assert kb.chat.calls["rewrite"] == asked
    assert _fallback_chunks(kb.store) == []


def test_fallback_notes_are_retried_even_when_untouched(kb: Kb, vault: Path) -> None:
    kb.chat = BadChat("small", _echo_ramen)
    kb.sync()
    stat = (vault / RAMEN).stat()
    kb.chat = FakeChat("better")
    kb.sync()
    assert asked_parts(kb.chat) > 0
    assert (vault / RAMEN).stat().st_mtime_ns == stat.st_mtime_ns


def test_every_fallback_column_is_in_its_tables_fallback_index(store: Store) -> None:
    # Each sync looks for another model's fallbacks: a fallback column the partial index
    # leaves out makes that search read every chunk of the vault.
    indexes = (("documents", "documents_fallback_idx"), ("chunks", "chunks_fallback_idx"))
    for table, index in indexes:
        columns = {
            r["column_name"]
            for r in rows(
                store,
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name = %s AND column_name LIKE '%%\\_fallback'",
                table,
            )
        }
        (definition,) = rows(store, "SELECT pg_get_indexdef(%s::regclass) AS d", index)
        assert columns and all(f"{c} IS NOT NULL" in definition["d"] for c in columns), table
