"""The search filters, defined once for every face: `kb query` and `kb ask`'s options, the
MCP tools `search` and `ask`'s arguments and the web page's form fields are all made from
FILTERS and read by `read`, so no face offers a filter another lacks or reads one
differently. A new filter is a record here and its SQL (kb.store.candidates: `SearchFilter`
and the candidates query).
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from kb.services.inputs import path_text, plain_text

if TYPE_CHECKING:
    from kb.store import SearchFilter

# path: a folder of the vault, or one note; tags: all of several; day: the note's own date
# (kb.dates); time: the file's modification time, to the second.
FilterKind = Literal["path", "tags", "day", "time"]
# What `read` makes of a filter's text: a path, tags, a day, a time; None (of tags, ()) when
# nothing is given.
FilterValue = str | tuple[str, ...] | dt.date | dt.datetime | None

# More than anyone filters by; each tag is a condition of every search.
MAX_TAGS = 20
# A day alone is its midnight, local time, as the user means it (kb.store.pool.epoch_ns).
# The page's date-and-time field sends minutes; a time may name its offset.
_TIME_FORMATS = (
    "%Y-%m-%d",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S%z",
)
_A_TIME = "a day or a time (YYYY-MM-DD, or YYYY-MM-DDTHH:MM:SS)"


@dataclass(frozen=True)
class FilterField:
    """One search filter, as every face offers it."""

    name: str  # the `SearchFilter` field it sets, and the MCP tools' argument
    kind: FilterKind
    options: tuple[str, ...]  # the command line's
    form: str  # the page's field, in its query string
    label: str  # the page's label of the field
    help: str
    example: str = ""  # shown in the page's empty field


FILTERS: tuple[FilterField, ...] = (
    FilterField(
        "path_prefix",
        "path",
        ("--path", "-p"),
        "path",
        "Folder or note",
        "Only notes in this folder (and its subfolders), e.g. 'Projects/', or this note.",
        example="Projects/",
    ),
    FilterField(
        "tags",
        "tags",
        ("--tag",),
        "tags",
        "Tags",
        "Only notes with all these tags, separated by spaces or commas (a tag also matches "
        "the tags nested under it: project matches project/kb).",
        example="travel work/meetings",
    ),
    FilterField(
        "after",
        "day",
        ("--after",),
        "after",
        "Dated from",
        "Only notes dated on or after this day, YYYY-MM-DD (the note's date: its date "
        "property, its daily-note name, a date in its file name, else its file's day).",
    ),
    FilterField(
        "before",
        "day",
        ("--before",),
        "before",
        "Dated before",
        "Only notes dated before this day, YYYY-MM-DD (the note's date).",
    ),
    FilterField(
        "modified_after",
        "time",
        ("--modified-after",),
        "modified_after",
        "Modified from",
        "Only notes whose file was modified at or after this time: YYYY-MM-DD, or with a "
        "time, YYYY-MM-DDTHH:MM:SS (local time unless it gives its offset).",
    ),
    FilterField(
        "modified_before",
        "time",
        ("--modified-before",),
        "modified_before",
        "Modified before",
        "Only notes whose file was modified before this time: YYYY-MM-DD, or with a time, "
        "YYYY-MM-DDTHH:MM:SS (local time unless it gives its offset).",
    ),
)


def read(field: FilterField, given: str | Sequence[str] | None) -> FilterValue:
    """A filter's value from the text a face received: for tags, any number of texts, each
    of one tag or several. Nothing, or only spaces: not filtered. A ValueError says what is
    wrong, for the face to name the field its own way."""
    texts = [given] if given is None or isinstance(given, str) else given
    text = plain_text(" ".join(t for t in texts if t)).strip()
    if field.kind == "tags":
        return _tags(text)
    if not text:
        return None
    if field.kind == "path":
        return path_text(text)
    moment = _time(text)
    if moment is None:
        wanted = "a day (YYYY-MM-DD)" if field.kind == "day" else _A_TIME
        raise ValueError(f"{text[:40]!r} is not {wanted}")
    return moment.date() if field.kind == "day" else moment


def search_filter(values: Mapping[str, FilterValue]) -> SearchFilter:
    """The filter of the values `read` made, by their fields' names; a value not given (None,
    no tags) filters nothing."""
    # Imported here: every `kb` command loads this module, and only a search the store.
    from kb.store import SearchFilter

    given: dict[str, Any] = {f.name: values[f.name] for f in FILTERS if values.get(f.name)}
    return SearchFilter(**given)


T = TypeVar("T")


def with_filters(
    parameter: Callable[[FilterField], object],
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A face's command, whose `**filters` receive the filters, given a signature that names
    them: one keyword parameter per filter, None by default, annotated by `parameter` (the
    type the face reads it as, and how). typer makes a command's options, and the MCP SDK a
    tool's arguments, from its signature: this is how each face's filters come from FILTERS."""

    def named(command: Callable[..., T]) -> Callable[..., T]:
        signature = inspect.signature(command, eval_str=True)
        kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        added = [
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=parameter(f)
            )
            for f in FILTERS
        ]
        # inspect.signature, which both libraries call, returns a function's __signature__.
        command.__dict__["__signature__"] = signature.replace(parameters=[*kept, *added])
        return command

    return named


def _tags(text: str) -> tuple[str, ...]:
    tags = tuple(t.lstrip("#") for t in text.replace(",", " ").split() if t.lstrip("#"))
    if len(tags) > MAX_TAGS:
        raise ValueError(f"{len(tags)} tags; at most {MAX_TAGS}")
    return tags


def _time(text: str) -> dt.datetime | None:
    for shape in _TIME_FORMATS:
        try:
            return dt.datetime.strptime(text, shape)
        except ValueError:
            continue
    return None
