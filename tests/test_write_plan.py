"""The write plan a vault sync makes from the index's state, and the build mode it carries:
pure, over readings given here."""

from __future__ import annotations

import pytest

from kb.note_writing import bulk
from kb.note_writing.building import BuildMode
from kb.note_writing.write_plan import WRITE_GROUP, IndexState, WritePlan, write_plan


def _never_asked() -> bool:
    raise AssertionError("a reading the plan does not turn on was taken")


def _never_counted() -> int:
    raise AssertionError("the notes held were counted for a write too small to be a bulk load")


def _plan(
    notes: int,
    *,
    vectors: bool = True,
    outputs: bool = True,
    held: int = 1_000,
    force: bool = False,
    enrich: bool = True,
    model_free: bool = True,
) -> WritePlan:
    return write_plan(
        notes,
        force=force,
        enrich=enrich,
        model_free=model_free,
        index=IndexState(vectors, lambda: outputs, lambda: held),
    )


def test_an_unchanged_vault_asks_nothing_of_the_index_but_its_space() -> None:
    plan = write_plan(
        0,
        force=False,
        enrich=True,
        model_free=True,
        index=IndexState(True, _never_asked, _never_counted),
    )
    assert not plan.bulk and not plan.mode.known_outputs


def test_a_first_index_looks_nothing_up_and_is_a_bulk_load() -> None:
    plan = _plan(bulk.BULK_LOAD_NOTES, vectors=False, outputs=False, held=0)
    assert plan == WritePlan(
        BuildMode(ask=False, embed=False, known_vectors=False, known_outputs=False),
        bulk=True,
        group=WRITE_GROUP,
    )


def test_a_write_into_an_index_that_holds_outputs_and_vectors_looks_them_up() -> None:
    plan = _plan(3)
    assert plan.mode == BuildMode(ask=False, embed=False)
    assert plan.mode.reuses_vectors and plan.mode.looks_up_outputs and plan.mode.looks_up_voice


def test_a_small_write_does_not_count_the_notes_held() -> None:
    plan = write_plan(
        bulk.BULK_LOAD_NOTES - 1,
        force=False,
        enrich=True,
        model_free=True,
        index=IndexState(True, lambda: True, _never_counted),
    )
    assert not plan.bulk


@pytest.mark.parametrize(("held", "loaded"), [(0, True), (299, True), (300, False), (5_000, False)])
def test_a_bulk_load_is_more_notes_than_the_index_holds(held: int, loaded: bool) -> None:
    assert _plan(300, held=held).bulk is loaded


def test_notes_go_sixteen_to_a_transaction_only_with_no_chat_model_on_the_path() -> None:
    assert _plan(3, model_free=True).group == WRITE_GROUP
    assert _plan(3, enrich=False, model_free=False).group == 1


def test_a_sync_without_enrichment_asks_the_model_now() -> None:
    assert _plan(3, enrich=False, model_free=False).mode.ask
    assert not _plan(3, enrich=True).mode.ask


def test_a_forced_sync_takes_nothing_cached() -> None:
    mode = _plan(3, force=True).mode
    assert mode.fresh
    assert not (mode.reuses_vectors or mode.looks_up_outputs or mode.looks_up_voice)


def test_a_model_asked_in_a_first_index_looks_up_what_the_sync_paid_for() -> None:
    """No output to find when the sync began, but a copy of a note written earlier in the
    same sync finds what the model was paid for; a note left to enrichment looks up none."""
    asked = _plan(3, outputs=False, enrich=False, model_free=False).mode
    assert asked.looks_up_outputs and not asked.looks_up_voice
    left = _plan(3, outputs=False, enrich=True).mode
    assert not left.looks_up_outputs and not left.looks_up_voice


def test_enrichment_builds_with_every_cache_and_asks_and_embeds_now() -> None:
    mode = BuildMode()
    assert mode.ask and mode.embed and mode.reuses_vectors and mode.looks_up_outputs
    assert BuildMode(fresh=True).looks_up_outputs is False
