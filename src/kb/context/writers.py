"""The writers core: whose voice a note speaks in, each chunk's statements, and the passages
made of them (each a vector of its own).

Outside the owner's folders the model names the note's writer once (kb.voices); the
statements of each chunk are then written knowing who "I" is and the note's date
(kb.statements); the paragraphs of a chunk speak in that voice (kb.passages). Like
kb.context.summaries, `with_note_outputs` yields its prompts and never waits on a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kb import passages, prompts, statements, voices
from kb.chunking import Chunk
from kb.context.driver import Asking
from kb.context.layout import fit, header_line, with_statements
from kb.context.needs import Needs, head
from kb.context.records import ContextChunk, Draft, FileContext, Window
from kb.dates import spoken
from kb.llm.base import Prompt
from kb.outputs import Output

# A dozen statements of twenty-odd tokens: room to finish, and a runaway stops soon.
STATEMENT_TOKENS = 320


def with_note_outputs(
    base: FileContext, draft: Draft, needs: Needs, window: Window, *, ask: bool
) -> Asking[FileContext]:
    """`base` with what the passages are made of: the voice of a note outside the owner's
    folders, then each chunk's statements, which name that voice; asked of the model when
    `ask` and not in `known`, else left out until they are."""
    chunks, personal, known, note = draft.chunks, draft.personal, draft.known, draft.note
    problems = list(base.problems)
    voice, voice_key = None, None
    if needs.asks_voice(personal):
        read = head(note, chunks)
        voice_key = needs.voice_key(read)
        voice = known.get(voice_key)
        if voice is None and ask:
            [answer] = yield [
                prompts.voice_prompt(
                    read.path, read.properties, read.excerpt, context_window=window.context
                )
            ]
            name, problem = voices.read_voice(answer, read)
            voice = Output(name, fallback=problem is not None)
            if problem:
                problems.append(f"voice: {problem}")
    date = spoken(note.date)
    said: list[Output | None] = [None] * len(chunks)
    keys: list[str | None] = [None] * len(chunks)
    if needs.settings.asks("statements") and (voice is not None or not needs.asks_voice(personal)):
        writer = needs.writer(personal, voice)
        keys = [needs.statements_key(c, writer, date) for c in chunks]
        said = [known.get(k) if k else None for k in keys]
        todo = [i for i, out in enumerate(said) if out is None] if ask else []
        if todo:
            answers = yield [_statements_prompt(chunks[i], writer, date, window) for i in todo]
            for i, answer in zip(todo, answers, strict=True):
                written = statements.read_statements(
                    answer, source=chunks[i].content, writer=writer, date=date
                )
                said[i] = Output(written.text, fallback=not written.kept)
                if not written.kept:
                    why = ", ".join(sorted(set(written.dropped))) or "none written"
                    problems.append(f"chunk {i + 1} statements: {why}")
    return replace(
        base,
        chunks=[_stated(c, out, key) for c, out, key in zip(base.chunks, said, keys, strict=True)],
        problems=problems,
        passages=note_passages(
            chunks, personal, voice, said, needs, window, title=note.title, date=date
        ),
        voice=voice,
        voice_key=voice_key,
    )


def _stated(chunk: ContextChunk, said: Output | None, key: str | None) -> ContextChunk:
    """`chunk` with its statements, which full-text search reads too when they are kept."""
    if said is None:
        return replace(chunk, statements=None, statements_key=None)
    kept = "" if said.fallback else said.text
    searched, weighed_from = with_statements(chunk.full_context, chunk.summaries_at, kept)
    return replace(
        chunk,
        statements=said,
        statements_key=key,
        full_context=searched,
        summaries_at=weighed_from,
    )


def note_passages(
    chunks: Sequence[Chunk],
    personal: bool,
    voice: Output | None,
    said: Sequence[Output | None],
    needs: Needs,
    window: Window,
    *,
    title: str,
    date: str | None,
) -> list[list[passages.Passage]]:
    """Each chunk's passages, fitted to the embedder's window: its paragraphs
    (`context.passages`) in the owner's voice in personal notes, else in the writer's the
    model named, else under the note's title, as written; then its statements."""
    writer = needs.writer(personal, voice)
    speaker = passages.Voice(writer, True, date) if writer else passages.Voice(title, False, date)
    out = []
    seen: set[str] = set()
    for chunk, written in zip(chunks, said, strict=True):
        found = (
            passages.chunk_passages(chunk.content, speaker, seen)
            if needs.settings.passages != "none"
            else []
        )
        if written is not None and not written.fallback:
            found += passages.statement_passages(written.text, start=len(found))
        out.append([replace(p, text=fit(p.text, window.embed)) for p in found])
    return out if any(out) else []


def _statements_prompt(
    chunk: Chunk, writer: str | None, date: str | None, window: Window
) -> Prompt:
    return prompts.statements_prompt(
        header_line(chunk.header_path),
        chunk.content,
        writer=writer,
        date=date,
        max_tokens=STATEMENT_TOKENS,
        context_window=window.context,
    )
