"""Daily-note names read back with the vault's own Moment.js format."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from kb.moment import compile_format, read_date


@pytest.mark.parametrize(
    ("text", "fmt", "day"),
    [
        ("2024-05-03", "YYYY-MM-DD", dt.date(2024, 5, 3)),
        ("03.05.2024", "DD.MM.YYYY", dt.date(2024, 5, 3)),
        ("2024/05/2024-05-03", "YYYY/MM/YYYY-MM-DD", dt.date(2024, 5, 3)),
        ("Friday, May 3rd 2024", "dddd, MMMM Do YYYY", dt.date(2024, 5, 3)),
        ("3 Jan 24", "D MMM YY", dt.date(2024, 1, 3)),
        ("Journal 2024-05-03", "[Journal] YYYY-MM-DD", dt.date(2024, 5, 3)),
        ("20240503", "YYYYMMDD", dt.date(2024, 5, 3)),
    ],
)
def test_a_name_in_its_format_gives_its_day(text: str, fmt: str, day: dt.date) -> None:
    assert read_date(text, fmt) == day


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("2024-05-03", "DD.MM.YYYY"),  # another format
        ("31.02.2024", "DD.MM.YYYY"),  # no such day
        ("2024/06/2024-05-03", "YYYY/MM/YYYY-MM-DD"),  # the folder says another month
        ("Meeting notes", "YYYY-MM-DD"),
        ("2024-05-03 extra", "YYYY-MM-DD"),  # the whole name is the format
        ("2024-W18", "gggg-[W]ww"),  # a week names no day
    ],
)
def test_what_is_not_a_day_in_the_format_gives_none(text: str, fmt: str) -> None:
    assert read_date(text, fmt) is None


def test_a_format_without_a_day_names_none() -> None:
    assert not compile_format("YYYY-MM").dates
    assert compile_format("DD.MM.YYYY").dates


def test_a_year_0000_is_no_day() -> None:
    assert read_date("01.01.0000", "DD.MM.YYYY") is None
    assert read_date("01.01.00", "DD.MM.YY") == dt.date(2000, 1, 1)  # Moment's two digits
    assert read_date("24/2024-05-03", "YY/YYYY-MM-DD") == dt.date(2024, 5, 3)


def test_adjacent_variable_width_tokens_read_a_name_in_linear_time() -> None:
    fmt = "YYYY" + "DM" * 16
    start = time.monotonic()
    for digits in (40, 69):
        assert read_date("1" * digits + "x", fmt) is None
    assert time.monotonic() - start < 1.0
    # Each token takes what it can, as Moment reads a name: "DM" on "112" is 11 February,
    # and on "31" no day (D takes both digits).
    assert read_date("2024112", "YYYYDM") == dt.date(2024, 2, 11)
    assert read_date("202431", "YYYYDM") is None
