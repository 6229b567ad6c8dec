"""Write each chunk's context: file summary, chunk summary, first-person rewrite.

Every LLM output is cached under a key that hashes exactly its inputs and the
prompt version, so a run only asks for what is new:

- the file summary depends on the first and last chunks only, so editing the
  middle of a note keeps it;
- a chunk summary depends on its own chunk and header path, not on the file
  summary, so a new file summary does not redo every chunk summary;
- the rewrite depends on the chunk and the owner's name.

One call may write several of them (a short note's file and chunk summaries, or a few chunk
summaries of a longer one: see `Contextualizer.build`); each is still checked, and cached,
on its own.

`full_context` is then assembled from those parts and the chunk; that is what gets
embedded. With `context.summaries = "structure"` (title and header path) or `"none"` (the
chunk alone) no model is asked at all.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any

from kb import outputs, passages, prompts, statements, tokens, voices
from kb.chunking import CHUNKER_VERSION, Chunk
from kb.config import Config, ContextConfig
from kb.llm import embed_window
from kb.llm.base import ChatModel, Prompt
from kb.outputs import Output
from kb.store.documents import VoiceRecord

_SUMMARY_CHARS_PER_TOKEN = 6
# A dozen statements of twenty-odd tokens: room to finish, and a runaway stops soon.
_STATEMENT_TOKENS = 320


def cache_key(*parts: str) -> str:
    """A hash of exactly these parts, in order: the key every cached model output is kept under."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\x1f")
    return digest.hexdigest()


def header_line(header_path: tuple[str, ...]) -> str:
    return " > ".join(header_path)


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
    # weigh them less than the chunk's own words (see summaries_start); None: it weighs all.
    summaries_at: int | None
    embed_text: str  # what the embedder reads: full_context fitted to its window
    # The model's statements of the chunk, one a line (kb.statements), when asked for and
    # known; each is a passage of its own.
    statements: Output | None = None
    statements_key: str | None = None

    @property
    def context_hash(self) -> str:
        return hashlib.sha256(self.embed_text.encode()).hexdigest()


@dataclass(frozen=True)
class FileContext:
    summary: str
    summary_key: str
    summary_fallback: bool
    chunks: list[ContextChunk]
    llm_calls: int
    # Outputs rejected in this build, e.g. "chunk 3 summary: echo of the note".
    problems: list[str]
    # Each chunk's passages (`context.passages`), as the embedder reads them.
    passages: list[list[passages.Passage]] = field(default_factory=list)
    # The writer the model named (kb.voices), when it was asked and its answer is known.
    voice: Output | None = None
    voice_key: str | None = None

    def voice_row(self, chat_model: str) -> VoiceRecord | None:
        """The voice as stored with the note, when the model was asked for one."""
        if self.voice is None or self.voice_key is None:
            return None
        return VoiceRecord(
            self.voice.text, self.voice_key, chat_model if self.voice.fallback else None
        )


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


# Bump when full_context's layout changes: every note's context is then rebuilt from cached
# model answers (see ContextBuild.id).
# 5: notes are stored with their own dates (kb.passages.note_day).
LAYOUT_VERSION = "5"


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
        mode = self.settings.summaries
        parts = [
            f"{CHUNKER_VERSION}:{self.chunk_chars}",
            mode,
            LAYOUT_VERSION,
            str(self.embed_window),
        ]
        if self.settings.asks("summaries"):
            # The file summary is written from these chunks (see Contextualizer.excerpts).
            first, last = self.settings.first_chunks, self.settings.last_chunks
            parts.append(f"prompts{prompts.PROMPT_VERSION}:{first}+{last}")
        if self.settings.passages != "none":
            parts.append(passages.build_id())
        if self.settings.asks("statements"):
            parts.append(f"statements{prompts.STATEMENTS_VERSION}")
        if not personal and self.settings.names_writers():
            parts.append(f"voice{prompts.VOICE_VERSION}")
        if personal and (mode != "none" or self.settings.passages != "none"):
            # Hashed: an id names the name's version, it need not spell it.
            parts.append(f"owner:{cache_key(self.owner)[:12]}")
            if self.settings.asks("summaries"):
                rewrite = self.settings.rewrite_personal
                parts.append(f"rewrite{prompts.REWRITE_VERSION}" if rewrite else "as-written")
        return "/".join(parts)


def full_context(file_summary: str, chunk_summary: str, header_path: str, content: str) -> str:
    """What is searched as text, and embedded as far as it fits: the chunk first, then what
    places it.

    Plain text, in this order, because a small embedder averages over every token it reads
    and reads only the first few hundred: markup tags would be averaged in, and a long chunk
    behind a paragraph of summaries would lose its end. Empty parts are left out.
    """
    return "\n\n".join(part for part in (header_path, content, chunk_summary, file_summary) if part)


def summaries_start(header_path: str, content: str) -> int:
    """Where the summaries begin in a full_context of this header path and chunk.

    Full-text search counts the words after it for less than the chunk's own (migration
    013): a summary says, in a few common words, what every chunk of its note is about, and
    at full weight those words outranked the one chunk whose own words answer the question.
    """
    return len(full_context("", "", header_path, content))


def fit(context: str, window: int) -> str:
    """`context` as the embedder reads it: whole if its estimate is within `window` tokens,
    else cut there, so what is stored as embedded is what the model saw. Parts are
    joined in order of importance, so a cut drops the file summary first."""
    return context if tokens.estimate(context) <= window else tokens.cut(context, window)


class Contextualizer:
    """Turns a note's chunks into ContextChunks, asking the chat model only for what is missing.

    Cache keys leave the model out: switching models keeps every good output, and only
    the outputs that fell back are asked again (see `known` in `build`).
    """

    def __init__(
        self,
        chat: ChatModel,
        settings: ContextConfig,
        *,
        owner: str,
        context_window: int,
        embed_window: int,
        chunk_chars: int,
        executor: Executor,
    ) -> None:
        self.chat = chat
        self.settings = settings
        # The chunks a context is built on: other chunks need other contexts.
        self.chunk_chars = chunk_chars
        self.owner = owner
        self.context_window = context_window
        # Tokens of a document the embedder reads, after its document prefix.
        self.embed_window = embed_window
        self.executor = executor

    @classmethod
    def for_config(cls, chat: ChatModel, config: Config, executor: Executor) -> Contextualizer:
        """The contextualizer a config asks for: the indexer's and enrichment's must be the
        same, or a note one stores would look built another way to the other."""
        build = ContextBuild.of(config)
        return cls(
            chat,
            build.settings,
            owner=build.owner,
            context_window=config.llm.context_window,
            embed_window=build.embed_window,
            chunk_chars=build.chunk_chars,
            executor=executor,
        )

    def build_id(self, personal: bool) -> str:
        """How a note's chunks and contexts are made now (see ContextBuild.id)."""
        build = ContextBuild(
            self.settings,
            chunk_chars=self.chunk_chars,
            embed_window=self.embed_window,
            owner=self.owner,
        )
        return build.id(personal)

    def _owner_for(self, personal: bool) -> str | None:
        return self.owner if personal else None

    def _rewrites(self, personal: bool) -> bool:
        return personal and self.settings.rewrite_personal and self.settings.asks("summaries")

    def _asks_voice(self, personal: bool) -> bool:
        """Whether the model names this note's writer (see ContextConfig.names_writers)."""
        return not personal and self.settings.names_writers()

    def voice_key(self, head: voices.NoteHead) -> str:
        return cache_key("voice", prompts.VOICE_VERSION, head.path, head.properties, head.excerpt)

    def statements_key(self, chunk: Chunk, writer: str | None, date: str | None) -> str:
        """A chunk's statements depend on its text, its header path, who "I" is and the
        note's date: a rename, or an edit elsewhere in the note, keeps them."""
        return cache_key(
            "statements",
            prompts.STATEMENTS_VERSION,
            writer or "",
            date or "",
            header_line(chunk.header_path),
            chunk.content,
        )

    def _writer(self, personal: bool, voice: Output | None) -> str | None:
        """Who the note's "I" is: the owner in the owner's folders, else the writer the
        model named (None when it named no one, or its answer was rejected)."""
        if personal:
            return self.owner
        if voice is None or voice.fallback or not voice.text:
            return None
        return voice.text

    def excerpts(self, chunks: list[Chunk]) -> list[str]:
        """The chunks the file summary is written from: the first N and the last N."""
        n_first, n_last = self.settings.first_chunks, self.settings.last_chunks
        if len(chunks) <= n_first + n_last:
            picked = chunks
        else:
            picked = chunks[:n_first] + (chunks[-n_last:] if n_last else [])
        return [c.content for c in picked]

    def file_summary_key(self, chunks: list[Chunk], personal: bool) -> str:
        return cache_key(
            "file", prompts.PROMPT_VERSION, self._owner_for(personal) or "", *self.excerpts(chunks)
        )

    def rewrite_key(self, chunk: Chunk) -> str:
        return cache_key("rewrite", prompts.REWRITE_VERSION, self.owner, chunk.content)

    def chunk_summary_key(self, chunk: Chunk, personal: bool) -> str:
        return cache_key(
            "chunk",
            prompts.PROMPT_VERSION,
            self._owner_for(personal) or "",
            str(self._rewrites(personal)),
            header_line(chunk.header_path),
            chunk.content,
        )

    def keys(
        self,
        chunks: list[Chunk],
        personal: bool,
        *,
        path: str = "",
        metadata: Mapping[str, Any] | None = None,
        known: Mapping[str, Output] | None = None,
    ) -> list[str]:
        """The cache keys a note needs, so the caller can fetch known outputs in one go.

        The statements' keys name the note's writer, which the model may yet have to name:
        they are listed only once the voice is in `known` (see `gather`)."""
        keys: list[str] = []
        if not chunks:
            return keys
        if self.settings.asks("summaries"):
            keys.append(self.file_summary_key(chunks, personal))
            for chunk in chunks:
                keys.append(self.chunk_summary_key(chunk, personal))
                if self._rewrites(personal):
                    keys.append(self.rewrite_key(chunk))
        voice: Output | None = None
        if self._asks_voice(personal):
            key = self.voice_key(_head(path, metadata, chunks))
            keys.append(key)
            voice = (known or {}).get(key)
            if voice is None:
                return keys
        if self.settings.asks("statements"):
            writer = self._writer(personal, voice)
            date = passages.note_date(metadata or {}, path)
            keys += [self.statements_key(c, writer, date) for c in chunks]
        return keys

    def gather(
        self,
        chunks: list[Chunk],
        personal: bool,
        lookup: Callable[[list[str]], dict[str, Output]],
        *,
        path: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> tuple[dict[str, Output], bool]:
        """The outputs already paid for that a note needs, read through `lookup` (the
        cache), and whether they are all there. The statements' keys follow from the
        voice, so a second read looks for them once the first found it."""
        keys = self.keys(chunks, personal, path=path, metadata=metadata)
        known = lookup(keys) if keys else {}
        needed = self.keys(chunks, personal, path=path, metadata=metadata, known=known)
        more = sorted(set(needed) - set(keys))
        if more:
            known |= lookup(more)
        return known, known.keys() >= set(needed) and needed == self.keys(
            chunks, personal, path=path, metadata=metadata, known=known
        )

    def build(
        self,
        chunks: list[Chunk],
        personal: bool,
        known: Mapping[str, Output],
        *,
        title: str,
        folder: str = "",
        path: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> FileContext:
        """Context for every chunk, and its passages, asking the model for what `known`
        (outputs already paid for, by cache key) lacks: the summaries (see `_summarized`),
        the voice of a note outside the owner's folders and each chunk's statements."""
        if not chunks:
            return FileContext("", "", False, [], 0, [])
        if self.settings.asks("summaries"):
            base = self._summarized(chunks, personal, known, title=title, folder=folder)
        else:
            base = self._without_llm(chunks, personal, title=title, folder=folder)
        return self._with_note_outputs(
            base, chunks, personal, known, ask=True, title=title, path=path, metadata=metadata
        )

    def _summarized(
        self,
        chunks: list[Chunk],
        personal: bool,
        known: Mapping[str, Output],
        *,
        title: str,
        folder: str,
    ) -> FileContext:
        """Every chunk's context with the model's summaries.

        `known` maps cache keys to outputs already paid for. The caller leaves out
        fallbacks made by another model, so those are asked again; `title` and `folder`
        go into the structural context used when the model's output is unusable.

        A note of up to `batch_chunks` chunks gets its file summary and its chunk summaries
        from one call; a longer one gets its file summary from its first and last chunks,
        then its chunk summaries `batch_chunks` at a time (so do the parts the note's call
        left out). A part that a call of several answers unusably, or a batch leaves out, is
        asked again alone, as one chunk prompt; only what fails alone falls back to
        structural context.
        """
        owner = self._owner_for(personal)
        problems: list[str] = []
        calls = 0

        # Rewrites first: the summaries are written from the rewritten text.
        texts: list[Output | None] = [None] * len(chunks)
        if self._rewrites(personal):
            texts = [self._known_rewrite(c, known) for c in chunks]
            todo = [i for i, t in enumerate(texts) if t is None]
            results = self.executor.map(self._rewrite, [chunks[i].content for i in todo])
            for i, (text, problem) in zip(todo, results, strict=True):
                calls += 1
                if problem:
                    problems.append(f"chunk {i + 1} rewrite: {problem}")
                    text = outputs.owned_text(chunks[i].content, self.owner)
                texts[i] = Output(text, fallback=problem is not None)
        parts = [
            _Part(i, header_line(c.header_path), (t or Output(c.content)).text)
            for i, (c, t) in enumerate(zip(chunks, texts, strict=True))
        ]

        summary_keys = [self.chunk_summary_key(c, personal) for c in chunks]
        summaries: list[Output | None] = [known.get(k) for k in summary_keys]
        missing = [parts[i] for i, s in enumerate(summaries) if s is None]
        retry: list[_Part] = []

        def settle(answers: list[_PartAnswer]) -> None:
            for answer in answers:
                part, text, problem = answer.part, answer.text, answer.problem
                if problem == _NOT_WRITTEN and answer.from_note:
                    continue  # left for the batches below
                if problem and not answer.alone:
                    retry.append(part)
                    continue
                if problem:
                    problems.append(f"chunk {part.index + 1} summary: {problem}")
                    text = outputs.structural_chunk_summary(
                        title, _plain_headers(chunks[part.index].header_path)
                    )
                summaries[part.index] = Output(text, fallback=problem is not None)

        file_key = self.file_summary_key(chunks, personal)
        file_summary = known.get(file_key)
        if file_summary is None:
            note: tuple[str, str | None] | None = None
            if missing and self._note_fits(parts, len(missing), owner):
                # Through the pool, so every LLM call counts against the concurrency limit.
                note, answers = self.executor.submit(
                    self._note_summaries, parts, missing, owner
                ).result()
                calls += 1
                settle(answers)
            if note is None or note[1]:
                # The note's own call wrote no usable summary of it (or there was none):
                # the file summary prompt, which reads the first and last chunks.
                prompt = prompts.file_summary_prompt(
                    self.excerpts(chunks),
                    owner=owner,
                    max_tokens=self.settings.summary_max_tokens,
                    context_window=self.context_window,
                )
                note = self.executor.submit(self._summary, prompt).result()
                calls += 1
            text, problem = note
            if problem:
                problems.append(f"file summary: {problem}")
                text = outputs.structural_file_summary(title, folder, _sections(chunks), owner)
            file_summary = Output(text, fallback=problem is not None)

        # The chunks the note's call did not cover (or left out: a model that lost the format
        # for a whole note keeps to it for a few parts), a few per call; they reach the server
        # back to back and share their cached prompt prefix up to the file summary.
        batches = self._batches(
            [p for p in missing if summaries[p.index] is None and p not in retry],
            file_summary.text,
            owner,
        )
        for answers in self.executor.map(
            functools.partial(self._part_summaries, file_summary.text, owner=owner), batches
        ):
            calls += 1
            settle(answers)
        alone = [[part] for part in retry]
        retry.clear()
        for answers in self.executor.map(
            functools.partial(self._part_summaries, file_summary.text, owner=owner), alone
        ):
            calls += 1
            settle(answers)

        built = []
        for chunk, key, summary, rewritten in zip(
            chunks, summary_keys, summaries, texts, strict=True
        ):
            assert summary is not None
            built.append(self._with_outputs(chunk, file_summary, summary, key, rewritten))
        return FileContext(
            summary=file_summary.text,
            summary_key=file_key,
            summary_fallback=file_summary.fallback,
            chunks=built,
            llm_calls=calls,
            problems=problems,
        )

    @property
    def _chunk_tokens(self) -> int:
        # A chunk summary is one or two sentences: a tighter cap stops a runaway sooner.
        return max(48, self.settings.summary_max_tokens * 3 // 5)

    def _note_tokens(self, asked: int) -> int:
        return self.settings.summary_max_tokens + asked * self._chunk_tokens

    def _note_fits(self, parts: list[_Part], asked: int, owner: str | None) -> bool:
        """Whether one call can summarise the whole note and the `asked` parts of it."""
        if len(parts) > self.settings.batch_chunks or self.settings.batch_chunks < 2:
            return False
        budget = prompts.note_budget(
            owner=owner, max_tokens=self._note_tokens(asked), context_window=self.context_window
        )
        return sum(p.size for p in parts) <= budget

    def _batches(
        self, parts: list[_Part], file_summary: str, owner: str | None
    ) -> list[list[_Part]]:
        """`parts` in order, cut into calls of at most `batch_chunks` parts that fit the
        window, as even in size as that allows (seven parts by six: four and three)."""
        most = max(1, self.settings.batch_chunks)
        budget = prompts.parts_budget(
            file_summary,
            owner=owner,
            max_tokens=most * self._chunk_tokens,
            context_window=self.context_window,
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

    def _note_summaries(
        self, parts: list[_Part], asked: list[_Part], owner: str | None
    ) -> tuple[tuple[str, str | None], list[_PartAnswer]]:
        """One call for the note's summary and the summaries of its `asked` parts."""
        numbers = [parts.index(p) + 1 for p in asked]
        prompt = prompts.note_prompt(
            [(p.header, p.text) for p in parts],
            numbers,
            owner=owner,
            max_tokens=self._note_tokens(len(asked)),
            context_window=self.context_window,
        )
        answer = self.chat.complete(prompt)
        note, written = outputs.split_parts(answer, len(parts))
        text = outputs.clean_summary(
            note, max_chars=self.settings.summary_max_tokens * _SUMMARY_CHARS_PER_TOKEN
        )
        parts_read = self._read_parts(
            prompt, dict(zip(numbers, asked, strict=True)), written, file_summary=text
        )
        return (text, outputs.summary_problem(text, prompt)), parts_read

    def _part_summaries(
        self, file_summary: str, batch: list[_Part], *, owner: str | None
    ) -> list[_PartAnswer]:
        """The summaries of `batch`: a chunk prompt for one part, a parts prompt for more."""
        if len(batch) == 1:
            [part] = batch
            prompt = prompts.chunk_summary_prompt(
                file_summary,
                part.header,
                part.text,
                owner=owner,
                max_tokens=self._chunk_tokens,
                context_window=self.context_window,
            )
            text, problem = self._summary(prompt)
            return [_PartAnswer(part, text, problem, alone=True)]
        prompt = prompts.parts_prompt(
            file_summary,
            [(p.header, p.text) for p in batch],
            owner=owner,
            max_tokens=len(batch) * self._chunk_tokens,
            context_window=self.context_window,
        )
        _, written = outputs.split_parts(self.chat.complete(prompt), len(batch))
        return self._read_parts(prompt, dict(enumerate(batch, 1)), written)

    def _read_parts(
        self,
        prompt: Prompt,
        numbered: dict[int, _Part],
        written: Mapping[int, str],
        *,
        file_summary: str | None = None,
    ) -> list[_PartAnswer]:
        """Each asked part's summary out of a several-part answer, cleaned and checked;
        `file_summary` is the note's summary when the same answer wrote it."""
        max_chars = self._chunk_tokens * _SUMMARY_CHARS_PER_TOKEN
        cleaned = {n: outputs.clean_summary(t, max_chars=max_chars) for n, t in written.items()}
        from_note = prompt.task == "note_summary"
        answers = []
        for n, part in numbered.items():
            text = cleaned.get(n)
            if text is None:
                answers.append(
                    _PartAnswer(part, "", _NOT_WRITTEN, alone=False, from_note=from_note)
                )
                continue
            others = [t for m, t in cleaned.items() if m != n]
            problem = outputs.summary_problem(
                text, prompt, source=part.text, file_summary=file_summary, others=others
            )
            answers.append(_PartAnswer(part, text, problem, alone=False, from_note=from_note))
        return answers

    def _without_llm(
        self, chunks: list[Chunk], personal: bool, *, title: str, folder: str
    ) -> FileContext:
        """Context for `summaries = "structure"` (title and header path) or `"none"`; the
        structure level's too at the "llm" level when the model writes no summaries."""
        mode = "structure" if self.settings.summaries == "llm" else self.settings.summaries
        structure = mode == "structure"
        file_summary = (
            outputs.structural_file_summary(
                title, folder, _sections(chunks), self._owner_for(personal)
            )
            if structure
            else ""
        )
        built = []
        for chunk in chunks:
            summary = (
                outputs.structural_chunk_summary(title, _plain_headers(chunk.header_path))
                if structure
                else ""
            )
            built.append(
                ContextChunk(
                    chunk=chunk,
                    summary=summary,
                    # Keys of their own: an "llm" run never takes these for model answers.
                    summary_key=cache_key(mode, summary),
                    summary_fallback=False,
                    rewrite=None,
                    rewrite_key=None,
                    rewrite_fallback=False,
                    **self._contexts(
                        file_summary,
                        summary,
                        header_line(chunk.header_path) if structure else "",
                        chunk.content,
                        weigh_summaries=False,
                    ),
                )
            )
        return FileContext(file_summary, cache_key(mode, file_summary), False, built, 0, [])

    def provisional(
        self,
        chunks: list[Chunk],
        personal: bool,
        known: Mapping[str, Output],
        *,
        title: str,
        folder: str = "",
        path: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> FileContext:
        """Context for every chunk without asking the model: the outputs in `known` where
        they are, structural context (what `summaries = "structure"` writes) in place of the
        others, and the chunk as written where its rewrite is not known.

        What a note is searchable by until `build` adds the missing outputs. The outputs
        already paid for stay in its rows, where `build` finds them again; a stand-in is
        kept under the structure level's key, so it is never taken for a model's answer.
        """
        if not chunks:
            return FileContext("", "", False, [], 0, [])
        if not self.settings.asks("summaries"):
            base = self._without_llm(chunks, personal, title=title, folder=folder)
            return self._with_note_outputs(
                base, chunks, personal, known, ask=False, title=title, path=path, metadata=metadata
            )
        owner = self._owner_for(personal)
        file_key = self.file_summary_key(chunks, personal)
        file_summary = known.get(file_key)
        if file_summary is None:
            stand_in = outputs.structural_file_summary(title, folder, _sections(chunks), owner)
            file_summary, file_key = Output(stand_in), cache_key("structure", stand_in)
        built = []
        for chunk in chunks:
            rewritten = self._known_rewrite(chunk, known) if self._rewrites(personal) else None
            summary_key = self.chunk_summary_key(chunk, personal)
            summary = known.get(summary_key)
            if summary is None:
                stand_in = outputs.structural_chunk_summary(
                    title, _plain_headers(chunk.header_path)
                )
                summary, summary_key = Output(stand_in), cache_key("structure", stand_in)
            built.append(self._with_outputs(chunk, file_summary, summary, summary_key, rewritten))
        base = FileContext(file_summary.text, file_key, file_summary.fallback, built, 0, [])
        return self._with_note_outputs(
            base, chunks, personal, known, ask=False, title=title, path=path, metadata=metadata
        )

    def _known_rewrite(self, chunk: Chunk, known: Mapping[str, Output]) -> Output | None:
        """A personal chunk's rewrite if it is known (None if it must be asked for); the
        chunk itself where the writer never says "I"."""
        if not outputs.needs_rewrite(chunk.content):
            return Output(chunk.content)
        return known.get(self.rewrite_key(chunk))

    def _with_outputs(
        self,
        chunk: Chunk,
        file_summary: Output,
        summary: Output,
        summary_key: str,
        rewritten: Output | None,
    ) -> ContextChunk:
        """A chunk's context from its outputs (the rewrite, when the note has them)."""
        return ContextChunk(
            chunk=chunk,
            summary=summary.text,
            summary_key=summary_key,
            summary_fallback=summary.fallback,
            rewrite=rewritten.text if rewritten else None,
            rewrite_key=self.rewrite_key(chunk) if rewritten else None,
            rewrite_fallback=rewritten.fallback if rewritten else False,
            **self._contexts(
                file_summary.text,
                summary.text,
                header_line(chunk.header_path),
                rewritten.text if rewritten else chunk.content,
                weigh_summaries=True,
            ),
        )

    def _contexts(
        self,
        file_summary: str,
        chunk_summary: str,
        header_path: str,
        content: str,
        *,
        weigh_summaries: bool,
    ) -> dict[str, Any]:
        """The texts a chunk is searched by. With LLM context (`weigh_summaries`), its
        summaries count for less in full-text search, whoever wrote them: the model, or the
        structural stand-ins of a note still waiting for it. The structure level's own
        summaries (title, folder, headings) count in full: measured, weighing them less
        found nothing more."""
        whole = full_context(file_summary, chunk_summary, header_path, content)
        return {
            "full_context": whole,
            "summaries_at": summaries_start(header_path, content) if weigh_summaries else None,
            "embed_text": fit(whole, self.embed_window),
        }

    def _summary(self, prompt: Prompt) -> tuple[str, str | None]:
        max_chars = prompt.max_tokens * _SUMMARY_CHARS_PER_TOKEN
        text = outputs.clean_summary(self.chat.complete(prompt), max_chars=max_chars)
        return text, outputs.summary_problem(text, prompt)

    def _voice(self, head: voices.NoteHead) -> tuple[str, str | None]:
        prompt = prompts.voice_prompt(
            head.path, head.properties, head.excerpt, context_window=self.context_window
        )
        return voices.read_voice(self.chat.complete(prompt), head)

    def _with_note_outputs(
        self,
        base: FileContext,
        chunks: list[Chunk],
        personal: bool,
        known: Mapping[str, Output],
        *,
        ask: bool,
        title: str,
        path: str,
        metadata: Mapping[str, Any] | None,
    ) -> FileContext:
        """`base` with what the passages are made of: the voice of a note outside the
        owner's folders, then each chunk's statements, which name that voice; asked of the
        model when `ask` and not in `known`, else left out until they are."""
        calls = 0
        problems = list(base.problems)
        voice, voice_key = None, None
        if self._asks_voice(personal):
            head = _head(path, metadata, chunks)
            voice_key = self.voice_key(head)
            voice = known.get(voice_key)
            if voice is None and ask:
                # Through the pool, so every LLM call counts against the concurrency limit.
                name, problem = self.executor.submit(self._voice, head).result()
                voice, calls = Output(name, fallback=problem is not None), 1
                if problem:
                    problems.append(f"voice: {problem}")
        date = passages.note_date(metadata or {}, path)
        said: list[Output | None] = [None] * len(chunks)
        keys: list[str | None] = [None] * len(chunks)
        if self.settings.asks("statements") and (
            voice is not None or not self._asks_voice(personal)
        ):
            writer = self._writer(personal, voice)
            keys = [self.statements_key(c, writer, date) for c in chunks]
            said = [known.get(k) if k else None for k in keys]
            todo = [i for i, out in enumerate(said) if out is None] if ask else []
            written = self.executor.map(
                functools.partial(self._statements, writer=writer, date=date),
                [chunks[i] for i in todo],
            )
            for i, result in zip(todo, written, strict=True):
                calls += 1
                said[i] = Output(result.text, fallback=not result.kept)
                if not result.kept:
                    why = ", ".join(sorted(set(result.dropped))) or "none written"
                    problems.append(f"chunk {i + 1} statements: {why}")
        return replace(
            base,
            chunks=[
                replace(c, statements=out, statements_key=key if out is not None else None)
                for c, out, key in zip(base.chunks, said, keys, strict=True)
            ],
            llm_calls=base.llm_calls + calls,
            problems=problems,
            passages=self._passages(chunks, personal, voice, said, title=title, date=date),
            voice=voice,
            voice_key=voice_key,
        )

    def _passages(
        self,
        chunks: Sequence[Chunk],
        personal: bool,
        voice: Output | None,
        statements: Sequence[Output | None],
        *,
        title: str,
        date: str | None,
    ) -> list[list[passages.Passage]]:
        """Each chunk's passages, fitted to the embedder's window: its paragraphs
        (`context.passages`) in the owner's voice in personal notes, else in the writer's
        the model named, else under the note's title, as written; then its statements."""
        writer = self._writer(personal, voice)
        speaker = (
            passages.Voice(writer, True, date) if writer else passages.Voice(title, False, date)
        )
        out = []
        for chunk, said in zip(chunks, statements, strict=True):
            found = (
                passages.chunk_passages(chunk.content, speaker)
                if self.settings.passages != "none"
                else []
            )
            if said is not None and not said.fallback:
                found += passages.statement_passages(said.text, start=len(found))
            out.append([replace(p, text=fit(p.text, self.embed_window)) for p in found])
        return out if any(out) else []

    def _statements(
        self, chunk: Chunk, *, writer: str | None, date: str | None
    ) -> statements.Written:
        prompt = prompts.statements_prompt(
            header_line(chunk.header_path),
            chunk.content,
            writer=writer,
            date=date,
            max_tokens=_STATEMENT_TOKENS,
            context_window=self.context_window,
        )
        return statements.read_statements(
            self.chat.complete(prompt), source=chunk.content, writer=writer, date=date
        )

    def _rewrite(self, content: str) -> tuple[str, str | None]:
        prompt = prompts.rewrite_prompt(
            content, owner=self.owner, context_window=self.context_window
        )
        text = outputs.clean_rewrite(self.chat.complete(prompt))
        return text, outputs.rewrite_problem(text, content, self.owner)


def _head(
    path: str, metadata: Mapping[str, Any] | None, chunks: Sequence[Chunk]
) -> voices.NoteHead:
    return voices.note_head(path, metadata or {}, [c.content for c in chunks[:3]])


def _plain(header: str) -> str:
    return header.lstrip("#").strip()


def _plain_headers(header_path: tuple[str, ...]) -> str:
    return " > ".join(_plain(h) for h in header_path)


def _sections(chunks: list[Chunk]) -> Iterator[str]:
    """The note's top sections: each chunk's first heading below the title."""
    for chunk in chunks:
        below = [h for h in chunk.header_path if not h.startswith("# ")]
        if below:
            yield _plain(below[0])
