"""kb's parts on a test database, wired to the counting fake models."""

from __future__ import annotations

from typing import Any

from kb.config import Config
from kb.container import Container
from kb.llm.fake import FakeChat, FakeEmbedder
from kb.note_writing.events import SyncReport
from kb.store import Store


class Kb(Container):
    """kb's parts on a test database, with the counting fake provider."""

    # Tests read the fakes' counters and swap in fakes that fail on cue, all FakeChat and
    # FakeEmbedder kinds: declared so, the counters type-check where tests read them. A test
    # that puts a real client in their place does it through a plain Container.
    chat: FakeChat
    embedder: FakeEmbedder

    def __init__(self, store: Store, config: Config) -> None:
        super().__init__(
            config,
            store,
            chat=FakeChat("fake-chat"),
            embedder=FakeEmbedder(config.llm.embed_model),
        )

    def sync(self, **options: Any) -> SyncReport:
        """A sync, then every queued note enriched, as `kb index --wait` does: what the
        index holds afterwards is what a sync with the LLM inline would have written."""
        report = super().sync(**options)
        enriched = self.drain()
        report.llm_calls += enriched.llm_calls
        report.fallbacks += enriched.fallbacks
        report.embedded += enriched.embedded
        return report

    def reset_counts(self) -> None:
        self.chat.calls.clear()
        self.embedder.calls = 0
        self.embedder.texts = 0


def file_summaries(chat: FakeChat) -> int:
    """Calls that wrote a file summary: alone, or with the chunk summaries of a short note."""
    return chat.calls["file_summary"] + chat.calls["note_summary"]
