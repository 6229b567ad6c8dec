"""The candidates statement's builders, on their own: pure functions from a filter, an
embedding space and a query to SQL and its parameters (the statement itself runs in
tests/test_search.py and tests/test_text_search.py)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from kb.store.candidates import (
    NO_FILTER,
    SearchFilter,
    candidates_params,
    candidates_sql,
    document_conditions,
)

FILTERS = [
    NO_FILTER,
    SearchFilter(path_prefix="Docs/"),
    SearchFilter(tags=("work",), after=dt.date(2024, 1, 1), before=dt.date(2025, 1, 1)),
    SearchFilter(
        paths=("a.md",),
        vaults=("v",),
        modified_after=dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        modified_before=dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
    ),
]


def test_no_filter_is_no_condition() -> None:
    assert document_conditions(NO_FILTER).as_string(None) == "TRUE"
    # A path filter that names the whole vault filters nothing either.
    assert document_conditions(SearchFilter(path_prefix="./")).as_string(None) == "TRUE"


def test_each_part_of_a_filter_is_a_condition_of_its_own() -> None:
    text = document_conditions(FILTERS[2]).as_string(None)
    assert text.count(" AND ") == 3
    assert "%(day_after)s" in text and "%(day_before)s" in text and "%(tags)s" in text
    assert "%(paths)s" not in text and "%(exact)s" not in text


@pytest.mark.parametrize("filters", FILTERS)
def test_every_placeholder_of_the_statement_has_its_value(filters: SearchFilter) -> None:
    text = candidates_sql("minilm", 384, filters).as_string(None)
    wanted = set(re.findall(r"%\((\w+)\)s", text))
    params = candidates_params([0.1] * 384, "cats", depth=40, lists="both", filters=filters)
    assert wanted <= set(params)
    assert "vector(384)" in text and "'minilm'" in text


def test_a_filter_is_applied_to_passages_and_postings_alike() -> None:
    plain = candidates_sql("m", 8, NO_FILTER).as_string(None)
    filtered = candidates_sql("m", 8, FILTERS[1]).as_string(None)
    # Filtered: the passages read join their notes, a word's postings are walked further.
    assert "%(walked)s" not in plain and "%(walked)s" in filtered
    assert filtered.count("%(exact)s") == 3 and plain.count("%(exact)s") == 0


def test_the_lists_not_asked_for_read_nothing() -> None:
    text = candidates_params(None, "cats", depth=40, lists="text", filters=NO_FILTER)
    assert (text["nv"], text["np"], text["nt"], text["v"]) == (0, 0, 40, None)
    vector = candidates_params([1.0], "cats", depth=40, lists="vector", filters=NO_FILTER)
    assert (vector["nv"], vector["np"], vector["nt"]) == (40, 80, 0)
    # A list deeper than the defaults reads deeper too.
    deep = candidates_params([1.0], "cats", depth=5000, lists="both", filters=NO_FILTER)
    assert deep["per_word"] == deep["rescored"] == 5000


def test_a_folder_filter_is_its_exact_path_and_what_lies_under_it() -> None:
    params = candidates_params(None, "x", depth=1, lists="text", filters=FILTERS[1])
    assert (params["exact"], params["like"]) == ("Docs", "Docs/%")
