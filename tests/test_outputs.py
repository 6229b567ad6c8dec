"""Cleaning and checking model output: what small models get wrong, and the fallbacks."""

from __future__ import annotations

import pytest

from kb.models.base import Prompt
from kb.prompting.outputs import (
    clean_rewrite,
    clean_summary,
    first_person_words,
    needs_rewrite,
    rewrite_problem,
    split_parts,
    structural_chunk_summary,
    structural_file_summary,
    summary_problem,
)
from kb.prompting.prompts import chunk_summary_prompt

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


# --- failure detection -------------------------------------------------------------------------

CHUNK = (
    "Trail 6 follows a stream for most of the way, and the last section actually walks in the "
    "streambed over stepping stones. My boots stayed dry, mostly."
)


def _chunk_prompt(content: str = CHUNK) -> Prompt:
    return chunk_summary_prompt(
        "Alex Doe's hike up Mount Takao.",
        "# Takao > ## The climb",
        content,
        owner=None,
        max_tokens=96,
        context_window=8192,
    )


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("", "empty"),
        ("...", "empty"),
        ("12 34", "empty"),
        ("I'm sorry, but I cannot summarize this.", "refusal"),
        ("Please provide the text you want summarized.", "refusal"),
        ("As an AI language model, I think this is about hiking.", "refusal"),
        (CHUNK, "echo of the note"),
        (CHUNK[:90], "echo of the note"),
        ("The climb. " * 12, "repetition"),
        ("hiking " * 30, "repetition"),
        ("=" * 60, "empty"),
        ("The climb was steep" + "!" * 60, "repetition"),
        (
            "Explains how the home server is backed up: a nightly restic job with daily and "
            "weekly retention on a USB disk.",
            "echo of the instructions",
        ),
        (
            "You help a search index understand one part of a note. You get a summary of the "
            "whole note",
            "echo of the instructions",
        ),
    ],
)
def test_unusable_summaries_are_named(answer: str, problem: str) -> None:
    prompt = _chunk_prompt()
    assert summary_problem(clean_summary(answer, max_chars=600), prompt) == problem


def test_a_chunk_summary_copied_from_the_file_summary_is_an_echo() -> None:
    file_summary = "Alex Doe's goals for 2024, including health, learning and home projects."
    prompt = chunk_summary_prompt(
        file_summary, "# Goals > ## Health", CHUNK, owner=None, max_tokens=96, context_window=8192
    )
    assert summary_problem(file_summary, prompt) == "echo of the file summary"
    assert summary_problem("Health goals: Trail 6 and dry boots on the stream.", prompt) is None


@pytest.mark.parametrize(
    "answer",
    [
        "The climb up Trail 6, which follows a stream and ends in the streambed itself.",
        # Quoting a phrase of the chunk is fine; copying it is not.
        "Describes the last section, which 'walks in the streambed over stepping stones', "
        "and how the boots stayed dry on the way to the summit of Takao.",
        "Kenji and Alex reach the top.",
    ],
)
def test_good_summaries_pass(answer: str) -> None:
    assert summary_problem(answer, _chunk_prompt()) is None


PERSONAL = (
    "- [ ] I caught the Keiō line from Shinjuku at 7:40. My knee held up, and Kenji gave me "
    "coffee. See [[Kenji Sato|Kenji]]."
)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("", "empty"),
        ("I'm sorry, I can't rewrite personal text.", "refusal"),
        (PERSONAL, "first person left"),
        (PERSONAL.replace("I caught", "Alex Doe caught"), "first person left"),
        (
            "- [ ] He caught the Keiō line from Shinjuku at 7:40. His knee held up, and Kenji gave "
            "him coffee. See [[Kenji Sato|Kenji]].",
            "owner not named",
        ),
        (
            "- [ ] Alex Doe caught the Keiō line from Shinjuku in the morning. Alex Doe's knee "
            "held up, and Kenji gave Alex Doe coffee. See [[Kenji Sato|Kenji]].",
            "facts lost",
        ),
        (
            "- [ ] Alex Doe caught the Keiō line from Shinjuku at 7:40. Alex Doe's knee held up, "
            "and Kenji gave Alex Doe coffee.",
            "facts lost",
        ),
        ("Alex Doe took a train.", "length changed"),
        (
            "- [x] "
            + PERSONAL.replace("I caught", "Alex Doe caught")
            .replace("My knee", "Alex Doe's knee")
            .replace("gave me", "gave Alex Doe"),
            "facts changed",
        ),
        ("Alex Doe caught the train at 7:40. " * 12, "length changed"),
    ],
)
def test_unusable_rewrites_are_named(answer: str, problem: str) -> None:
    assert rewrite_problem(clean_rewrite(answer), PERSONAL, "Alex Doe") == problem


def test_good_rewrite_passes_and_link_aliases_may_change() -> None:
    good = (
        "- [ ] Alex Doe caught the Keiō line from Shinjuku at 7:40. Alex Doe's knee held up, and "
        "Kenji gave Alex Doe coffee. See [[Kenji Sato|Alex's friend Kenji]]."
    )
    assert rewrite_problem(good, PERSONAL, "Alex Doe") is None


def test_first_person_inside_quotes_code_and_links_is_not_the_writer() -> None:
    text = (
        'Kenji said "I will come" and Alex Doe read [[How I Climbed Mount Fuji]]; '
        "the command is `echo I am root`."
    )
    assert first_person_words(text) == []
    assert not needs_rewrite(text)
    assert needs_rewrite("Kenji gave me coffee.") and needs_rewrite("My knee is fine.")
    assert first_person_words("Kenji gave me coffee; I'm glad.") == ["me", "I'm"]


@pytest.mark.parametrize(
    "text",
    [
        "We recommend a nightly backup; our docs explain it.",
        "Set it in the US region, i.e. the default one.",
        "See the [[Why I Stopped Using ORMs]] note.",
    ],
)
def test_only_the_writer_saying_i_needs_a_rewrite(text: str) -> None:
    assert not needs_rewrite(text)
    assert needs_rewrite(text + " I agree.") and needs_rewrite(text + " i'm sure.")


def test_structural_context_is_true_and_plain() -> None:
    assert structural_file_summary("Home Server", "Projects", ["Hardware", "Backups"], None) == (
        'Note "Home Server" in Projects. Sections: Hardware, Backups.'
    )
    assert structural_file_summary("Goals", "", [], "Alex Doe") == (
        'Note "Goals". Written by Alex Doe in the first person.'
    )
    assert structural_chunk_summary("Home Server", "Home Server > Backups") == (
        'Part of the note "Home Server", section "Home Server > Backups".'
    )


# --- several-part answers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "Note: A guide to the home server.\nPart 1: Its hardware.\nPart 2: Its backups.",
        "**Note:** A guide to the home server.\n**Part 1:** Its hardware.\n"
        "**Part 2:** Its backups.",
        "Summary of the whole note: A guide to the home server.\n\n1. Its hardware.\n"
        "2. Its backups.",
        "Sure! Here are the lines.\nNote: A guide to the home server.\n[1] Its hardware.\n"
        "[2] Its backups.",
        "A guide to the home server.\n- Part 1 - Its hardware.\n- Part 2 - Its backups.",
        "Note: A guide to the home server.\nPart 1\nIts hardware.\nPart 2:\nIts backups.",
        "Note: A guide to the home server.\nPart 2: Its backups.\nPart 1) Its hardware.",
    ],
)
def test_several_part_answers_are_read_in_any_usual_shape(answer: str) -> None:
    note, parts = split_parts(answer, 2)
    assert note == "A guide to the home server."
    assert parts == {1: "Its hardware.", 2: "Its backups."}


def test_several_part_answers_keep_continuations_and_first_copies() -> None:
    note, parts = split_parts(
        "Note: A guide\nto the server.\nPart 1: Its hardware:\n10: a laptop.\nPart 3: Extra.\n"
        "Part 1: Again.\nmore of again\nPart 2: Its backups.",
        2,
    )
    assert note == "A guide to the server."
    # "10:" and "Part 3" are no part of a two-part answer; the second "Part 1" is dropped.
    assert parts == {1: "Its hardware: 10: a laptop. Part 3: Extra.", 2: "Its backups."}


def test_parts_not_written_are_missing() -> None:
    assert split_parts("Part 2: Its backups.", 3) == ("", {2: "Its backups."})
    assert split_parts("", 2) == ("", {})


def test_a_part_summary_the_same_as_another_or_copied_from_its_part_is_rejected() -> None:
    prompt = Prompt(
        task="chunk_summaries", system="Summarise.", user="…", max_tokens=100, num_ctx=2048
    )
    text = "Explains the nightly restic backups to a USB disk."
    assert summary_problem(text, prompt, source="restic runs at night.", others=[text]) == (
        "same as another part"
    )
    copied = "Once a month the owner restores one folder."
    source = "Backups run at 02:00. Once a month the owner restores one folder. Then coffee."
    assert summary_problem(copied, prompt, source=source) == "echo of the note"
    assert summary_problem(text, prompt, source=source, others=["Another one."]) is None
