"""Write each chunk's context: file summary, chunk summary, first-person rewrite.

Every LLM output is cached under a key that hashes exactly its inputs (plus
the model and the prompt version), so a run only asks for what is new:

- the file summary depends on the first and last chunks only, so editing the
  middle of a note keeps it;
- a chunk summary depends on its own chunk and header path, not on the file
  summary, so a new file summary does not redo every chunk summary;
- the rewrite depends on the chunk and the owner's name.

`full_context` is then assembled from those parts; that is what gets embedded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from concurrent.futures import Executor
from dataclasses import dataclass

from kb import prompts
from kb.chunking import Chunk
from kb.config import ContextConfig
from kb.llm.base import ChatModel, Prompt

_SUMMARY_CHARS_PER_TOKEN = 6


def _key(*parts: str) -> str:
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
    rewrite: str | None
    rewrite_key: str | None
    full_context: str

    @property
    def context_hash(self) -> str:
        return hashlib.sha256(self.full_context.encode()).hexdigest()


@dataclass(frozen=True)
class FileContext:
    summary: str
    summary_key: str
    chunks: list[ContextChunk]
    llm_calls: int


def full_context(file_summary: str, chunk_summary: str, header_path: str, content: str) -> str:
    """The seed's tagged layout; this text is what gets embedded."""
    return (
        f"<file_summary>\n{file_summary}\n</file_summary>\n\n"
        f"<chunk_summary>\n{chunk_summary}\n</chunk_summary>\n\n"
        f"<chunk_headers>\n{header_path}\n</chunk_headers>\n\n"
        f"<chunk_content>\n{content}\n</chunk_content>"
    )


class Contextualizer:
    """Turns a note's chunks into ContextChunks, asking the chat model only for what is missing."""

    def __init__(
        self,
        chat: ChatModel,
        settings: ContextConfig,
        *,
        owner: str,
        context_window: int,
        executor: Executor,
    ) -> None:
        self.chat = chat
        self.settings = settings
        self.owner = owner
        self.context_window = context_window
        self.executor = executor

    def _owner_for(self, personal: bool) -> str | None:
        return self.owner if personal else None

    def _rewrites(self, personal: bool) -> bool:
        return personal and self.settings.rewrite_personal

    def excerpts(self, chunks: list[Chunk]) -> list[str]:
        """The chunks the file summary is written from: the first N and the last N."""
        n_first, n_last = self.settings.first_chunks, self.settings.last_chunks
        if len(chunks) <= n_first + n_last:
            picked = chunks
        else:
            picked = chunks[:n_first] + (chunks[-n_last:] if n_last else [])
        return [c.content for c in picked]

    def file_summary_key(self, chunks: list[Chunk], personal: bool) -> str:
        return _key(
            "file",
            prompts.PROMPT_VERSION,
            self.chat.name,
            self._owner_for(personal) or "",
            *self.excerpts(chunks),
        )

    def rewrite_key(self, chunk: Chunk) -> str:
        return _key("rewrite", prompts.PROMPT_VERSION, self.chat.name, self.owner, chunk.content)

    def chunk_summary_key(self, chunk: Chunk, personal: bool) -> str:
        return _key(
            "chunk",
            prompts.PROMPT_VERSION,
            self.chat.name,
            self._owner_for(personal) or "",
            str(self._rewrites(personal)),
            header_line(chunk.header_path),
            chunk.content,
        )

    def keys(self, chunks: list[Chunk], personal: bool) -> list[str]:
        """Every cache key a note needs, so the caller can fetch known outputs in one go."""
        if not chunks:
            return []
        keys = [self.file_summary_key(chunks, personal)]
        for chunk in chunks:
            keys.append(self.chunk_summary_key(chunk, personal))
            if self._rewrites(personal):
                keys.append(self.rewrite_key(chunk))
        return keys

    def build(self, chunks: list[Chunk], personal: bool, known: Mapping[str, str]) -> FileContext:
        """Context for every chunk; `known` maps cache keys to outputs already paid for."""
        if not chunks:
            return FileContext(summary="", summary_key="", chunks=[], llm_calls=0)
        calls = 0
        owner = self._owner_for(personal)
        max_summary = self.settings.summary_max_tokens * _SUMMARY_CHARS_PER_TOKEN

        file_key = self.file_summary_key(chunks, personal)
        file_summary = known.get(file_key)
        if file_summary is None:
            prompt = prompts.file_summary_prompt(
                self.excerpts(chunks),
                owner=owner,
                max_tokens=self.settings.summary_max_tokens,
                context_window=self.context_window,
            )
            # Through the pool, so every LLM call counts against the concurrency limit.
            file_summary = self.executor.submit(self._summary, prompt, max_summary).result()
            calls += 1

        def one(chunk: Chunk) -> tuple[ContextChunk, int]:
            made = 0
            text = chunk.content
            rewrite = rewrite_key = None
            if self._rewrites(personal):
                rewrite_key = self.rewrite_key(chunk)
                rewrite = known.get(rewrite_key)
                if rewrite is None:
                    rewrite = self._rewrite(chunk.content)
                    made += 1
                text = rewrite
            headers = header_line(chunk.header_path)
            summary_key = self.chunk_summary_key(chunk, personal)
            summary = known.get(summary_key)
            if summary is None:
                prompt = prompts.chunk_summary_prompt(
                    file_summary,
                    headers,
                    text,
                    owner=owner,
                    max_tokens=self.settings.summary_max_tokens,
                    context_window=self.context_window,
                )
                summary = self._summary(prompt, max_summary)
                made += 1
            return ContextChunk(
                chunk=chunk,
                summary=summary,
                summary_key=summary_key,
                rewrite=rewrite,
                rewrite_key=rewrite_key,
                full_context=full_context(file_summary, summary, headers, text),
            ), made

        results = list(self.executor.map(one, chunks))
        calls += sum(made for _, made in results)
        return FileContext(
            summary=file_summary,
            summary_key=file_key,
            chunks=[c for c, _ in results],
            llm_calls=calls,
        )

    def _summary(self, prompt: Prompt, max_chars: int) -> str:
        text = prompts.clean_summary(self.chat.complete(prompt), max_chars=max_chars)
        # An echo of the input is no summary: better none than a misleading one.
        if _is_echo(text, prompt.user):
            return ""
        return text

    def _rewrite(self, content: str) -> str:
        prompt = prompts.rewrite_prompt(
            content, owner=self.owner, context_window=self.context_window
        )
        text = prompts.clean_rewrite(self.chat.complete(prompt))
        # A rewrite that lost most of the text, or ran away, is worse than the original.
        if not text or not 0.5 <= len(text) / max(1, len(content)) <= 2.5:
            return content
        return text


def _is_echo(output: str, prompt_text: str) -> bool:
    norm = " ".join(output.split()).lower()
    return len(norm) > 40 and norm in " ".join(prompt_text.split()).lower()
