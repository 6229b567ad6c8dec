"""What a note needs from the chat model, and the cache key each output is kept under.

Every LLM output is cached under a key that hashes exactly its inputs and its prompt's
version, so a run only asks for what is new:

- the file summary depends on the first and last chunks only, so editing the middle of a
  note keeps it;
- a chunk summary depends on its own chunk and header path, not on the file summary, so a
  new file summary does not redo every chunk summary;
- the rewrite depends on the chunk and the owner's name;
- the voice on the note's path, properties and opening (kb.context.voices);
- a chunk's lines (its statements, its questions; kb.context.chunk_writes) on its text, its header
  path, who "I" is and the note's date, so a rename, or an edit elsewhere in the note, keeps
  them.

Keys leave the model out: switching models keeps every good output, and only the outputs
that fell back are asked again. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kb.config import Config, ContextConfig
from kb.context import passage_texts, voices
from kb.context.chunk_writes import CHECKS_VERSION, SPECS, ChunkWriteSpec
from kb.context.layout import LAYOUT_VERSION, header_line
from kb.context.records import NoteFacts
from kb.dates import spoken
from kb.hashes import cache_key
from kb.llm import embed_window
from kb.prompting import prompts
from kb.prompting.outputs import Output
from kb.store.chunks import VoiceRecord
from kb.vault.chunking import CHUNKER_VERSION, Chunk


@dataclass(frozen=True)
class ContextBuild:
    """What a note's stored chunks and contexts are made from, besides the note itself."""

    settings: ContextConfig
    chunk_chars: int  # the chunks a context is built on: other chunks need other contexts
    embed_window: int  # tokens of a document the embedder reads, after its document prefix
    owner: str

    @classmethod
    def of(cls, config: Config) -> ContextBuild:
        """The build a config asks for: the indexer's, enrichment's and `kb verify`'s."""
        return cls(
            config.context,
            chunk_chars=config.chunking.max_chars,
            embed_window=embed_window(config.llm),
            owner=config.owner_name,
        )

    def id(self, personal: bool) -> str:
        """Names every setting a note's stored context depends on, and no other: a note
        stored under another id is cut again and rebuilt (from cache, so only the outputs
        whose inputs changed cost a model call), and a change rebuilds exactly the notes it
        shapes. The owner's name, and the rewrite, shape personal notes only."""
        settings = self.settings
        parts = [
            f"{CHUNKER_VERSION}:{self.chunk_chars}",
            settings.summaries,
            LAYOUT_VERSION,
            str(self.embed_window),
        ]
        if settings.asks("summaries"):
            # The file summary is written from these chunks (see Needs.excerpts).
            parts.append(
                f"prompts{prompts.PROMPT_VERSION}:{settings.first_chunks}+{settings.last_chunks}"
            )
        if settings.passages != "none":
            parts.append(passage_texts.build_id())
        # "statements1", "questions1": each kind of lines its prompt's version; and the
        # checks', which cached lines are read through again.
        kinds = settings.chunk_writes()
        parts += [f"{kind}{SPECS[kind].version}" for kind in kinds]
        if kinds:
            parts.append(f"checks{CHECKS_VERSION}")
        if not personal and settings.names_writers():
            parts.append(f"voice{prompts.VOICE_VERSION}")
        if personal and (settings.summaries != "none" or settings.passages != "none"):
            # Hashed: an id names the name's version, it need not spell it.
            parts.append(f"owner:{cache_key(self.owner)[:12]}")
            if settings.asks("summaries"):
                rewrite = settings.rewrite_personal
                parts.append(f"rewrite{prompts.REWRITE_VERSION}" if rewrite else "as-written")
        return "/".join(parts)

    def needs(self) -> Needs:
        return Needs(self.settings, self.owner)


@dataclass(frozen=True)
class Needs:
    """The rules that say which outputs a note needs, and their keys."""

    settings: ContextConfig
    owner: str

    def owner_for(self, personal: bool) -> str | None:
        return self.owner if personal else None

    def rewrites(self, personal: bool) -> bool:
        return personal and self.settings.rewrite_personal and self.settings.asks("summaries")

    def asks_voice(self, personal: bool) -> bool:
        """Whether the model names this note's writer (see ContextConfig.names_writers)."""
        return not personal and self.settings.names_writers()

    @staticmethod
    def stand_in(before: VoiceRecord | None) -> Output | None:
        """The voice a note was stored with, standing in for one the model has yet to name
        (an edit of its opening changes the voice's key): the chunks' lines found under it
        are kept meanwhile, not lost with the rows the note is stored again in. A rejected
        answer names no one, so it stands in for nothing."""
        if before is None or before.fallback is not None:
            return None
        return Output(before.text)

    def writer(self, personal: bool, voice: Output | None) -> str | None:
        """Who the note's "I" is: the owner in the owner's folders, else the writer the
        model named (None when it named no one, or its answer was rejected)."""
        if personal:
            return self.owner
        if voice is None or voice.fallback or not voice.text:
            return None
        return voice.text

    def excerpts(self, chunks: Sequence[Chunk]) -> list[str]:
        """The chunks the file summary is written from: the first N and the last N."""
        n_first, n_last = self.settings.first_chunks, self.settings.last_chunks
        if len(chunks) <= n_first + n_last:
            picked = list(chunks)
        else:
            picked = [*chunks[:n_first], *(chunks[-n_last:] if n_last else [])]
        return [c.content for c in picked]

    def file_summary_key(self, chunks: Sequence[Chunk], personal: bool) -> str:
        return cache_key(
            "file", prompts.PROMPT_VERSION, self.owner_for(personal) or "", *self.excerpts(chunks)
        )

    def rewrite_key(self, chunk: Chunk) -> str:
        return cache_key("rewrite", prompts.REWRITE_VERSION, self.owner, chunk.content)

    def chunk_summary_key(self, chunk: Chunk, personal: bool) -> str:
        return cache_key(
            "chunk",
            prompts.PROMPT_VERSION,
            self.owner_for(personal) or "",
            str(self.rewrites(personal)),
            header_line(chunk.header_path),
            chunk.content,
        )

    def voice_key(self, head: voices.NoteHead) -> str:
        return cache_key("voice", prompts.VOICE_VERSION, head.path, head.properties, head.excerpt)

    def line_specs(self) -> list[ChunkWriteSpec]:
        """The kinds of lines the model writes of each chunk, in CHUNK_WRITES order."""
        return [SPECS[kind] for kind in self.settings.chunk_writes()]

    def lines_key(
        self, spec: ChunkWriteSpec, chunk: Chunk, writer: str | None, date: str | None
    ) -> str:
        return cache_key(
            spec.kind,
            spec.version,
            writer or "",
            date or "",
            header_line(chunk.header_path),
            chunk.content,
        )

    def keys(
        self,
        chunks: Sequence[Chunk],
        personal: bool,
        note: NoteFacts,
        known: Mapping[str, Output] | None = None,
        before: VoiceRecord | None = None,
    ) -> list[str]:
        """The cache keys a note needs, so the caller can fetch known outputs in one go.

        The keys of a chunk's lines name the note's writer, which the model may yet have to
        name: they are listed once the voice is in `known`, or under the writer it was
        stored with (`before`) meanwhile."""
        keys: list[str] = []
        if not chunks:
            return keys
        if self.settings.asks("summaries"):
            keys.append(self.file_summary_key(chunks, personal))
            for chunk in chunks:
                keys.append(self.chunk_summary_key(chunk, personal))
                if self.rewrites(personal):
                    keys.append(self.rewrite_key(chunk))
        voice: Output | None = None
        if self.asks_voice(personal):
            key = self.voice_key(head(note, chunks))
            keys.append(key)
            voice = (known or {}).get(key) or self.stand_in(before)
            if voice is None:
                return keys
        writer = self.writer(personal, voice)
        date = spoken(note.date)
        keys += [self.lines_key(s, c, writer, date) for s in self.line_specs() for c in chunks]
        return keys


def head(note: NoteFacts, chunks: Sequence[Chunk]) -> voices.NoteHead:
    """What the model reads to name the note's writer: its path, properties and opening."""
    return voices.note_head(note.path, note.metadata, [c.content for c in chunks[:3]])
