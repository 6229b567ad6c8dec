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
from kb.services.inputs import plain_text, whole_number
from kb.services.request_fields import (
    BY_NAME,
    FILTERS,
    PAGE_TOP_K,
    RequestField,
    offered,
    read,
    search_request,
)
from kb.services.searching import SearchRequest

# More lines than any note kb reads holds (notes are at most 16 MiB).
MAX_LINE = 999_999_999
_FIELDS = offered("page")
_TEXT = BY_NAME["text"].form


class FormError(KbError):
    """A query string the page cannot search with; its message names the field."""


@dataclass(frozen=True)
class SearchForm:
    """The search box and its filters, as given (for the form to show them again) and read."""

    # Each field as typed, by its name in the query string (kb.services.request_fields).
    given: Mapping[str, str] = field(default_factory=dict)
    request: SearchRequest | None = field(default=None, compare=False)

    @property
    def q(self) -> str:
        return self.given.get(_TEXT, "")

    @property
    def mode(self) -> str:
        return self.given.get(BY_NAME["mode"].form, "")

    @property
    def filtered(self) -> bool:
        return bool(self.mode or any(self.given.get(f.form) for f in FILTERS))


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
    form = SearchForm({f.form: _text(params.get(f.form, ""), f.form).strip() for f in _FIELDS})
    if not form.q:
        return form
    values = {f.name: _field(f, form.given[f.form]) for f in _FIELDS}
    # Every card says why it is where it is.
    return replace(form, request=search_request({**values, "explain": True}))


def _text(value: str, name: str) -> str:
    try:
        return plain_text(value)
    except ValueError as exc:
        raise FormError(f"{name}: {exc}") from None


def _field(field: RequestField, value: str) -> object:
    """A field's value as the page reads it, within the page's bounds; a FormError names it."""
    try:
        return _value(field, value)
    except ValueError as exc:
        raise FormError(f"{field.form}: {exc}") from None


def _value(field: RequestField, value: str) -> object:
    if field.kind == "text":
        if len(value) > field.most("page"):
            raise ValueError(f"the query is {len(value)} characters; at most {field.most('page')}")
        return value
    if field.kind == "count":
        return whole_number(value, 1, field.most("page")) if value else None
    if field.kind == "mode":
        return _mode(value)
    if not field.filter:
        raise TypeError(f"the page takes no {field.kind} field ({field.name})")
    return read(field, value)


def _mode(value: str) -> SearchMode | None:
    if not value:
        return None
    for mode in SEARCH_MODES:
        if value == mode:
            return mode
    raise ValueError(f"{value[:40]!r} is not one of {', '.join(SEARCH_MODES)}")


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
        top_k=_number(params.get("top_k", ""), "top_k", PAGE_TOP_K) or 10,
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
