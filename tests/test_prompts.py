"""Prompt building (sizes, shortening, shared prefixes) and cleaning of model output."""

from __future__ import annotations

import pytest

from kb.llm.base import Prompt
from kb.prompts import (
    chunk_summary_prompt,
    clean_rewrite,
    clean_summary,
    file_summary_prompt,
    rewrite_prompt,
)

FILE_SUMMARY = "Alex Doe's journal entry about climbing Mount Takao with Kenji Sato in April 2024."

# --- clean_summary -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "Sure! Here is a summary: The note is about hiking.",
        "Sure! Here is a summary:\n\nThe note is about hiking.",
        "Certainly. Here's the summary of the note: The note is about hiking.",
        "**Summary:** The note is about hiking.",
        "**Summary**: The note is about hiking.",
        "Summary: The note is about hiking.",
        "Here is what this part is about: The note is about hiking.",
        "What this part is about: The note is about hiking.",
        "<chunk_summary>The note is about hiking.</chunk_summary>",
        '"The note is about hiking."',
        "  The note   is about\n\nhiking.  ",
    ],
)
def test_clean_summary_strips_chatter_tags_quotes_and_whitespace(raw: str) -> None:
    assert clean_summary(raw, max_chars=500) == "The note is about hiking."


def test_clean_summary_keeps_plain_text() -> None:
    text = "Alex planned a summary: the note lists costs. Okay then."
    assert clean_summary(text, max_chars=500) == text


def test_clean_summary_cuts_at_sentence_end() -> None:
    text = " ".join(f"Sentence number {i} says a thing." for i in range(30))
    out = clean_summary(text, max_chars=200)
    assert len(out) <= 200
    assert out.endswith("thing.")
    assert text.startswith(out)
    # As many whole sentences as fit: the next one would not.
    assert len(out) + len(" Sentence number 10 says a thing.") > 200


def test_clean_summary_without_sentence_end_cuts_at_a_word() -> None:
    text = "word " * 100
    out = clean_summary(text, max_chars=50)
    assert len(out) <= 50
    assert out.endswith("…")
    assert set(out.removesuffix("…").split()) == {"word"}


def test_clean_summary_bounded_even_without_spaces() -> None:
    out = clean_summary("あ" * 300, max_chars=80)
    assert len(out) <= 80
    assert out.endswith("…")


def test_clean_summary_short_text_untouched_by_bound() -> None:
    assert clean_summary("Short. Text.", max_chars=12) == "Short. Text."


# --- clean_rewrite -----------------------------------------------------------------------------


def test_clean_rewrite_strips_wrapping_fence_and_chatter() -> None:
    raw = (
        "Sure, here is the rewritten text:\n"
        "```markdown\n# Trip\n\n- Alex climbed **Takao** with [[Kenji Sato|Kenji]].\n```"
    )
    assert clean_rewrite(raw) == "# Trip\n\n- Alex climbed **Takao** with [[Kenji Sato|Kenji]]."


def test_clean_rewrite_strips_plain_fence_and_tags() -> None:
    assert clean_rewrite("```\nAlex went home.\n```") == "Alex went home."
    assert clean_rewrite("<text>\nAlex went home.\n</text>") == "Alex went home."


def test_clean_rewrite_keeps_inner_markdown_and_inner_fences() -> None:
    text = (
        "## Backups\n\nAlex set up restic:\n\n```bash\nrestic backup /srv\n```\n\n"
        "> [!note] Alex checks it weekly.\n\n| a | b |\n| - | - |\n| 1 | 2 |"
    )
    assert clean_rewrite(text) == text
    assert clean_rewrite(f"The same text in the third person:\n{text}") == text


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
    prefix_a, _, rest_a = first.user.partition("<chunk_headers>")
    prefix_b, _, rest_b = second.user.partition("<chunk_headers>")
    assert rest_a and rest_b
    assert prefix_a == prefix_b
    # The file summary is in the shared part, before anything chunk-specific.
    assert FILE_SUMMARY in prefix_a
    assert "Mount Takao." not in prefix_a
    assert rest_a != rest_b
    assert first.user.index(FILE_SUMMARY) < first.user.index("I took the day off")


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
