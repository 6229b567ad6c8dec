"""One note's chunk rows, built the same way by the indexer and by enrichment.

The model outputs a note needs are read from the cache first (kb.context asks only for what
is missing); what is left to ask is asked now, or, when the build mode's `ask` is off and
some are missing, left for enrichment: the note is then built with what is known and
structural stand-ins. Then the chunks and their passages are embedded, each text once per
model, or (`embed` off) left to the embedding queue where no vector is known for them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from kb.context import Contextualizer, FileContext, NoteFacts
from kb.context.embedding import Embedding
from kb.prompting.outputs import Output
from kb.store import ChunkRecord
from kb.store.caches import Caches
from kb.vault.chunking import Chunk
from kb.vault.notes import note_title


@dataclass(frozen=True)
class Built:
    context: FileContext
    records: list[ChunkRecord]
    embedded: int  # texts the embedder was sent for it (or, not embedding: left waiting)
    complete: bool  # every model output the note needs is in it (else: left for enrichment)

    @property
    def waiting(self) -> bool:
        """Whether a text of it waits for a vector (the embedding queue's)."""
        return any(
            c.embedding is None or any(p.embedding is None for p in c.passages)
            for c in self.records
        )


def note_facts(
    path: str, metadata: Mapping[str, Any], chunks: list[Chunk], date: dt.date | None
) -> NoteFacts:
    """What a note's context is built from besides its chunks; `date` is its own date
    (kb.dates), None when it has only its file's time."""
    folder = PurePosixPath(path).parent.as_posix()
    return NoteFacts(
        title=note_title(metadata, chunks, path),
        folder="" if folder == "." else folder,
        path=path,
        metadata=metadata,
        aliases=tuple(metadata.get("aliases", ())),
        date=date,
    )


@dataclass(frozen=True)
class BuildMode:
    """How a note's rows are built: what is taken from the index, and what is made now.

    The defaults are enrichment's: the model asked and the texts embedded now, every cache
    looked up. A sync's mode is made once for its notes (kb.note_writing.write_plan).
    """

    fresh: bool = False  # no cached output or vector is taken (a forced rebuild)
    # The model is asked now for the outputs not cached; else a note missing some is built
    # with what is known and structural stand-ins, and left for enrichment.
    ask: bool = True
    # The texts with no vector known are embedded now; else they wait for the embedding queue.
    embed: bool = True
    known_vectors: bool = True  # the index may hold vectors for the texts (off: it holds none)
    known_outputs: bool = True  # it may hold LLM outputs by their keys (off: a first index)

    @property
    def reuses_vectors(self) -> bool:
        return not self.fresh and self.known_vectors

    @property
    def looks_up_outputs(self) -> bool:
        """Whether the cached outputs are looked up: also in an index that held none when the
        sync began, if the model is asked now (an earlier note of the same sync may have paid
        for the same text, in a copy); a note left to the enrichment queue is looked up
        there."""
        return not self.fresh and (self.known_outputs or self.ask)

    @property
    def looks_up_voice(self) -> bool:
        """Whether the note's stored voice is looked up (to stand in while it waits)."""
        return not self.fresh and self.known_outputs


class NoteBuilder:
    def __init__(self, context: Contextualizer, embedding: Embedding, caches: Caches) -> None:
        self.context = context
        self.embedding = embedding
        self.caches = caches

    def build(
        self, chunks: list[Chunk], personal: bool, note: NoteFacts, *, vault: str, mode: BuildMode
    ) -> Built:
        """The note's rows, built as `mode` says."""
        chat = self.context.chat.name
        # Only a note whose writer the model names has one stored to stand in.
        asks = mode.looks_up_voice and self.context.needs.asks_voice(personal)
        before = self.caches.stored_voice(vault, note.path) if asks else None
        looks = mode.looks_up_outputs

        def lookup(keys: list[str]) -> dict[str, Output]:
            return self.caches.known_outputs(keys, chat) if looks else {}

        known, complete = self.context.gather(chunks, personal, note, lookup, before)
        if mode.ask or complete:
            ctx = self.context.build(chunks, personal, known, note, lookup)
        else:
            ctx = self.context.provisional(chunks, personal, known, note, before)
        records, embedded = self.embedding.records(
            ctx.chunks,
            chat_model=chat,
            reuse=mode.reuses_vectors,
            passages=ctx.passages,
            embed=mode.embed,
        )
        return Built(ctx, records, embedded, complete or mode.ask)
