"""The writers core: whose voice a note speaks in, the lines the model writes of each chunk
(its statements, the questions it answers), and the passages made of them (each a vector of
its own).

Outside the owner's folders the model names the note's writer once (kb.context.voices); each
chunk's lines of every kind asked for are then written knowing who "I" is and the note's date, one
prompt per chunk and kind (kb.context.chunk_writes); the paragraphs of a chunk speak in that voice
(kb.context.passage_texts). Like kb.context.summaries, `with_note_outputs` yields its prompts and
never waits on a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kb.config import ChunkWrite
from kb.context import chunk_writes, passage_texts, voices
from kb.context.chunk_writes import ChunkWriteSpec
from kb.context.driver import Asking
from kb.context.layout import fit, header_line, with_lines
from kb.context.needs import Needs, head
from kb.context.records import ChunkLines, ContextChunk, Draft, FileContext, NamedVoice, Window
from kb.dates import spoken
from kb.models.base import Prompt
from kb.prompting import prompts
from kb.prompting.outputs import Output
from kb.vault.chunking import Chunk


def note_voice(draft: Draft, needs: Needs, window: Window) -> Asking[NamedVoice]:
    """The writer of a note outside the owner's folders, asked of the model when `known`
    lacks it. It comes first, on its own: the keys of the chunks' lines name it, so only once
    it is known can the cache be asked for them."""
    if not needs.asks_voice(draft.personal):
        return NamedVoice()
    read = head(draft.note, draft.chunks)
    key = needs.voice_key(read)
    if key in draft.known:
        return NamedVoice()
    [answer] = yield [
        prompts.voice_prompt(
            read.path, read.properties, read.excerpt, context_window=window.context
        )
    ]
    name, problem = voices.read_voice(answer, read)
    return NamedVoice(
        {key: Output(name, fallback=problem is not None)},
        [f"voice: {problem}"] if problem else [],
    )


def with_note_outputs(
    base: FileContext, draft: Draft, needs: Needs, window: Window, *, ask: bool
) -> Asking[FileContext]:
    """`base` with what the passages are made of: the voice of a note outside the owner's
    folders (from `known`: see `note_voice`), then each chunk's lines of every kind asked
    for (statements, questions), which name that voice; asked of the model when `ask` and
    not in `known`, else left out until they are."""
    chunks, personal, known, note = draft.chunks, draft.personal, draft.known, draft.note
    problems = list(base.problems)
    voice, voice_key = None, None
    if needs.asks_voice(personal):
        voice_key = needs.voice_key(head(note, chunks))
        voice = known.get(voice_key)
        before = draft.voice_before
        if voice is None and not ask and before and (stand_in := needs.stand_in(before)):
            # Stored again under the key it was named for, it stays a stand-in.
            voice, voice_key = stand_in, before.key
    date = spoken(note.date)
    specs = needs.line_specs()
    found: dict[tuple[int, ChunkWrite], ChunkLines] = {}
    if specs and (voice is not None or not needs.asks_voice(personal)):
        writer = needs.writer(personal, voice)
        todo: list[tuple[ChunkWriteSpec, int, str]] = []
        for spec in specs:
            for i, chunk in enumerate(chunks):
                key = needs.lines_key(spec, chunk, writer, date)
                if (out := known.get(key)) is not None:
                    again = chunk_writes.read_again(
                        out, spec, source=chunk.content, writer=writer, date=date
                    )
                    found[(i, spec.kind)] = ChunkLines(spec.kind, again, key)
                elif ask:
                    todo.append((spec, i, key))
        if todo:
            # Every kind's prompts in one batch: a chunk's statements and its questions are
            # asked side by side, not one kind after the other.
            answers = yield [_lines_prompt(s, chunks[i], writer, date, window) for s, i, _ in todo]
            for (spec, i, key), answer in zip(todo, answers, strict=True):
                written = chunk_writes.read_lines(
                    answer, spec, source=chunks[i].content, writer=writer, date=date
                )
                out = Output(written.text, fallback=not written.kept)
                found[(i, spec.kind)] = ChunkLines(spec.kind, out, key)
                if not written.kept:
                    why = ", ".join(sorted(set(written.dropped))) or "none written"
                    problems.append(f"chunk {i + 1} {spec.kind}: {why}")
    # Each chunk's kinds in one order, whether found in the cache or asked for.
    lines = [
        tuple(found[(i, s.kind)] for s in specs if (i, s.kind) in found) for i in range(len(chunks))
    ]
    return replace(
        base,
        chunks=[_with_lines(c, w) for c, w in zip(base.chunks, lines, strict=True)],
        problems=problems,
        passages=note_passages(
            chunks, personal, voice, lines, needs, window, title=note.title, date=date
        ),
        voice=voice,
        voice_key=voice_key,
    )


def _with_lines(chunk: ContextChunk, lines: tuple[ChunkLines, ...]) -> ContextChunk:
    """`chunk` with the lines the model wrote of it, which full-text search reads too when
    they are kept."""
    kept = [w.output.text for w in lines if not w.output.fallback]
    searched, weighed_from = with_lines(chunk.full_context, chunk.summaries_at, kept)
    return replace(chunk, lines=lines, full_context=searched, summaries_at=weighed_from)


def note_passages(
    chunks: Sequence[Chunk],
    personal: bool,
    voice: Output | None,
    lines: Sequence[Sequence[ChunkLines]],
    needs: Needs,
    window: Window,
    *,
    title: str,
    date: str | None,
) -> list[list[passage_texts.Passage]]:
    """Each chunk's passages, fitted to the embedder's window: its paragraphs
    (`context.passages`) in the owner's voice in personal notes, else in the writer's the
    model named, else under the note's title, as written; then the lines the model wrote of
    it (statements, questions), but for an answer that fell back."""
    writer = needs.writer(personal, voice)
    speaker = (
        passage_texts.Voice(writer, True, date)
        if writer
        else passage_texts.Voice(title, False, date)
    )
    out = []
    seen: set[str] = set()
    for chunk, written in zip(chunks, lines, strict=True):
        found = (
            passage_texts.chunk_passages(chunk.content, speaker, seen)
            if needs.settings.passages != "none"
            else []
        )
        for w in written:
            if not w.output.fallback:
                kind = chunk_writes.SPECS[w.kind].passage
                found += passage_texts.line_passages(w.output.text, kind, start=len(found))
        out.append([replace(p, text=fit(p.text, window.embed)) for p in found])
    return out if any(out) else []


def _lines_prompt(
    spec: ChunkWriteSpec, chunk: Chunk, writer: str | None, date: str | None, window: Window
) -> Prompt:
    return prompts.lines_prompt(
        spec.kind,
        header_line(chunk.header_path),
        chunk.content,
        writer=writer,
        date=date,
        max_tokens=spec.max_tokens,
        context_window=window.context,
    )
