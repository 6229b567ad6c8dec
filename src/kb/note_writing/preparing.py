"""One note's bytes made into the rows a sync writes: parsed, chunked, its context built
(from the caches, or by the chat model when enrichment is off) and the vectors known for its
texts looked up, paying only for what is new."""

from __future__ import annotations

import logging

from kb.config import VaultConfig
from kb.context import Contextualizer
from kb.dates import note_date
from kb.hashes import content_hash
from kb.note_writing.building import BuildMode, NoteBuilder, note_facts
from kb.note_writing.events import FileEvent
from kb.store import DocumentRecord, NoteRows, Pending
from kb.vault.chunking import chunk_body
from kb.vault.link_rules import extract
from kb.vault.parsing import decode, parse_note

log = logging.getLogger("kb.indexer")


class NotePreparer:
    """Prepares notes with one builder (its context maker, embedding and caches)."""

    def __init__(
        self, builder: NoteBuilder, context: Contextualizer, chat_name: str, *, max_chars: int
    ) -> None:
        self.builder = builder
        self.context = context
        self.chat_name = chat_name
        self.max_chars = max_chars

    def prepare(
        self,
        vault: VaultConfig,
        path: str,
        data: bytes,
        *,
        size: int,
        mtime_ns: int,
        mode: BuildMode,
    ) -> tuple[FileEvent, NoteRows]:
        """Parse, chunk, contextualize and embed one note, built as `mode` says, paying only
        for what is new: its rows to write, and what writing them does.

        A note whose LLM outputs are not all cached, when the mode does not ask the model,
        gets the context known without a model, and is queued for the rest.
        """
        note = parse_note(decode(data))
        for warning in note.warnings:
            log.warning("%s/%s: %s", vault.name, path, warning)
        chunks = chunk_body(note.body, max_chars=self.max_chars, first_line=note.body_start_line)
        personal = vault.is_personal(path)
        date = note_date(note.metadata, path, mtime_ns, vault.dates)
        built = self.builder.build(
            chunks,
            personal,
            note_facts(path, note.metadata, chunks, date.own),
            vault=vault.name,
            mode=mode,
        )
        ctx, records = built.context, built.records
        pending = None if built.complete else Pending(priority=mtime_ns, fresh=mode.fresh)
        vectors = Pending(priority=mtime_ns, fresh=mode.fresh) if built.waiting else None
        for problem in ctx.problems:
            log.info("%s/%s: %s; stored structural context instead", vault.name, path, problem)
        metadata = dict(note.metadata)
        if note.warnings:
            metadata["warnings"] = list(note.warnings)
        doc = DocumentRecord(
            vault=vault.name,
            path=path,
            content_hash=content_hash(data),
            size=size,
            mtime_ns=mtime_ns,
            metadata=metadata,
            personal=personal,
            summary=ctx.summary,
            summary_key=ctx.summary_key,
            context_build=self.context.build_id(personal) + vault.dates.build_part(path),
            summary_fallback=self.chat_name if ctx.summary_fallback else None,
            voice=ctx.voice_row(self.chat_name),
            note_date=date.day,
            date_source=date.source,
            date_unread=date.unread,
        )
        event = FileEvent(
            vault.name,
            path,
            "indexed",
            chunks=len(records),
            llm_calls=ctx.llm_calls,
            embedded=built.embedded,
            fallbacks=len(ctx.problems),
            queued=pending is not None,
        )
        links = extract(
            note.body,
            first_line=note.body_start_line,
            spans=[(c.start_line, c.end_line) for c in chunks],
        )
        return event, NoteRows(doc, records, pending, vectors, links)
