"""A change of the settings a note's context is made from (the owner's name, the personal
globs, the prompts' versions, the file summary's excerpts) rebuilds exactly the notes it
shapes, on the next sync and at a daemon's start; `kb verify` calls them stale until then."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kb.errors import KbError
from kb.indexing.verify import verify
from kb.prompting import prompts
from kb.store import Store
from support.configs import OWNER, SUMMARIES, summaries_config
from support.daemons import FAST, running, settle
from support.fake_kb import Kb, file_summaries
from support.reading import rows, stored_chunks

# This module's notes get the file and chunk summaries.
pytestmark = pytest.mark.kb_config(context=SUMMARIES)


NEW_OWNER = "Sam Roe"


def _personal(kb: Kb) -> set[str]:
    return {p for p, s in kb.store.documents.states("v").items() if s.personal}


def _indexed_at(store: Store) -> dict[str, Any]:
    return {
        r["path"]: r["indexed_at"] for r in rows(store, "SELECT path, indexed_at FROM documents")
    }


def _stale(kb: Kb) -> set[str]:
    report = verify(kb.config, kb.store.documents)
    assert {d.kind for d in report.differences} <= {"stale"}, report.differences
    return {d.path for d in report.differences}


def _written_about(store: Store, paths: set[str]) -> str:
    """The notes' summaries, and their chunks' contexts (rewrites and summaries in them)."""
    texts = [
        d["summary"]
        for d in rows(store, "SELECT path, summary FROM documents")
        if d["path"] in paths
    ]
    for path in paths:
        texts += [c["full_context"] for c in stored_chunks(store, path)]
    return "\n".join(texts)


def test_a_new_owner_name_rebuilds_only_the_personal_notes(kb: Kb, vault: Path) -> None:
    kb.sync()
    personal = _personal(kb)
    assert 0 < len(personal) < 15
    assert OWNER in _written_about(kb.store, personal)
    before = _indexed_at(kb.store)

    renamed = Kb(kb.store, summaries_config(vault, owner_name=NEW_OWNER))
    assert _stale(renamed) == personal
    report = renamed.sync()
    assert (report.indexed, report.unchanged) == (len(personal), 15 - len(personal))
    written = _written_about(kb.store, personal)
    assert NEW_OWNER in written and OWNER not in written
    assert renamed.chat.calls["rewrite"] > 0
    after = _indexed_at(kb.store)
    assert {p for p in after if after[p] != before[p]} == personal
    assert _stale(renamed) == set()
    assert renamed.sync().indexed == 0  # and only once


def test_a_note_entering_or_leaving_the_personal_set_is_rebuilt(kb: Kb, vault: Path) -> None:
    kb.sync()
    people = {p for p in kb.store.documents.states("v") if p.startswith("People/")}
    assert people
    globs = ["Alex/**", "People/**"]
    wider = Kb(
        kb.store,
        summaries_config(vault, vaults=[{"name": "v", "path": str(vault), "personal": globs}]),
    )
    assert _stale(wider) == people
    assert wider.sync().indexed == len(people)
    assert _personal(wider) >= people and _stale(wider) == set()
    assert kb.sync().indexed == len(people) and _personal(kb).isdisjoint(people)


def test_new_prompt_versions_rebuild_the_notes_they_shape(
    kb: Kb, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb.sync()
    personal = _personal(kb)
    kb.reset_counts()
    # The rewrite's prompt shapes personal notes only.
    monkeypatch.setattr(prompts, "REWRITE_VERSION", "next")
    assert _stale(kb) == personal
    report = kb.sync()
    assert report.indexed == len(personal) and kb.chat.calls["rewrite"] > 0
    assert kb.sync().indexed == 0
    # The summaries' prompts shape every note.
    monkeypatch.setattr(prompts, "PROMPT_VERSION", "next")
    assert len(_stale(kb)) == 15
    assert kb.sync().indexed == 15 and _stale(kb) == set()


def test_other_excerpts_for_the_file_summary_redo_only_the_summaries_they_change(
    kb: Kb, vault: Path
) -> None:
    kb.sync()
    chunks = {p: len(stored_chunks(kb.store, p)) for p in kb.store.documents.states("v")}
    fewer = Kb(kb.store, summaries_config(vault, context={"first_chunks": 1}))
    assert len(_stale(fewer)) == 15
    assert fewer.sync().indexed == 15
    # The first two and last two chunks were read; now the first and last two: only a note
    # of four chunks or more has other excerpts, and a new summary.
    assert file_summaries(fewer.chat) == sum(n >= 4 for n in chunks.values()) > 0


def test_rewrites_turned_off_rebuild_only_the_personal_notes(kb: Kb, vault: Path) -> None:
    kb.sync()
    plain = Kb(kb.store, summaries_config(vault, context={"rewrite_personal": False}))
    assert _stale(plain) == _personal(kb)
    assert plain.sync().indexed == len(_personal(kb)) and plain.chat.calls["rewrite"] == 0
    assert all(c["rewrite"] is None for p in _personal(kb) for c in stored_chunks(kb.store, p))


def test_a_worker_of_another_owner_refuses_a_personal_note(kb: Kb, vault: Path) -> None:
    # Workers read their own config: one with another owner would write a mix.
    with kb.indexer() as indexer:
        indexer.sync()  # stored and queued, not enriched
    other = Kb(kb.store, summaries_config(vault, owner_name=NEW_OWNER))
    with pytest.raises(KbError, match="context build"):
        other.drain()


def test_a_daemon_started_with_a_new_owner_rebuilds_the_personal_notes(
    store: Store, vault: Path
) -> None:
    Kb(store, summaries_config(vault)).sync()
    renamed = Kb(store, summaries_config(vault, owner_name=NEW_OWNER, daemon=FAST))
    with running(renamed) as daemon:
        settle(daemon, renamed)
    written = _written_about(store, _personal(renamed))
    assert NEW_OWNER in written and OWNER not in written
