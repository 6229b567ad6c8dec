"""What a vault sync's write of notes is, decided once from the index's state: how each note
is built (kb.note_writing.building.BuildMode), whether the write is a bulk load
(kb.note_writing.bulk), how many notes go to a transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kb.note_writing.building import BuildMode
from kb.note_writing.bulk import bulk_load

# Notes written to the database in one transaction, where no chat model is on the path.
WRITE_GROUP = 16


@dataclass(frozen=True)
class WritePlan:
    mode: BuildMode  # how each note is built
    # A bulk load: the text index's postings B-tree is dropped for it (kb.note_writing.bulk).
    bulk: bool
    # Notes written in one transaction (Documents.save): sixteen where no chat model is on the
    # path; with a model on it, each note as soon as it is done: its outputs are paid for, and
    # a stop must not lose them.
    group: int


@dataclass(frozen=True)
class IndexState:
    """The readings of the index a plan is made from. The two that cost a query the sync
    would not otherwise pay are asked only when the plan turns on them: an unchanged vault's
    sync asks neither."""

    # An embedding space: the index may hold vectors for the notes' texts (a new index holds
    # none; the embedding queue looks again when it embeds them).
    holds_vectors: bool
    # Any LLM output by its key (none in a first index: the enrichment queue looks again
    # when it takes the notes).
    holds_outputs: Callable[[], bool]
    notes: Callable[[], int]  # the notes it holds, in every vault


def write_plan(
    notes: int, *, force: bool, enrich: bool, model_free: bool, index: IndexState
) -> WritePlan:
    """The plan for writing `notes` notes into `index`: `force`, no cached output or vector
    taken; `enrich`, the LLM context left to the enrichment queue's workers; `model_free`,
    no chat model on the path (enrichment, or none asked)."""
    mode = BuildMode(
        fresh=force,
        ask=not enrich,
        embed=False,  # the embedding queue's workers embed what has no vector known
        known_vectors=index.holds_vectors,
        known_outputs=notes > 0 and index.holds_outputs(),
    )
    return WritePlan(
        mode=mode,
        bulk=bulk_load(notes, index.notes),
        group=WRITE_GROUP if model_free else 1,
    )
