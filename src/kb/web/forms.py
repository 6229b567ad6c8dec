"""A page's query string, read: what the search box and its filters ask for.

The URL holds the whole search (so it can be bookmarked, shared between tabs, or sent to the
JSON endpoints), and everything in it is checked here, once, with one line for what is
wrong; an empty field means "as configured".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from kb.errors import KbError
from kb.results import SEARCH_MODES, SearchMode
from kb.services.inputs import path_text, plain_text, whole_number
from kb.services.search import SearchRequest
from kb.store import SearchFilter

# Longer than any question a person types; a URL of this size still fits every browser.
MAX_QUERY_CHARS = 2000
MAX_TAGS = 20
# A page of cards, not a dump of the index (the command line goes to kb.config.MAX_TOP_K).
MAX_TOP_K = 50
# More lines than any note kb reads holds (notes are at most 16 MiB).
MAX_LINE = 999_999_999


class FormError(KbError):
    """A query string the page cannot search with; its message names the field."""


@dataclass(frozen=True)
class SearchForm:
    """The search box and its filters, as given (for the form to show them again) and read."""

    q: str = ""
    path: str = ""
    tags: str = ""  # as typed: words separated by spaces or commas
    after: str = ""
    before: str = ""
    mode: str = ""
    top_k: str = ""
    request: SearchRequest | None = field(default=None, compare=False)

    @property
    def filtered(self) -> bool:
        return bool(self.path or self.tags or self.after or self.before or self.mode)


def read_form(params: Mapping[str, str]) -> SearchForm:
    """The form a query string describes; `request` is None when it asks nothing yet.
    A FormError says which field is wrong and why."""

    def given(name: str) -> str:
        return _text(params.get(name, ""), name).strip()

    form = SearchForm(
        q=given("q"),
        path=given("path"),
        tags=given("tags"),
        after=given("after"),
        before=given("before"),
        mode=given("mode"),
        top_k=given("top_k"),
    )
    if not form.q:
        return form
    if len(form.q) > MAX_QUERY_CHARS:
        raise FormError(f"q: the query is {len(form.q)} characters; at most {MAX_QUERY_CHARS}")
    request = SearchRequest(
        form.q,
        top_k=_top_k(form.top_k),
        mode=_mode(form.mode),
        filters=SearchFilter(
            path_prefix=_path(form.path),
            tags=_tags(form.tags),
            after=_day(form.after, "after"),
            before=_day(form.before, "before"),
        ),
    )
    return replace(form, request=request)


def _text(value: str, name: str) -> str:
    try:
        return plain_text(value)
    except ValueError as exc:
        raise FormError(f"{name}: {exc}") from None


def _path(value: str) -> str | None:
    if not value:
        return None
    try:
        return path_text(value)
    except ValueError as exc:
        raise FormError(f"path: {exc}") from None


def _tags(value: str) -> tuple[str, ...]:
    tags = tuple(t.lstrip("#") for t in value.replace(",", " ").split() if t.lstrip("#"))
    if len(tags) > MAX_TAGS:
        raise FormError(f"tags: {len(tags)} tags; at most {MAX_TAGS}")
    return tags


def _day(value: str, name: str) -> dt.date | None:
    # The note's own date (kb.dates), as --after and --before read it.
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise FormError(f"{name}: {value[:40]!r} is not a day (YYYY-MM-DD)") from None


def _mode(value: str) -> SearchMode | None:
    if not value:
        return None
    for mode in SEARCH_MODES:
        if value == mode:
            return mode
    raise FormError(f"mode: {value[:40]!r} is not one of {', '.join(SEARCH_MODES)}")


def _top_k(value: str) -> int | None:
    return _number(value, "top_k", MAX_TOP_K)


def line_number(params: Mapping[str, str], name: str) -> int | None:
    """A note's line (`start`, `end` of a note's address), None when not given."""
    return _number(params.get(name, ""), name, MAX_LINE)


def _number(value: str, name: str, most: int) -> int | None:
    if not value:
        return None
    try:
        return whole_number(value, 1, most)
    except ValueError as exc:
        raise FormError(f"{name}: {exc}") from None
