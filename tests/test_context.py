"""The Contextualizer on its own: how many calls a note costs, how several-part answers are
read, and what happens to each part the model gets wrong."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from kb.config import ContextConfig
from kb.context import Contextualizer, FileContext, NoteFacts
from kb.llm.fake import FakeChat
from kb.models.base import Prompt
from kb.prompting import prompts
from kb.prompting.outputs import Output
from kb.vault.chunking import Chunk, chunk_body

OWNER = "Alex Doe"
TOPICS = (
    "restic backups nightly snapshots disk",
    "sourdough starter rye flour feeding",
    "postgres upgrade pg_upgrade cluster",
    "kyoto temples autumn maple trip",
    "guitar chords practice metronome scales",
    "garden tomatoes basil watering schedule",
    "bicycle chain gears brake pads",
    "chess openings sicilian endgame study",
    "python typing protocols dataclasses",
    "marathon training long runs pace",
    "camera lenses aperture shutter light",
    "budget rent groceries savings plan",
    "piano sonata practice fingering tempo",
    "docker compose volumes networks images",
)


def note(sections: int, *, edit: tuple[str, str] = ("", "")) -> list[Chunk]:
    """A note of `sections` chunks, each about its own topic; `edit` replaces one word."""
    body = "# Note\n\n" + "\n\n".join(
        f"## Section {i + 1}\n\n" + f"This part is about {TOPICS[i]}. " * 20
        for i in range(sections)
    )
    chunks = chunk_body(body.replace(*edit), max_chars=1600, first_line=1)
    assert len(chunks) == sections
    return chunks


class Model(FakeChat):
    """The fake model, with `answer(prompt, good)` in place of its own answer."""

    def __init__(self, answer: Callable[[Prompt, str], str]) -> None:
        super().__init__("model")
        self.answer = answer

    def complete(self, prompt: Prompt) -> str:
        return self.answer(prompt, super().complete(prompt))


def contextualizer(chat: FakeChat, **settings: object) -> Contextualizer:
    return Contextualizer(
        chat,
        # The summaries' setting unless told otherwise: most of this module is about them.
        ContextConfig(**{"writes": ("summaries",), "passages": "none", **settings}),  # type: ignore[arg-type]
        owner=OWNER,
        context_window=8192,
        embed_window=500,
        chunk_chars=1600,
        executor=ThreadPoolExecutor(2),
    )


def known_after(ctx: Contextualizer, chunks: list[Chunk], built: FileContext) -> dict[str, Output]:
    """What the store would hand back after `built` was saved."""
    known = {
        ctx.needs.file_summary_key(chunks, False): Output(built.summary, built.summary_fallback)
    }
    for c in built.chunks:
        known[c.summary_key] = Output(c.summary, c.summary_fallback)
    return known


# --- how many calls -----------------------------------------------------------------------------


@pytest.mark.parametrize("sections", [1, 3, 6])
def test_a_short_note_costs_one_call(sections: int) -> None:
    chat = FakeChat()
    chunks = note(sections)
    built = contextualizer(chat).build(chunks, False, {}, NoteFacts("Note"))
    assert dict(chat.calls) == {"note_summary": 1} and built.llm_calls == 1
    assert built.summary.startswith("A note covering")
    assert [c.summary for c in built.chunks] == [
        FakeChat().complete(
            prompts.chunk_summary_prompt(
                built.summary, "", c.content, owner=None, max_tokens=96, context_window=8192
            )
        )
        for c in chunks
    ]
    assert not built.problems and not any(c.summary_fallback for c in built.chunks)


@pytest.mark.parametrize(("sections", "batches"), [(7, [4, 3]), (12, [6, 6]), (13, [5, 4, 4])])
def test_a_long_note_costs_a_file_summary_and_even_batches(
    sections: int, batches: list[int]
) -> None:
    chat = FakeChat()
    built = contextualizer(chat).build(note(sections), False, {}, NoteFacts("Note"))
    assert dict(chat.calls) == {"file_summary": 1, "chunk_summaries": len(batches)}
    asked = [len(p.inputs["asked"].split()) for p in chat.prompts if p.task == "chunk_summaries"]
    assert asked == batches
    assert built.llm_calls == 1 + len(batches)
    # Every batch shares its prefix up to the file summary, for the server's prompt cache.
    users = [p.user for p in chat.prompts if p.task == "chunk_summaries"]
    head = f"<file_summary>\n{built.summary}\n</file_summary>"
    assert all(u.startswith(head) for u in users)


def test_batch_chunks_1_asks_every_summary_alone() -> None:
    chat = FakeChat()
    contextualizer(chat, batch_chunks=1).build(note(5), False, {}, NoteFacts("Note"))
    assert dict(chat.calls) == {"file_summary": 1, "chunk_summary": 5}


def test_a_note_too_long_for_the_window_is_not_summarised_in_one_call() -> None:
    chat = FakeChat()
    ctx = Contextualizer(
        chat,
        ContextConfig(writes=("summaries",), passages="none"),
        owner=OWNER,
        context_window=2048,
        embed_window=500,
        chunk_chars=1600,
        executor=ThreadPoolExecutor(1),
    )
    built = ctx.build(note(6), False, {}, NoteFacts("Note"))
    assert chat.calls["note_summary"] == 0 and chat.calls["file_summary"] == 1
    assert sum(chat.calls.values()) == built.llm_calls > 2
    assert not built.problems


# --- caching ------------------------------------------------------------------------------------


@pytest.mark.parametrize("sections", [4, 9])
def test_a_second_build_asks_nothing(sections: int) -> None:
    chat = FakeChat()
    ctx = contextualizer(chat)
    chunks = note(sections)
    first = ctx.build(chunks, False, {}, NoteFacts("Note"))
    chat.calls.clear()
    again = ctx.build(chunks, False, known_after(ctx, chunks, first), NoteFacts("Note"))
    assert chat.total_calls == 0 and again.llm_calls == 0
    assert again == FileContext(first.summary, first.summary_key, False, first.chunks, 0, [])


def test_a_middle_edit_of_a_short_note_asks_for_its_chunk_alone() -> None:
    chat = FakeChat()
    ctx = contextualizer(chat)
    chunks = note(5)
    known = known_after(ctx, chunks, ctx.build(chunks, False, {}, NoteFacts("Note")))
    edited = note(5, edit=("postgres", "mysql"))
    chat.calls.clear()
    ctx.build(edited, False, known, NoteFacts("Note"))
    assert dict(chat.calls) == {"chunk_summary": 1}


def test_an_edge_edit_of_a_short_note_asks_for_the_note_and_that_part_only() -> None:
    chat = FakeChat()
    ctx = contextualizer(chat)
    chunks = note(5)
    known = known_after(ctx, chunks, ctx.build(chunks, False, {}, NoteFacts("Note")))
    edited = note(5, edit=("restic", "borg"))
    chat.prompts.clear()
    chat.calls.clear()
    built = ctx.build(edited, False, known, NoteFacts("Note"))
    assert dict(chat.calls) == {"note_summary": 1}
    [prompt] = chat.prompts
    assert prompt.inputs["asked"] == "1" and prompt.user.endswith("\nNote:\nPart 1:")
    assert "borg" in built.summary and "borg" in built.chunks[0].summary


def test_a_new_summary_prompt_version_keeps_the_rewrites(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = contextualizer(FakeChat())
    [chunk] = chunk_body("I climbed Mount Takao with Kenji.", max_chars=1600, first_line=1)
    before = (ctx.needs.rewrite_key(chunk), ctx.needs.chunk_summary_key(chunk, True))
    monkeypatch.setattr(prompts, "PROMPT_VERSION", "next")
    assert ctx.needs.rewrite_key(chunk) == before[0]
    assert ctx.needs.chunk_summary_key(chunk, True) != before[1]


# --- parts the model gets wrong -----------------------------------------------------------------


def _without_part(number: int) -> Callable[[Prompt, str], str]:
    def answer(prompt: Prompt, good: str) -> str:
        if prompt.task not in ("note_summary", "chunk_summaries"):
            return good
        return "\n".join(
            line for line in good.splitlines() if not line.startswith(f"Part {number}:")
        )

    return answer


def test_a_part_left_out_is_asked_for_alone() -> None:
    chat = Model(_without_part(2))
    built = contextualizer(chat).build(note(4), False, {}, NoteFacts("Note"))
    assert dict(chat.calls) == {"note_summary": 1, "chunk_summary": 1}
    [alone] = [p for p in chat.prompts if p.task == "chunk_summary"]
    assert "sourdough" in alone.inputs["content"]
    assert not built.problems and not any(c.summary_fallback for c in built.chunks)
    assert built.llm_calls == 2


def test_parts_a_note_call_leaves_out_are_asked_for_together() -> None:
    # A model that goes through the parts inside its Note line instead of a line each.
    def folded(prompt: Prompt, good: str) -> str:
        if prompt.task != "note_summary":
            return good
        return good.splitlines()[0] + " Part 1 covers backups, part 2 sourdough."

    chat = Model(folded)
    built = contextualizer(chat).build(note(5), False, {}, NoteFacts("Note"))
    assert dict(chat.calls) == {"note_summary": 1, "chunk_summaries": 1}
    [batch] = [p for p in chat.prompts if p.task == "chunk_summaries"]
    assert batch.inputs["asked"] == "1 2 3 4 5"
    assert batch.inputs["file_summary"] == built.summary
    assert not built.problems and built.llm_calls == 2


def test_a_part_that_fails_alone_too_falls_back_to_structure() -> None:
    def echo_sourdough(prompt: Prompt, good: str) -> str:
        if prompt.task == "chunk_summary" and "sourdough" in prompt.inputs["content"]:
            return prompt.inputs["content"]
        if prompt.task == "note_summary":
            lines = good.splitlines()
            return "\n".join(
                f"Part 2: {prompt.inputs['content_2']}" if line.startswith("Part 2:") else line
                for line in lines
            )
        return good

    chat = Model(echo_sourdough)
    built = contextualizer(chat).build(note(4), False, {}, NoteFacts("Note"))
    assert dict(chat.calls) == {"note_summary": 1, "chunk_summary": 1}
    [problem] = built.problems
    assert problem.startswith("chunk 2 summary: ")
    fell_back = [c.summary_fallback for c in built.chunks]
    assert fell_back == [False, True, False, False]
    assert built.chunks[1].summary == 'Part of the note "Note", section "Note > Section 2".'
    assert not built.summary_fallback


def test_a_part_repeated_for_another_is_asked_again() -> None:
    def same_twice(prompt: Prompt, good: str) -> str:
        if prompt.task != "note_summary":
            return good
        lines = good.splitlines()
        return "\n".join([*lines[:2], "Part 2:" + lines[1].split(":", 1)[1], *lines[3:]])

    chat = Model(same_twice)
    built = contextualizer(chat).build(note(3), False, {}, NoteFacts("Note"))
    # Both parts that read the same are asked alone; both then answer well.
    assert dict(chat.calls) == {"note_summary": 1, "chunk_summary": 2}
    assert not built.problems


def test_a_note_line_missing_asks_the_file_summary_prompt() -> None:
    def no_note(prompt: Prompt, good: str) -> str:
        if prompt.task != "note_summary":
            return good
        return "\n".join(line for line in good.splitlines() if not line.startswith("Note:"))

    chat = Model(no_note)
    built = contextualizer(chat).build(note(3), False, {}, NoteFacts("Note"))
    assert dict(chat.calls) == {"note_summary": 1, "file_summary": 1}
    assert built.summary.startswith("A note covering") and not built.problems
    assert not any(c.summary_fallback for c in built.chunks)


def test_garbage_falls_back_part_by_part_and_counts_every_call() -> None:
    chat = Model(lambda prompt, good: "Sure!" if prompt.task != "rewrite" else good)
    built = contextualizer(chat).build(note(3), False, {}, NoteFacts("Note"))
    # The note's call, its file summary alone, its parts together, then each part alone.
    assert dict(chat.calls) == {
        "note_summary": 1,
        "file_summary": 1,
        "chunk_summaries": 1,
        "chunk_summary": 3,
    }
    assert built.llm_calls == 6
    assert built.summary_fallback and all(c.summary_fallback for c in built.chunks)
    assert built.problems == [
        "file summary: empty",
        *(f"chunk {i} summary: empty" for i in (1, 2, 3)),
    ]


def test_personal_notes_are_rewritten_then_summarised_from_the_rewrite() -> None:
    chat = FakeChat()
    body = "# Trip\n\n## Day 1\n\nI climbed Mount Takao.\n\n## Day 2\n\nWe recommend the ramen."
    chunks = chunk_body(body, max_chars=1600, first_line=1)
    built = contextualizer(chat).build(chunks, True, {}, NoteFacts("Trip"))
    assert dict(chat.calls) == {"rewrite": 1, "note_summary": 1}
    [prompt] = [p for p in chat.prompts if p.task == "note_summary"]
    assert "Alex Doe climbed Mount Takao" in prompt.inputs["content_1"]
    assert built.chunks[0].rewrite is not None and built.chunks[1].rewrite == chunks[1].content
