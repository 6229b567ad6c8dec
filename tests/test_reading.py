"""What the answering model reads of a passage: its writer, its date, its relative times
dated, the owner's "I" said to them (pure)."""

from __future__ import annotations

import datetime as dt

import pytest

from kb.search.reading import Writer, dated, header, said_of, text_for_reader

FRIDAY = dt.date(2022, 1, 21)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I won it last week!", "I won it last week (the week before 21 January 2022)!"),
        ("Yesterday was long.", "Yesterday (20 January 2022) was long."),
        ("tomorrow", "tomorrow (22 January 2022)"),
        ("Last Friday we met.", "Last Friday (Friday 14 January 2022) we met."),
        ("next Monday", "next Monday (Monday 24 January 2022)"),
        ("3 days ago", "3 days ago (18 January 2022)"),
        ("two weeks ago", "two weeks ago (the week of 7 January 2022)"),
        ("last month and last year", "last month (December 2021) and last year (2021)"),
        ("this weekend", "this weekend (the weekend of 21 January 2022)"),
        # Already dated, or naming no time: left as written.
        ("last week (the week before 21 January 2022)", None),
        ("the last step of the week", None),
    ],
)
def test_relative_times_carry_the_date_they_mean(text: str, expected: str | None) -> None:
    assert dated(text, FRIDAY) == (expected or text)


def test_a_writers_words_are_said_of_them_by_name() -> None:
    said = "I'm proud. My turtle and I went out; I was tired, and it's mine. Am I late?"
    assert said_of(said, "Nate") == (
        "Nate is proud. Nate's turtle and Nate went out; Nate was tired, and it's Nate's. "
        "is Nate late?"
    )
    assert said_of("I adopted my dog; he follows me.", "Nate") == (
        "Nate adopted Nate's dog; he follows Nate."
    )
    # Words that only hold the letters are not the first person.
    assert said_of("Mimi in Miami", "Nate") == "Mimi in Miami"


def test_a_passage_starts_with_who_wrote_it_when_and_where() -> None:
    assert header(Writer("Joanna", owner=True), FRIDAY, "Journal/2022-01-21", ["Friday"]) == (
        'You (Joanna), 21 January 2022, in "Journal/2022-01-21" > Friday:'
    )
    assert header(Writer("Nate", owner=False), None, "Letters/Nate", []) == (
        'Nate, in "Letters/Nate":'
    )
    assert header(Writer(None, owner=False), FRIDAY, "Clip", []) == (
        'Someone else (not you), 21 January 2022, in "Clip":'
    )
    # Nobody's question (documentation, --no-owner): no one is named.
    assert header(None, None, "docs/backup", ["Backups"]) == 'in "docs/backup" > Backups:'


def test_the_text_read_is_in_its_writers_voice_and_dated() -> None:
    text = "I dyed my hair purple last week."
    assert text_for_reader(text, Writer("Nate", owner=False), FRIDAY) == (
        "Nate dyed Nate's hair purple last week (the week before 21 January 2022)."
    )
    # The owner's too: "you" in their notes is whoever they wrote to.
    assert text_for_reader(f"{text} You look great!", Writer("Joanna", owner=True), None) == (
        "Joanna dyed Joanna's hair purple last week. You look great!"
    )
    assert text_for_reader(text, Writer(None, owner=False), None) == text
