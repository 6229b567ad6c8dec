"""The time a question names, and the notes of that time put first."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

from kb.results import SearchMode
from kb.search.plan import SearchPlan
from kb.search.when import Period, period_of, question_period
from kb.store import Store
from support.configs import make_config
from support.fake_kb import Kb
from support.reading import rows, search_store

TODAY = dt.date(2026, 11, 25)  # a Wednesday


@pytest.mark.parametrize(
    ("question", "period"),
    [
        ("What did Joanna finish in January 2022?", (dt.date(2022, 1, 1), dt.date(2022, 1, 31))),
        ("What movie did I watch on 1 May, 2022?", (dt.date(2022, 5, 1), dt.date(2022, 5, 1))),
        ("trips in 2019", (dt.date(2019, 1, 1), dt.date(2019, 12, 31))),
        ("notes from 2022-03?", (dt.date(2022, 3, 1), dt.date(2022, 3, 31))),
        ("What did I do yesterday?", (dt.date(2026, 11, 24), dt.date(2026, 11, 24))),
        ("what did I do last week", (dt.date(2026, 11, 16), dt.date(2026, 11, 22))),
        # No time, or a time without a year: which May would be a guess.
        ("Which spot did I visit in May?", None),
        ("When did Nate adopt Max?", None),
        ("What is the last step of the install?", None),
        ("Mayonnaise recipe", None),
    ],
)
def test_the_time_a_question_names(question: str, period: tuple[dt.date, dt.date] | None) -> None:
    assert question_period(question, TODAY) == (Period(*period) if period else None)


def test_periods_cover_whole_weeks_months_and_years() -> None:
    day = dt.date(2024, 2, 14)
    assert period_of(day, "day") == Period(day, day)
    assert period_of(day, "week") == Period(dt.date(2024, 2, 12), dt.date(2024, 2, 18))
    assert period_of(day, "month") == Period(dt.date(2024, 2, 1), dt.date(2024, 2, 29))
    assert period_of(day, "year") == Period(dt.date(2024, 1, 1), dt.date(2024, 12, 31))
    assert not Period(day, day).holds(None)


def test_a_dated_question_puts_the_notes_of_its_time_first(store: Store, tmp_path: Path) -> None:
    vault = tmp_path / "notes"
    (vault / "Journal").mkdir(parents=True)
    # The same words every day: only the date tells the days apart.
    for day in ("2023-02-27", "2023-03-14", "2023-04-02"):
        (vault / f"Journal/{day}.md").write_text("Swam laps in the lake with the club.\n")
    (vault / "Swimming.md").write_text("---\ndate: 2023-03-20\n---\nThe club swims laps.\n")
    kb = Kb(store, make_config(vault, context={"summaries": "none"}))
    kb.sync()
    dates = rows(store, "SELECT path, note_date FROM documents ORDER BY path")
    assert [(r["path"], r["note_date"]) for r in dates] == [
        ("Journal/2023-02-27.md", dt.date(2023, 2, 27)),
        ("Journal/2023-03-14.md", dt.date(2023, 3, 14)),
        ("Journal/2023-04-02.md", dt.date(2023, 4, 2)),
        ("Swimming.md", dt.date(2023, 3, 20)),
    ]
    modes: tuple[SearchMode, ...] = ("hybrid", "text", "vector")
    for mode in modes:
        hits = search_store(
            store, kb.embedder, SearchPlan("Swam laps in March 2023", top_k=4, mode=mode)
        ).hits
        assert {h.path for h in hits[:2]} == {"Journal/2023-03-14.md", "Swimming.md"}, mode
    undated = search_store(store, kb.embedder, SearchPlan("Swam laps in the lake", top_k=4)).hits
    assert undated[0].path.startswith("Journal/")
    # Relative words are read from today.
    yesterday = search_store(
        store, kb.embedder, SearchPlan("swam laps yesterday", top_k=4, today=dt.date(2023, 4, 3))
    ).hits
    assert yesterday[0].path == "Journal/2023-04-02.md"


def test_a_question_with_no_time_word_never_loads_the_date_parser() -> None:
    # dateparser takes most of a second to import: "the last step" or "what does this do"
    # must not pay it.
    code = (
        "import datetime, sys; from kb.search.when import question_period;"
        "assert question_period('what does this do at the last step', datetime.date.today())"
        " is None; print('dateparser' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
