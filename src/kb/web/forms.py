"""A page's query string, read: what the search box and its filters ask for.

The URL holds the whole search (so it can be bookmarked, shared between tabs, or sent to the
JSON endpoints), and everything in it is checked here, once, with one line for what is
wrong; an empty field means "as configured".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from kb.errors import KbError
from kb.results import SEARCH_MODES, SearchMode
from kb.services.filters import FILTERS, FilterField, FilterValue, read, search_filter
from kb.services.inputs import plain_text, whole_number
from kb.services.searching import SearchRequest

# Longer than any question a person types; a URL of this size still fits every browser.
MAX_QUERY_CHARS = 2000
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
    mode: str = ""
    top_k: str = ""
    # Each filter's field as typed, by its name in the query string (kb.services.filters).
    filters: Mapping[str, str] = field(default_factory=dict)
    request: SearchRequest | None = field(default=None, compare=False)

    @property
    def filtered(self) -> bool:
        return bool(self.mode or any(self.filters.values()))


@dataclass(frozen=True)
class RelatedForm:
    vault: str
    path: str
    top_k: int
    unlinked: bool
    line: int | None


def read_form(params: Mapping[str, str]) -> SearchForm:
    """The form a query string describes; `request` is None when it asks nothing yet.
    A FormError says which field is wrong and why."""

    def given(name: str) -> str:
        return _text(params.get(name, ""), name).strip()

    form = SearchForm(
        q=given("q"),
        mode=given("mode"),
        top_k=given("top_k"),
        filters={f.form: given(f.form) for f in FILTERS},
    )
    if not form.q:
        return form
    if len(form.q) > MAX_QUERY_CHARS:
        raise FormError(f"q: the query is {len(form.q)} characters; at most {MAX_QUERY_CHARS}")
    request = SearchRequest(
        form.q,
        top_k=_top_k(form.top_k),
        mode=_mode(form.mode),
        filters=search_filter({f.name: _filter(f, form.filters[f.form]) for f in FILTERS}),
        explain=True,  # every card says why it is where it is
    )
    return replace(form, request=request)


def _text(value: str, name: str) -> str:
    try:
        return plain_text(value)
    except ValueError as exc:
        raise FormError(f"{name}: {exc}") from None


def _filter(field: FilterField, value: str) -> FilterValue:
    try:
        return read(field, value)
    except ValueError as exc:
        raise FormError(f"{field.form}: {exc}") from None


def _mode(value: str) -> SearchMode | None:
    if not value:
        return None
    for mode in SEARCH_MODES:
        if value == mode:
            return mode
    raise FormError(f"mode: {value[:40]!r} is not one of {', '.join(SEARCH_MODES)}")


def _top_k(value: str) -> int | None:
    return _number(value, "top_k", MAX_TOP_K)


def related_form(params: Mapping[str, str], vaults: Sequence[str]) -> RelatedForm:
    """What `/api/related` asks for: a note's vault-relative `path`, its `vault` (the only
    one when the page serves one), `top_k`, `unlinked` and a `line`."""
    path = params.get("path", "")
    if not path:
        raise FormError("path: the note's path in its vault is needed")
    vault = params.get("vault", "") or (vaults[0] if len(vaults) == 1 else "")
    if not vault:
        raise FormError(f"vault: one of {', '.join(vaults)} is needed")
    unlinked = params.get("unlinked", "").lower()
    if unlinked not in ("", "0", "1", "true", "false"):
        raise FormError("unlinked: true or false")
    return RelatedForm(
        vault=vault,
        path=path,
        top_k=_number(params.get("top_k", ""), "top_k", MAX_TOP_K) or 10,
        unlinked=unlinked in ("1", "true"),
        line=line_number(params, "line"),
    )


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
