"""The summaries core: which summary prompts a note needs, and its context from their answers.

A note of up to `batch_chunks` chunks gets its file summary and its chunk summaries from one
call; a longer one gets its file summary from its first and last chunks, then its chunk
summaries `batch_chunks` at a time (so do the parts the note's call left out). A part that a
call of several answers unusably, or a batch leaves out, is asked again alone, as one chunk
prompt; only what fails alone falls back to structural context. In the owner's folders the
chunks are first rewritten in the third person, and summarised from the rewrite.

`summarize` is a generator (see kb.context.driver): it yields prompts and reads their
answers, and never waits on a model itself. With `context.summaries = "structure"` (title
and header path) or `"none"` (the chunk alone), `structural` asks nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kb.config import ContextConfig
from kb.context.driver import Asking
from kb.context.layout import header_line, plain_headers, sections, texts
from kb.context.needs import Needs
from kb.context.records import ContextChunk, Draft, FileContext, Window
from kb.hashes import cache_key
from kb.models.base import Prompt
from kb.prompting import outputs, prompts
from kb.prompting.outputs import Output
from kb.vault.chunking import Chunk

_SUMMARY_CHARS_PER_TOKEN = 6
# The problem of a part a several-part answer has no line for.
_NOT_WRITTEN = "not written"


@dataclass(frozen=True)
class _Part:
    """One chunk as the model reads it: its header line and its text, the rewrite if any."""

    index: int  # the chunk's place in the note
    header: str
    text: str

    @property
    def size(self) -> int:
        """Characters it takes in a prompt, with its tags."""
        return len(self.header) + len(self.text) + 24


@dataclass(frozen=True)
class _PartAnswer:
    """The model's summary of one part and why it is unusable, if it is; `alone` when the
    part was asked for by itself, so a failure is final rather than worth asking again."""

    part: _Part
    text: str
    problem: str | None
    alone: bool
    from_note: bool = False  # written (or not) by the call for the whole note


def summarize(draft: Draft, needs: Needs, window: Window) -> Asking[FileContext]:
    """Every chunk's context with the model's summaries, asking for what `known` (outputs
    already paid for, by cache key) lacks. The caller leaves out fallbacks made by another
    model, so those are asked again; the note's title and folder go into the structural
    context used when the model's output is unusable."""
    chunks, personal, known = draft.chunks, draft.personal, draft.known
    settings = needs.settings
    owner = needs.owner_for(personal)
    problems: list[str] = []

    # Rewrites first: the summaries are written from the rewritten text.
    rewritten: list[Output | None] = [None] * len(chunks)
    if needs.rewrites(personal):
        rewritten = yield from _rewrites(chunks, known, needs, window, problems)
    parts = [
        _Part(i, header_line(c.header_path), (t or Output(c.content)).text)
        for i, (c, t) in enumerate(zip(chunks, rewritten, strict=True))
    ]

    summary_keys = [needs.chunk_summary_key(c, personal) for c in chunks]
    written = _Settled(draft, [known.get(k) for k in summary_keys], problems)
    missing = [parts[i] for i, s in enumerate(written.summaries) if s is None]
    file_key = needs.file_summary_key(chunks, personal)
    file_summary = known.get(file_key)
    if file_summary is None:
        file_summary = yield from _file_summary(draft, needs, window, parts, missing, written)

    # The chunks the note's call did not cover (or left out: a model that lost the format
    # for a whole note keeps to it for a few parts), a few per call; they reach the server
    # back to back and share their cached prompt prefix up to the file summary. Then, alone,
    # the parts a call of several answered unusably.
    left = [p for p in missing if written.summaries[p.index] is None and p not in written.retry]
    batches = _batches(left, file_summary.text, owner, settings, window)
    yield from _ask(batches, file_summary.text, owner, settings, window, written)
    alone = [[part] for part in written.retry]
    written.retry.clear()
    yield from _ask(alone, file_summary.text, owner, settings, window, written)

    built = []
    for chunk, key, summary, own in zip(
        chunks, summary_keys, written.summaries, rewritten, strict=True
    ):
        assert summary is not None
        built.append(with_outputs(chunk, file_summary, summary, key, own, needs, window))
    return FileContext(
        summary=file_summary.text,
        summary_key=file_key,
        summary_fallback=file_summary.fallback,
        chunks=built,
        llm_calls=0,
        problems=problems,
    )


@dataclass
class _Settled:
    """A note's chunk summaries as answers settle them: each one written (the model's, or
    structural where its answer alone was unusable), or a part to ask again alone."""

    draft: Draft
    summaries: list[Output | None]
    problems: list[str]
    retry: list[_Part] = field(default_factory=list)

    def settle(self, answers: list[_PartAnswer]) -> None:
        for answer in answers:
            part, text, problem = answer.part, answer.text, answer.problem
            if problem == _NOT_WRITTEN and answer.from_note:
                continue  # left for the batches
            if problem and not answer.alone:
                self.retry.append(part)
                continue
            if problem:
                self.problems.append(f"chunk {part.index + 1} summary: {problem}")
                text = outputs.structural_chunk_summary(
                    self.draft.note.title, plain_headers(self.draft.chunks[part.index].header_path)
                )
            self.summaries[part.index] = Output(text, fallback=problem is not None)


def _file_summary(
    draft: Draft,
    needs: Needs,
    window: Window,
    parts: list[_Part],
    missing: list[_Part],
    written: _Settled,
) -> Asking[Output]:
    """The note's summary: from one call for the whole note (which summarises the `missing`
    parts too) where it fits, else, or when that call wrote none, from the first and last
    chunks; structural where the model's is unusable."""
    chunks, note, settings = draft.chunks, draft.note, needs.settings
    owner = needs.owner_for(draft.personal)
    answered: tuple[str, str | None] | None = None
    if missing and _note_fits(parts, len(missing), owner, settings, window):
        prompt = _note_prompt(parts, missing, owner, settings, window)
        [answer] = yield [prompt]
        answered, read = _read_note(answer, prompt, parts, missing, settings)
        written.settle(read)
    if answered is None or answered[1]:
        prompt = prompts.file_summary_prompt(
            needs.excerpts(chunks),
            owner=owner,
            max_tokens=settings.summary_max_tokens,
            context_window=window.context,
        )
        [answer] = yield [prompt]
        answered = _read_summary(answer, prompt)
    text, problem = answered
    if problem:
        written.problems.append(f"file summary: {problem}")
        text = outputs.structural_file_summary(
            note.title, note.folder, sections(chunks), owner, note.aliases
        )
    return Output(text, fallback=problem is not None)


def _ask(
    round_: list[list[_Part]],
    file_summary: str,
    owner: str | None,
    settings: ContextConfig,
    window: Window,
    written: _Settled,
) -> Asking[None]:
    """One round of part prompts, sent together, their answers settled."""
    if not round_:
        return
    asked = [_parts_prompt(file_summary, b, owner, settings, window) for b in round_]
    answers = yield asked
    for batch, prompt, answer in zip(round_, asked, answers, strict=True):
        written.settle(_read_parts_answer(answer, prompt, batch, settings))


def _rewrites(
    chunks: list[Chunk],
    known: Mapping[str, Output],
    needs: Needs,
    window: Window,
    problems: list[str],
) -> Asking[list[Output | None]]:
    """The owner's chunks in the third person: known, asked for, or (when the model's
    answer is unusable, noted in `problems`) rewritten by rule."""
    rewritten = [known_rewrite(c, known, needs) for c in chunks]
    todo = [i for i, t in enumerate(rewritten) if t is None]
    if not todo:
        return rewritten
    answers = yield [
        prompts.rewrite_prompt(chunks[i].content, owner=needs.owner, context_window=window.context)
        for i in todo
    ]
    for i, answer in zip(todo, answers, strict=True):
        text = outputs.clean_rewrite(answer)
        problem = outputs.rewrite_problem(text, chunks[i].content, needs.owner)
        if problem:
            problems.append(f"chunk {i + 1} rewrite: {problem}")
            text = outputs.owned_text(chunks[i].content, needs.owner)
        rewritten[i] = Output(text, fallback=problem is not None)
    return rewritten


def provisional(draft: Draft, needs: Needs, window: Window) -> FileContext:
    """Every chunk's context without asking the model: the outputs in `known` where they
    are, structural context (what `summaries = "structure"` writes) in place of the others,
    and the chunk as written where its rewrite is not known.

    What a note is searchable by until `summarize` adds the missing outputs. A stand-in is
    kept under the structure level's key, so it is never taken for a model's answer."""
    chunks, personal, known, note = draft.chunks, draft.personal, draft.known, draft.note
    owner = needs.owner_for(personal)
    file_key = needs.file_summary_key(chunks, personal)
    file_summary = known.get(file_key)
    if file_summary is None:
        stand_in = outputs.structural_file_summary(
            note.title, note.folder, sections(chunks), owner, note.aliases
        )
        file_summary, file_key = Output(stand_in), cache_key("structure", stand_in)
    built = []
    for chunk in chunks:
        rewritten = known_rewrite(chunk, known, needs) if needs.rewrites(personal) else None
        summary_key = needs.chunk_summary_key(chunk, personal)
        summary = known.get(summary_key)
        if summary is None:
            stand_in = outputs.structural_chunk_summary(
                note.title, plain_headers(chunk.header_path)
            )
            summary, summary_key = Output(stand_in), cache_key("structure", stand_in)
        built.append(
            with_outputs(chunk, file_summary, summary, summary_key, rewritten, needs, window)
        )
    return FileContext(file_summary.text, file_key, file_summary.fallback, built, 0, [])


def structural(draft: Draft, needs: Needs, window: Window) -> FileContext:
    """Context for `summaries = "structure"` (title and header path) or `"none"`; the
    structure level's too at the "llm" level when the model writes no summaries."""
    chunks, note = draft.chunks, draft.note
    settings = needs.settings
    mode = "structure" if settings.summaries == "llm" else settings.summaries
    structure = mode == "structure"
    file_summary = (
        outputs.structural_file_summary(
            note.title, note.folder, sections(chunks), needs.owner_for(draft.personal), note.aliases
        )
        if structure
        else ""
    )
    built = []
    for chunk in chunks:
        summary = (
            outputs.structural_chunk_summary(note.title, plain_headers(chunk.header_path))
            if structure
            else ""
        )
        searched = texts(
            file_summary,
            summary,
            header_line(chunk.header_path) if structure else "",
            chunk.content,
            weigh_summaries=False,
            window=window.embed,
        )
        # Keys of their own: an "llm" run never takes these for model answers.
        built.append(
            ContextChunk.of(
                chunk, searched, summary=Output(summary), summary_key=cache_key(mode, summary)
            )
        )
    return FileContext(file_summary, cache_key(mode, file_summary), False, built, 0, [])


def known_rewrite(chunk: Chunk, known: Mapping[str, Output], needs: Needs) -> Output | None:
    """A personal chunk's rewrite if it is known (None if it must be asked for); the chunk
    itself where the writer never says "I"."""
    if not outputs.needs_rewrite(chunk.content):
        return Output(chunk.content)
    return known.get(needs.rewrite_key(chunk))


def with_outputs(
    chunk: Chunk,
    file_summary: Output,
    summary: Output,
    summary_key: str,
    rewritten: Output | None,
    needs: Needs,
    window: Window,
) -> ContextChunk:
    """A chunk's context from its outputs (the rewrite, when the note has them)."""
    searched = texts(
        file_summary.text,
        summary.text,
        header_line(chunk.header_path),
        rewritten.text if rewritten else chunk.content,
        weigh_summaries=True,
        window=window.embed,
    )
    return ContextChunk.of(
        chunk,
        searched,
        summary=summary,
        summary_key=summary_key,
        rewritten=rewritten,
        rewrite_key=needs.rewrite_key(chunk),
    )


def _chunk_tokens(settings: ContextConfig) -> int:
    # A chunk summary is one or two sentences: a tighter cap stops a runaway sooner.
    return max(48, settings.summary_max_tokens * 3 // 5)


def _note_tokens(settings: ContextConfig, asked: int) -> int:
    return settings.summary_max_tokens + asked * _chunk_tokens(settings)


def _note_fits(
    parts: list[_Part], asked: int, owner: str | None, settings: ContextConfig, window: Window
) -> bool:
    """Whether one call can summarise the whole note and the `asked` parts of it."""
    if len(parts) > settings.batch_chunks or settings.batch_chunks < 2:
        return False
    budget = prompts.note_budget(
        owner=owner, max_tokens=_note_tokens(settings, asked), context_window=window.context
    )
    return sum(p.size for p in parts) <= budget


def _batches(
    parts: list[_Part],
    file_summary: str,
    owner: str | None,
    settings: ContextConfig,
    window: Window,
) -> list[list[_Part]]:
    """`parts` in order, cut into calls of at most `batch_chunks` parts that fit the window,
    as even in size as that allows (seven parts by six: four and three)."""
    if not parts:
        return []
    most = max(1, settings.batch_chunks)
    budget = prompts.parts_budget(
        file_summary,
        owner=owner,
        max_tokens=most * _chunk_tokens(settings),
        context_window=window.context,
    )
    count = -(-len(parts) // most)  # calls of at most `most` parts
    sizes = iter([len(parts) // count + (i < len(parts) % count) for i in range(count)])
    batches: list[list[_Part]] = []
    room = used = 0
    for part in parts:
        if room == 0 or used + part.size > budget:
            batches.append([])
            room, used = next(sizes, most), 0
        batches[-1].append(part)
        room, used = room - 1, used + part.size
    return batches


def _note_prompt(
    parts: list[_Part],
    asked: list[_Part],
    owner: str | None,
    settings: ContextConfig,
    window: Window,
) -> Prompt:
    """One call for the note's summary and the summaries of its `asked` parts."""
    return prompts.note_prompt(
        [(p.header, p.text) for p in parts],
        [parts.index(p) + 1 for p in asked],
        owner=owner,
        max_tokens=_note_tokens(settings, len(asked)),
        context_window=window.context,
    )


def _read_note(
    answer: str, prompt: Prompt, parts: list[_Part], asked: list[_Part], settings: ContextConfig
) -> tuple[tuple[str, str | None], list[_PartAnswer]]:
    """The note's summary (and why it is unusable, if it is) and its parts' answers."""
    numbers = [parts.index(p) + 1 for p in asked]
    note, written = outputs.split_parts(answer, len(parts))
    text = outputs.clean_summary(
        note, max_chars=settings.summary_max_tokens * _SUMMARY_CHARS_PER_TOKEN
    )
    parts_read = _read_parts(
        prompt, dict(zip(numbers, asked, strict=True)), written, settings, file_summary=text
    )
    return (text, outputs.summary_problem(text, prompt)), parts_read


def _parts_prompt(
    file_summary: str,
    batch: list[_Part],
    owner: str | None,
    settings: ContextConfig,
    window: Window,
) -> Prompt:
    """The summaries of `batch`: a chunk prompt for one part, a parts prompt for more."""
    if len(batch) == 1:
        [part] = batch
        return prompts.chunk_summary_prompt(
            file_summary,
            part.header,
            part.text,
            owner=owner,
            max_tokens=_chunk_tokens(settings),
            context_window=window.context,
        )
    return prompts.parts_prompt(
        file_summary,
        [(p.header, p.text) for p in batch],
        owner=owner,
        max_tokens=len(batch) * _chunk_tokens(settings),
        context_window=window.context,
    )


def _read_parts_answer(
    answer: str, prompt: Prompt, batch: list[_Part], settings: ContextConfig
) -> list[_PartAnswer]:
    if len(batch) == 1:
        text, problem = _read_summary(answer, prompt)
        return [_PartAnswer(batch[0], text, problem, alone=True)]
    _, written = outputs.split_parts(answer, len(batch))
    return _read_parts(prompt, dict(enumerate(batch, 1)), written, settings)


def _read_parts(
    prompt: Prompt,
    numbered: dict[int, _Part],
    written: Mapping[int, str],
    settings: ContextConfig,
    *,
    file_summary: str | None = None,
) -> list[_PartAnswer]:
    """Each asked part's summary out of a several-part answer, cleaned and checked;
    `file_summary` is the note's summary when the same answer wrote it."""
    max_chars = _chunk_tokens(settings) * _SUMMARY_CHARS_PER_TOKEN
    cleaned = {n: outputs.clean_summary(t, max_chars=max_chars) for n, t in written.items()}
    from_note = prompt.task == "note_summary"
    answers = []
    for n, part in numbered.items():
        text = cleaned.get(n)
        if text is None:
            answers.append(_PartAnswer(part, "", _NOT_WRITTEN, alone=False, from_note=from_note))
            continue
        others = [t for m, t in cleaned.items() if m != n]
        problem = outputs.summary_problem(
            text, prompt, source=part.text, file_summary=file_summary, others=others
        )
        answers.append(_PartAnswer(part, text, problem, alone=False, from_note=from_note))
    return answers


def _read_summary(answer: str, prompt: Prompt) -> tuple[str, str | None]:
    max_chars = prompt.max_tokens * _SUMMARY_CHARS_PER_TOKEN
    text = outputs.clean_summary(answer, max_chars=max_chars)
    return text, outputs.summary_problem(text, prompt)
