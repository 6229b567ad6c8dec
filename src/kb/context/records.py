"""What context building makes of a note: each chunk's context, and the note's."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kb.config import ChunkWrite
from kb.context import passage_texts
from kb.context.layout import Texts
from kb.hashes import content_hash
from kb.prompting.outputs import Output
from kb.store.chunks import VoiceRecord
from kb.vault.chunking import Chunk


@dataclass(frozen=True)
class NoteFacts:
    """What context is built from besides the note's chunks."""

    title: str
    folder: str = ""  # the note's folder in its vault, "" at the top
    path: str = ""  # the note's path in its vault
    metadata: Mapping[str, Any] = field(default_factory=dict)  # its frontmatter
    aliases: tuple[str, ...] = ()  # the other names its frontmatter gives it
    date: dt.date | None = None  # its own date (kb.dates), None if only its file's time


@dataclass(frozen=True)
class Window:
    """The model's and the embedder's limits a context is built within."""

    context: int  # tokens of a chat prompt and its answer
    embed: int  # tokens of a document the embedder reads, after its document prefix


@dataclass(frozen=True)
class Draft:
    """A note on its way to its context: its chunks, whether they are the owner's, what it
    is built from besides them, and the model outputs already paid for (by cache key)."""

    chunks: list[Chunk]
    personal: bool
    note: NoteFacts
    known: Mapping[str, Output] = field(default_factory=dict)
    # The writer the note was stored with (see Needs.stand_in): until the model, asked
    # again, names one, its chunks' lines are found under that one.
    voice_before: VoiceRecord | None = None


@dataclass(frozen=True)
class NamedVoice:
    """What asking for a note's writer gave: its output by cache key (none when it was
    known or is not asked for), and why the answer was not kept."""

    known: Mapping[str, Output] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ChunkLines:
    """One kind of lines the model wrote of a chunk, and the cache key they are kept under."""

    kind: ChunkWrite
    output: Output
    key: str


@dataclass(frozen=True)
class ContextChunk:
    chunk: Chunk
    summary: str
    summary_key: str
    summary_fallback: bool
    rewrite: str | None
    rewrite_key: str | None
    rewrite_fallback: bool
    full_context: str  # everything: what full-text search reads
    # Where the summaries begin in full_context, in characters, when full-text search is to
    # weigh them less than the chunk's own words (see layout.summaries_start); None: it
    # weighs all.
    summaries_at: int | None
    embed_text: str  # what the embedder reads: full_context fitted to its window
    # The lines the model wrote of the chunk (kb.context.chunk_writes: statements,
    # questions), each kind when asked for and known; each line is a passage of its own.
    lines: tuple[ChunkLines, ...] = ()

    @classmethod
    def of(
        cls,
        chunk: Chunk,
        texts: Texts,
        *,
        summary: Output,
        summary_key: str,
        rewritten: Output | None = None,
        rewrite_key: str | None = None,
    ) -> ContextChunk:
        return cls(
            chunk=chunk,
            summary=summary.text,
            summary_key=summary_key,
            summary_fallback=summary.fallback,
            rewrite=rewritten.text if rewritten else None,
            rewrite_key=rewrite_key if rewritten else None,
            rewrite_fallback=rewritten.fallback if rewritten else False,
            full_context=texts.full_context,
            summaries_at=texts.summaries_at,
            embed_text=texts.embed_text,
        )

    @property
    def context_hash(self) -> str:
        return content_hash(self.embed_text)


@dataclass(frozen=True)
class FileContext:
    summary: str
    summary_key: str
    summary_fallback: bool
    chunks: list[ContextChunk]
    llm_calls: int
    # Outputs rejected in this build, e.g. "chunk 3 summary: echo of the note".
    problems: list[str]
    # Each chunk's passages (`context.passages`, its lines), as the embedder reads them.
    passages: list[list[passage_texts.Passage]] = field(default_factory=list)
    # The writer the model named (kb.context.voices), when it was asked and its answer is known.
    voice: Output | None = None
    voice_key: str | None = None

    def voice_row(self, chat_model: str) -> VoiceRecord | None:
        """The voice as stored with the note, when the model was asked for one."""
        if self.voice is None or self.voice_key is None:
            return None
        return VoiceRecord(
            self.voice.text, self.voice_key, chat_model if self.voice.fallback else None
        )


EMPTY = FileContext("", "", False, [], 0, [])
