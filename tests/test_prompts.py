"""Prompt building: sizes, shortening, shared prefixes, worked examples."""

from __future__ import annotations

import pytest

from kb.models.base import Prompt
from kb.prompting import prompts
from kb.prompting.prompts import (
    chunk_summary_prompt,
    file_summary_prompt,
    note_budget,
    note_prompt,
    parts_budget,
    parts_prompt,
    rewrite_prompt,
)

FILE_SUMMARY = "Alex Doe's journal entry about climbing Mount Takao with Kenji Sato in April 2024."

# --- prompt sizes ------------------------------------------------------------------------------


def _estimated_tokens(prompt: Prompt) -> int:
    return (len(prompt.system) + len(prompt.user)) // 3 + prompt.max_tokens


def _prompts(size: int, window: int) -> list[Prompt]:
    text = ("Alex wrote this line about the home server and its backups. " * 200)[:size]
    return [
        file_summary_prompt([text], owner="Alex Doe", max_tokens=160, context_window=window),
        file_summary_prompt(
            [text[: size // 2], text[size // 2 :]],
            owner=None,
            max_tokens=160,
            context_window=window,
        ),
        chunk_summary_prompt(
            FILE_SUMMARY,
            "# Trip > ## Day 2",
            text,
            owner="Alex Doe",
            max_tokens=120,
            context_window=window,
        ),
        rewrite_prompt(text, owner="Alex Doe", context_window=window),
    ]


@pytest.mark.parametrize("window", [2048, 4096, 8192, 32768])
@pytest.mark.parametrize("size", [10, 2_000, 12_000, 100_000])
def test_num_ctx_covers_prompt_and_fits_window(window: int, size: int) -> None:
    for prompt in _prompts(size, window):
        assert _estimated_tokens(prompt) <= prompt.num_ctx <= window, prompt.task
        assert prompt.max_tokens > 0


def test_num_ctx_grows_with_input_but_not_past_window() -> None:
    small = _prompts(100, 32768)
    large = _prompts(30_000, 32768)
    for a, b in zip(small, large, strict=True):
        assert a.num_ctx < b.num_ctx <= 32768
    assert all(p.num_ctx == 2048 for p in small)


@pytest.mark.parametrize("kind", ["file", "chunk", "rewrite"])
def test_too_long_input_is_shortened_visibly(kind: str) -> None:
    head = "HEAD-MARKER " + "alpha " * 4000
    tail = "beta " * 4000 + " TAIL-MARKER"
    text = head + tail
    if kind == "file":
        prompt = file_summary_prompt([text], owner=None, max_tokens=160, context_window=4096)
        kept = prompt.inputs["excerpt"]
    elif kind == "chunk":
        prompt = chunk_summary_prompt(
            FILE_SUMMARY, "# A", text, owner=None, max_tokens=160, context_window=4096
        )
        kept = prompt.inputs["content"]
    else:
        prompt = rewrite_prompt(text, owner="Alex Doe", context_window=4096)
        kept = prompt.inputs["content"]
    assert "[…]" in prompt.user
    assert "[…]" in kept
    assert len(kept) < len(text)
    # Both ends survive.
    assert "HEAD-MARKER" in prompt.user
    assert "TAIL-MARKER" in prompt.user
    assert _estimated_tokens(prompt) <= prompt.num_ctx <= 4096


def test_input_that_fits_is_not_shortened() -> None:
    text = "A short chunk about ramen."
    prompt = chunk_summary_prompt(
        FILE_SUMMARY, "# Ramen", text, owner=None, max_tokens=160, context_window=8192
    )
    assert "[…]" not in prompt.user
    assert prompt.inputs["content"] == text
    assert f"<chunk>\n{text}\n</chunk>" in prompt.user
    rewrite = rewrite_prompt(text, owner="Alex Doe", context_window=8192)
    assert "[…]" not in rewrite.user
    assert text in rewrite.user


# --- prompt contents ---------------------------------------------------------------------------


@pytest.mark.parametrize("owner", [None, "Alex Doe"])
def test_chunk_prompts_of_one_file_share_their_prefix(owner: str | None) -> None:
    first = chunk_summary_prompt(
        FILE_SUMMARY,
        "# Friday — Mount Takao",
        "I took the day off and climbed Mount Takao.",
        owner=owner,
        max_tokens=120,
        context_window=8192,
    )
    second = chunk_summary_prompt(
        FILE_SUMMARY,
        "# Friday — Mount Takao > ## The climb",
        "Trail 6 follows a stream for most of the way.",
        owner=owner,
        max_tokens=120,
        context_window=8192,
    )
    assert first.system == second.system
    # Everything before the last user turn (instructions, worked example) is shared too.
    assert first.examples and first.messages()[:-1] == second.messages()[:-1]
    prefix_a, _, rest_a = first.user.partition("<chunk_headers>")
    prefix_b, _, rest_b = second.user.partition("<chunk_headers>")
    assert rest_a and rest_b
    assert prefix_a == prefix_b
    # The file summary is in the shared part, before anything chunk-specific.
    assert FILE_SUMMARY in prefix_a
    assert "Mount Takao." not in prefix_a
    assert rest_a != rest_b
    assert first.user.index(FILE_SUMMARY) < first.user.index("I took the day off")


def test_worked_examples_speak_of_the_owner_only_in_personal_prompts() -> None:
    personal = file_summary_prompt(
        ["I went."], owner="Alex Doe", max_tokens=160, context_window=8192
    )
    other = file_summary_prompt(["I went."], owner=None, max_tokens=160, context_window=8192)
    assert "Alex Doe" in personal.examples[0][1]
    assert "{owner}" not in other.examples[0][1] and "Alex" not in other.examples[0][1]
    rewrite = rewrite_prompt("I went home.", owner="Alex Doe", context_window=8192)
    asked, answered = rewrite.examples[0]
    assert "I'm" in asked and "Alex Doe is back at the gym" in answered
    roles = [m["role"] for m in rewrite.messages()]
    assert roles == ["system", "user", "assistant", "user"]


def test_owner_named_in_system_prompts() -> None:
    chunk = chunk_summary_prompt(
        FILE_SUMMARY, "# A", "I went.", owner="Alex Doe", max_tokens=100, context_window=8192
    )
    anonymous = chunk_summary_prompt(
        FILE_SUMMARY, "# A", "I went.", owner=None, max_tokens=100, context_window=8192
    )
    assert "Alex Doe" in chunk.system
    assert "Alex Doe" not in anonymous.system
    assert chunk.inputs["owner"] == "Alex Doe"
    assert anonymous.inputs["owner"] == ""
    rewrite = rewrite_prompt("I went home.", owner="Alex Doe", context_window=8192)
    assert "Alex Doe" in rewrite.system
    assert rewrite.task == "rewrite"
    summary = file_summary_prompt(
        ["I went."], owner="Alex Doe", max_tokens=100, context_window=8192
    )
    assert "Alex Doe" in summary.system
    assert summary.task == "file_summary"
    assert chunk.task == "chunk_summary"


def test_file_summary_excerpts_joined_with_visible_gap() -> None:
    prompt = file_summary_prompt(
        ["The beginning.", "The end."], owner=None, max_tokens=160, context_window=8192
    )
    assert "The beginning.\n\n[…]\n\nThe end." in prompt.user
    assert prompt.max_tokens == 160


def test_rewrite_max_tokens_scale_with_input_and_window() -> None:
    short = rewrite_prompt("I went home.", owner="Alex Doe", context_window=8192)
    long = rewrite_prompt("I went home. " * 500, owner="Alex Doe", context_window=8192)
    assert short.max_tokens < long.max_tokens <= 8192 // 2
    # A rewrite needs about as many tokens as its input has.
    assert long.max_tokens >= len(long.inputs["content"]) // 3


# --- several parts in one call -----------------------------------------------------------------

PARTS = [
    ("# Trip > ## Day 1", "Alex Doe took the train to Takao."),
    ("# Trip > ## Day 2", "Trail 6 follows a stream; </part> <part 9> is text, not a tag."),
    ("", "A note with no heading."),
]


def test_note_prompt_numbers_every_part_and_asks_for_some() -> None:
    prompt = note_prompt(PARTS, [1, 3], owner=None, max_tokens=300, context_window=8192)
    assert prompt.task == "note_summary"
    assert (
        "<part 1>\n# Trip > ## Day 1\n\nAlex Doe took the train to Takao.\n</part>" in prompt.user
    )
    assert "<part 3>\nA note with no heading.\n</part>" in prompt.user
    # Note text can spell the tags, but never close its part or open another.
    assert prompt.user.count("</part>") == 3 and "<part 9>" not in prompt.user
    assert prompt.user.endswith("its sentences:\nNote:\nPart 1:\nPart 3:")
    assert prompt.inputs["asked"] == "1 3" and prompt.inputs["content_2"] == PARTS[1][1]
    answered = prompt.examples[0][1]
    assert answered.startswith("Note: ") and "\nPart 1: " in answered and "\nPart 2: " in answered
    assert "{owner}" not in answered and "Alex" not in answered
    personal = note_prompt(PARTS, [1, 2, 3], owner="Alex Doe", max_tokens=300, context_window=8192)
    assert personal.user.endswith("\nNote:\nPart 1:\nPart 2:\nPart 3:")
    assert "Alex Doe" in personal.system and "Alex Doe" in personal.examples[0][1]


def test_parts_prompts_of_one_note_share_their_prefix_through_the_file_summary() -> None:
    first = parts_prompt(FILE_SUMMARY, PARTS[:2], owner=None, max_tokens=200, context_window=8192)
    second = parts_prompt(FILE_SUMMARY, PARTS[2:], owner=None, max_tokens=200, context_window=8192)
    assert first.task == "chunk_summaries" and first.inputs["file_summary"] == FILE_SUMMARY
    assert first.messages()[:-1] == second.messages()[:-1]
    head = f"<file_summary>\n{FILE_SUMMARY}\n</file_summary>\n\n<part 1>\n"
    assert first.user.startswith(head) and second.user.startswith(head)
    assert first.user.endswith("its sentences:\nPart 1:\nPart 2:")
    assert second.user.endswith("its sentences:\nPart 1:")


@pytest.mark.parametrize("window", [2048, 8192])
def test_parts_within_the_budget_fit_the_window(window: int) -> None:
    budget = note_budget(owner="Alex Doe", max_tokens=500, context_window=window)
    text = ("Alex wrote this line about the home server and its backups. " * 400)[: budget - 40]
    prompt = note_prompt(
        [("# A", text)], [1], owner="Alex Doe", max_tokens=500, context_window=window
    )
    assert prompt.num_ctx <= window and _estimated_tokens(prompt) <= window
    assert parts_budget(FILE_SUMMARY, owner=None, max_tokens=500, context_window=window) > 0


@pytest.mark.parametrize(
    ("question", "hint"),
    [
        ("When did Jon move to Lisbon?", "Answer with the date or time."),
        ("what year was the roof redone", "Answer with the date or time."),
        ("How many tournaments did Nate win?", "Answer with the number or amount."),
        ("Who fixed the boiler?", "Answer with the name."),
        ("Where did we stay in Kyoto?", "Answer with the place."),
        (
            "Would Caroline pursue writing as a career?",
            "Answer yes or no, then why in a few words.",
        ),
        ("What made John leave his IT job?", None),
        ("Whenever the backup fails, what happens?", None),
        ("Is there a way to export notes?", "Answer yes or no, then why in a few words."),
    ],
)
def test_the_question_names_the_shape_of_its_answer(question: str, hint: str | None) -> None:
    assert prompts.answer_hint(question) == hint
    prompt = prompts.answer_prompt(
        question, [("2 March 2024:", "text")], owner=None, max_tokens=320, context_window=8192
    )
    assert prompt.user.endswith(f"Question: {question}" + (f"\n{hint}" if hint else ""))


def test_the_answer_prompts_instructions_and_examples_are_every_vaults() -> None:
    """The owner is named in the question's turn, so that a server caching prompt prefixes
    evaluates the instructions and examples once for every vault."""
    mine, theirs = (
        prompts.answer_prompt(
            "when did I move?", [("h", "t")], owner=owner, max_tokens=320, context_window=8192
        )
        for owner in ("Alex Doe", "Sam Roe")
    )
    assert (mine.system, mine.examples) == (theirs.system, theirs.examples)
    assert mine.user.startswith("The user is Alex Doe.") and "Alex" not in mine.system
    assert "Sam Roe" in theirs.user and "Alex" not in theirs.user
    # The owner's lines take their room from the passages'.
    assert prompts.answer_budget(
        "when did I move?", owner="Alex Doe", max_tokens=320, context_window=8192
    ) < prompts.answer_budget("when did I move?", owner=None, max_tokens=320, context_window=8192)
