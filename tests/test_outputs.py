"""Cleaning and checking model output: what small models get wrong, and the fallbacks."""

from __future__ import annotations

import pytest

from kb.outputs import clean_rewrite, clean_summary

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
