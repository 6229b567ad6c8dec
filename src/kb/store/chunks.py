"""The rows a note's write stores and enrichment later updates in place: its chunks, and
the voice the note speaks in.

Their own module because both writers use them: `documents` (a note written whole) and
`queue` (a queued note given its context).
"""

from __future__ import annotations

from dataclasses import dataclass

from kb.config import CHUNK_WRITES, ChunkWrite
from kb.store.passages import PassageRecord
from kb.store.pool import Vector, vector_param


@dataclass(frozen=True)
class LinesRecord:
    """One kind of lines the model wrote of a chunk (kb.context.chunk_writes), one item a line,
    kept under its cache key like every model output."""

    kind: ChunkWrite
    text: str
    key: str
    fallback: str | None = None  # the chat model whose answer was rejected


@dataclass(frozen=True)
class ChunkRecord:
    position: int
    header_path: tuple[str, ...]
    content: str
    content_hash: str
    start_line: int
    end_line: int
    summary: str
    summary_key: str
    rewrite: str | None
    rewrite_key: str | None
    full_context: str
    summaries_at: int | None  # where full_context's summaries begin (see kb.context)
    embed_text: str  # full_context fitted to the embedder's window
    context_hash: str
    chat_model: str
    embedding: Vector | None  # None: waiting for its vector (the embedding queue)
    embed_model: str | None
    summary_fallback: str | None = None  # the chat model whose output was rejected
    rewrite_fallback: str | None = None
    # The lines the model wrote of it (kb.context.chunk_writes), each kind when asked for.
    lines: tuple[LinesRecord, ...] = ()
    # Its extra texts, each with a vector of its own (kb.context.passage_texts); they hang off
    # the chunk.
    passages: tuple[PassageRecord, ...] = ()

    def context_params(self) -> tuple[object, ...]:
        """The values of the columns its context fills, in the order both writes name them
        (a note's chunks stored, and enrichment's update of them)."""
        return (
            self.summary,
            self.summary_key,
            self.rewrite,
            self.rewrite_key,
            self.full_context,
            self.embed_text,
            self.context_hash,
            self.chat_model,
            vector_param(self.embedding),
            self.embed_model,
            self.summary_fallback,
            self.rewrite_fallback,
            self.summaries_at,
            *(v for kind in CHUNK_WRITES for v in self._lines_params(kind)),
        )

    def _lines_params(self, kind: ChunkWrite) -> tuple[str | None, str | None, str | None]:
        # A kind not asked for stores NULLs: its columns are (<kind>, <kind>_key,
        # <kind>_fallback), in CHUNK_WRITES order in both writes.
        found = next((r for r in self.lines if r.kind == kind), None)
        return (found.text, found.key, found.fallback) if found else (None, None, None)


@dataclass(frozen=True)
class VoiceRecord:
    """Whose "I" a note speaks in, as the chat model named it ("" for no one), kept under
    its cache key like every model output."""

    text: str
    key: str
    fallback: str | None = None  # the chat model whose answer was rejected

    def params(self) -> tuple[str, str, str | None]:
        return (self.text, self.key, self.fallback)
