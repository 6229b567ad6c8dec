"""Enrichment, the slow speed: one queued note's LLM context, written by a worker.

claim → rebuild the note's chunks from its rows → `Contextualizer.build` (the model is asked
only for outputs not cached) → embed the texts that changed (vectors reused by context
hash) → write the rows and take the item off the queue in one transaction, if the note is
still the version claimed (`EnrichedNotes.finish`; a result for an older version is dropped).

Nothing here reads the vault: a worker on another machine needs only the database and its
model servers. The loop that drains the queue is `kb.indexing.worker`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from kb.dates import settings_build
from kb.errors import KbError
from kb.note_writing.building import BuildMode, NoteBuilder, note_facts
from kb.store import Claim, Enriched, EnrichedNotes
from kb.store.queue import Speed

# done: written; dropped: the note was edited, deleted or taken by another worker meanwhile
# (a newer item, if any, is queued); failed: the attempt raised, the item waits to be retried.
Outcome = Literal["done", "dropped", "failed"]


@dataclass(frozen=True)
class Attempt:
    """One claimed item (of the LLM context's queue, or the vectors') and how it ended."""

    document_id: int
    vault: str
    path: str
    outcome: Outcome
    llm_calls: int = 0
    fallbacks: int = 0  # model outputs rejected and replaced by structural context
    embedded: int = 0
    seconds: float = 0.0
    error: str = ""
    speed: Speed = "enrich"


@dataclass
class EnrichReport:
    """What a run of a worker did, added up: `done`, the notes given their LLM context;
    `vectored`, the notes given their vectors."""

    done: int = 0
    vectored: int = 0
    dropped: int = 0
    failed: int = 0
    llm_calls: int = 0
    fallbacks: int = 0
    embedded: int = 0
    failures: list[Attempt] = field(default_factory=list)

    def add(self, attempt: Attempt) -> None:
        vectored = attempt.speed == "embed" and attempt.outcome == "done"
        key = "vectored" if vectored else attempt.outcome
        setattr(self, key, getattr(self, key) + 1)
        self.llm_calls += attempt.llm_calls
        self.fallbacks += attempt.fallbacks
        self.embedded += attempt.embedded
        if attempt.outcome == "failed":
            self.failures.append(attempt)


class Enricher:
    """Writes the LLM context of claimed notes; its model calls share one pool of
    `llm.concurrency` threads, however many notes are in hand."""

    def __init__(self, notes: EnrichedNotes, builder: NoteBuilder) -> None:
        self.notes = notes
        self.builder = builder
        self.context = builder.context
        self.chat = builder.context.chat

    def enrich(self, claim: Claim, owner: str) -> Attempt:
        """Build, embed and write one claimed note's LLM context."""
        started = time.monotonic()
        note = self.notes.note(claim.document_id)
        if note is None:  # deleted since: its item went with it
            return Attempt(claim.document_id, "", "", "dropped")
        build = self.context.build_id(note.personal)
        # The date rules' part is the vault's, and the note's date comes with its rows.
        if settings_build(note.context_build) != build:
            # Workers on other machines read their own config: one that builds contexts
            # another way than the indexer would store a mix.
            raise KbError(
                f"the note was stored for context build {note.context_build}, this worker "
                f"builds {build}: give workers the indexer's owner_name, context and "
                "embedding settings"
            )
        built = self.builder.build(
            note.chunks,
            note.personal,
            note_facts(note.path, note.metadata, note.chunks, note.note_date),
            vault=note.vault,
            mode=BuildMode(fresh=claim.fresh),
        )
        ctx = built.context
        written = self.notes.finish(
            claim,
            owner,
            Enriched(
                summary=ctx.summary,
                summary_key=ctx.summary_key,
                summary_fallback=self.chat.name if ctx.summary_fallback else None,
                chunks=built.records,
                llm_calls=ctx.llm_calls,
                voice=ctx.voice_row(self.chat.name),
            ),
        )
        return Attempt(
            claim.document_id,
            note.vault,
            note.path,
            "done" if written else "dropped",
            llm_calls=ctx.llm_calls,
            fallbacks=len(ctx.problems),
            embedded=built.embedded,
            seconds=time.monotonic() - started,
        )
