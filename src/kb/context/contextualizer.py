"""The contextualizer: a note's chunks turned into their contexts and passages, asking the
chat model only for what the cache does not hold.

It joins the cores (kb.context.summaries, kb.context.writers) to the model through the
driver, and is built the same way for the indexer and enrichment (`for_config`): a note one
stores must look built the same way to the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import replace

from kb.config import Config, ContextConfig
from kb.context.driver import drive, without_model
from kb.context.needs import ContextBuild, Needs
from kb.context.records import EMPTY, Draft, FileContext, NoteFacts, Window
from kb.context.summaries import provisional, structural, summarize
from kb.context.writers import note_voice, with_note_outputs
from kb.models.base import ChatModel
from kb.prompting.outputs import Output
from kb.store.chunks import VoiceRecord
from kb.vault.chunking import Chunk


class Contextualizer:
    """Turns a note's chunks into ContextChunks, asking the chat model only for what is
    missing; its calls run on `executor` (the LLM pool)."""

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
        self.executor = executor
        self.built = ContextBuild(
            settings, chunk_chars=chunk_chars, embed_window=embed_window, owner=owner
        )
        self.needs = Needs(settings, owner)
        self.window = Window(context=context_window, embed=embed_window)

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

    @property
    def embed_window(self) -> int:
        return self.window.embed

    def build_id(self, personal: bool) -> str:
        """How a note's chunks and contexts are made now (see ContextBuild.id)."""
        return self.built.id(personal)

    def gather(
        self,
        chunks: list[Chunk],
        personal: bool,
        note: NoteFacts,
        lookup: Callable[[list[str]], dict[str, Output]],
        before: VoiceRecord | None = None,
    ) -> tuple[dict[str, Output], bool]:
        """The outputs already paid for that a note needs, read through `lookup` (the
        cache), and whether they are all there. The statements' keys follow from the
        voice alone, so one more read finds them once the first found it."""
        keys = self.needs.keys(chunks, personal, note, before=before)
        known = lookup(keys) if keys else {}
        needed = self.needs.keys(chunks, personal, note, known, before)
        more = sorted(set(needed) - set(keys))
        if more:
            known |= lookup(more)
        return known, known.keys() >= set(needed)

    def build(
        self,
        chunks: list[Chunk],
        personal: bool,
        known: Mapping[str, Output],
        note: NoteFacts,
        lookup: Callable[[list[str]], dict[str, Output]] = lambda keys: {},
    ) -> FileContext:
        """Context for every chunk, and its passages, asking the model for what `known`
        (outputs already paid for, by cache key) lacks: the summaries, the voice of a note
        outside the owner's folders and each chunk's statements. A voice the model has just
        named gives the chunks' lines their keys, read through `lookup` (the cache) before
        any is asked for. The caller leaves out fallbacks made by another model, so those
        are asked again."""
        if not chunks:
            return EMPTY
        draft = Draft(chunks, personal, note, known)
        calls = 0
        if self.needs.settings.asks("summaries"):
            base, calls = drive(summarize(draft, self.needs, self.window), self.chat, self.executor)
        else:
            base = structural(draft, self.needs, self.window)
        named, asked = drive(note_voice(draft, self.needs, self.window), self.chat, self.executor)
        if named.known:
            known = {**known, **named.known}
            needed = self.needs.keys(chunks, personal, note, known)
            known |= lookup([k for k in needed if k not in known])
            draft = replace(draft, known=known)
        writers = with_note_outputs(base, draft, self.needs, self.window, ask=True)
        built, more = drive(writers, self.chat, self.executor)
        return replace(
            built, llm_calls=calls + asked + more, problems=[*built.problems, *named.problems]
        )

    def provisional(
        self,
        chunks: list[Chunk],
        personal: bool,
        known: Mapping[str, Output],
        note: NoteFacts,
        before: VoiceRecord | None = None,
    ) -> FileContext:
        """Context for every chunk without asking the model: the outputs in `known` where
        they are, structural context (what `summaries = "structure"` writes) in place of
        the others, and the chunk as written where its rewrite is not known. What a note is
        searchable by until `build` adds the missing outputs; `before`, the voice the note
        was stored with, stands in for one the model has yet to name."""
        if not chunks:
            return EMPTY
        draft = Draft(chunks, personal, note, known, before)
        if self.needs.settings.asks("summaries"):
            base = provisional(draft, self.needs, self.window)
        else:
            base = structural(draft, self.needs, self.window)
        return without_model(with_note_outputs(base, draft, self.needs, self.window, ask=False))
