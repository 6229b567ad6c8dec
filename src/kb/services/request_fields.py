"""The fields of a search or a question, defined once for every face: `kb query` and `kb ask`'s
argument and options, the MCP tools `search` and `ask`'s arguments and the web page's form
are all made from FIELDS, and a filter is read by `read`, so no face offers a field another
lacks, reads a filter differently or names another default.

Each field says which faces offer it and within which bounds (they differ on purpose: a
command line may list a thousand chunks, a page shows a page of cards, a model reads a few
passages), and where the value it leaves out comes from (`[query]`, `[ask]`: the search
service fills it in, kb.services.searching). A new filter is a record here and its SQL
(kb.store.candidates: `SearchFilter` and the candidates query).
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from kb.config import MAX_TOP_K, AskConfig, QueryConfig
from kb.results import SEARCH_MODES, SearchMode
from kb.services.inputs import path_text, plain_text

if TYPE_CHECKING:
    from kb.services.searching import SearchRequest

# Where a request is made: `kb query` and `kb ask`, the MCP tools `search` and `ask`, and the
# page (its search and its questions read one form).
Use = Literal["kb query", "kb ask", "mcp search", "mcp ask", "page"]
USES: tuple[Use, ...] = get_args(Use)
# text: the query or the question; count: a whole number from 1; similarity: a cosine, from
# -1 to 1; mode: one of the search modes; switch: on, off, or as configured; flag: an option
# given or not. The filters: path: a folder of the vault, or one note; tags: all of several;
# day: the note's own date (kb.dates); time: the file's modification time, to the second.
FieldKind = Literal[
    "text", "count", "similarity", "mode", "switch", "flag", "path", "tags", "day", "time"
]
FilterKind = Literal["path", "tags", "day", "time"]
FILTER_KINDS: tuple[FilterKind, ...] = get_args(FilterKind)
# What `read` makes of a filter's text: a path, tags, a day, a time; None (of tags, ()) when
# nothing is given.
FilterValue = str | tuple[str, ...] | dt.date | dt.datetime | None

# The modes as the faces offer them: the configured default first.
MODES: tuple[SearchMode, ...] = (
    QueryConfig.mode,
    *(m for m in SEARCH_MODES if m != QueryConfig.mode),
)
# What each mode reads of a note (the page's choices say it too).
MODE_MEANINGS: dict[SearchMode, str] = {
    "hybrid": "meaning and words",
    "vector": "meaning",
    "text": "words",
}
# Each mode as the faces name it: the page's choices, the help of the mode.
MODE_CHOICES: tuple[tuple[SearchMode, str], ...] = tuple(
    (m, f"{m}: {MODE_MEANINGS[m]}") for m in MODES
)
# A page of cards, not a dump of the index (the command line goes to kb.config.MAX_TOP_K);
# an assistant's search is held to as many.
PAGE_TOP_K = 50
# The passages a chat model answers from (`[ask] passages`, 3 unless set) all go into its
# prompt: more than this no local model's window holds.
ASK_TOP_K = 20
# Longer than any question a person types; a URL of this size still fits every browser.
PAGE_QUERY_CHARS = 2000
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
class Default:
    """Where a field's value comes from when a request leaves it out: a config key, and its
    value where the config does not set it (None: not one value to name)."""

    key: str
    value: object = None

    def __str__(self) -> str:
        value = "" if self.value is None else f", {self.value}"
        return f"(default: {self.key}{value})"


@dataclass(frozen=True)
class Offer:
    """How one face offers a field: what it says there, and its bound, where they are not
    the field's own."""

    most: int = 0  # a count's largest value, a text's length (0: the search's own bound)
    name: str = ""  # the parameter's name there (else the field's)
    help: str = ""
    default: Default | None = None


@dataclass(frozen=True)
class RequestField:
    """One field of a search or a question, as every face offers it."""

    name: str  # the `SearchRequest` field it sets (of its `filters`, for a filter)
    kind: FieldKind
    help: str
    offers: Mapping[Use, Offer]  # the faces that offer it
    default: Default | None = None
    options: tuple[str, ...] = ()  # the command line's
    form: str = ""  # the page's field, in its query string
    label: str = ""  # the page's label of the field
    example: str = ""  # shown in the page's empty field
    # A flag that says the opposite of its field: `--no-owner` sets `owner` false.
    inverted: bool = False

    @property
    def filter(self) -> bool:
        return self.kind in FILTER_KINDS

    def param(self, use: Use) -> str:
        """The field's parameter's name where `use` offers it."""
        return self.offers[use].name or self.name

    def most(self, use: Use) -> int:
        return self.offers[use].most

    def help_in(self, use: Use) -> str:
        """What the field means where `use` offers it, with where its default comes from."""
        offer = self.offers[use]
        text = offer.help or self.help
        default = offer.default or self.default
        return f"{text.removesuffix('.')} {default}." if default else text


_FILTERED: Mapping[Use, Offer] = {use: Offer() for use in USES}
_PASSAGES = Default("ask.passages", AskConfig.passages)
_READ = "How many passages to read."

FIELDS: tuple[RequestField, ...] = (
    RequestField(
        "text",
        "text",
        "What to look for.",
        {
            "kb query": Offer(),
            "kb ask": Offer(name="question", help="What to ask your notes."),
            "mcp search": Offer(name="query", help="What to look for, in plain words."),
            "mcp ask": Offer(name="question", help="The question, in plain words."),
            "page": Offer(PAGE_QUERY_CHARS),
        },
        form="q",
    ),
    RequestField(
        "mode",
        "mode",
        "; ".join(label for _, label in MODE_CHOICES) + ".",
        {"kb query": Offer(), "mcp search": Offer(), "page": Offer()},
        default=Default("query.mode", QueryConfig.mode),
        options=("--mode", "-m"),
        form="mode",
    ),
    RequestField(
        "top_k",
        "count",
        "How many passages.",
        {
            "kb query": Offer(MAX_TOP_K, help="How many chunks."),
            "kb ask": Offer(MAX_TOP_K, help=_READ, default=_PASSAGES),
            "mcp search": Offer(PAGE_TOP_K),
            "mcp ask": Offer(ASK_TOP_K, help=_READ, default=_PASSAGES),
            "page": Offer(PAGE_TOP_K),
        },
        default=Default("query.top_k", QueryConfig.top_k),
        options=("--top-k", "-k"),
        form="top_k",
    ),
    RequestField(
        "threshold",
        "similarity",
        "Minimum cosine similarity, -1 to 1.",
        {"kb query": Offer(), "kb ask": Offer()},
        options=("--threshold", "-t"),
    ),
    RequestField(
        "rerank",
        "switch",
        "Re-rank the best candidates with rerank.backend, the chat model unless set.",
        {"kb query": Offer()},
        # Off for the chat model, on for a cross-encoder (kb.config): no one value to name.
        default=Default("query.rerank"),
        options=("--rerank/--no-rerank",),
    ),
    RequestField(
        "explain",
        "flag",
        "Show each hit's vector and text rank and score, the fused score, what the learned "
        "ranker made of it, and a cross-encoder's score.",
        {"kb query": Offer()},
        options=("--explain",),
    ),
    RequestField(
        "owner",
        "flag",
        "Do not read first-person text as about the owner.",
        {"kb query": Offer(name="no_owner"), "kb ask": Offer(name="no_owner")},
        options=("--no-owner",),
        inverted=True,
    ),
    RequestField(
        "path_prefix",
        "path",
        "Only notes in this folder (and its subfolders), e.g. 'Projects/', or this note.",
        _FILTERED,
        options=("--path", "-p"),
        form="path",
        label="Folder or note",
        example="Projects/",
    ),
    RequestField(
        "tags",
        "tags",
        "Only notes with all these tags, separated by spaces or commas (a tag also matches "
        "the tags nested under it: project matches project/kb).",
        _FILTERED,
        options=("--tag",),
        form="tags",
        label="Tags",
        example="travel work/meetings",
    ),
    RequestField(
        "after",
        "day",
        "Only notes dated on or after this day, YYYY-MM-DD (the note's date: its date "
        "property, its daily-note name, a date in its file name, else its file's day).",
        _FILTERED,
        options=("--after",),
        form="after",
        label="Dated from",
    ),
    RequestField(
        "before",
        "day",
        "Only notes dated before this day, YYYY-MM-DD (the note's date).",
        _FILTERED,
        options=("--before",),
        form="before",
        label="Dated before",
    ),
    RequestField(
        "modified_after",
        "time",
        "Only notes whose file was modified at or after this time: YYYY-MM-DD, or with a "
        "time, YYYY-MM-DDTHH:MM:SS (local time unless it gives its offset).",
        _FILTERED,
        options=("--modified-after",),
        form="modified_after",
        label="Modified from",
    ),
    RequestField(
        "modified_before",
        "time",
        "Only notes whose file was modified before this time: YYYY-MM-DD, or with a time, "
        "YYYY-MM-DDTHH:MM:SS (local time unless it gives its offset).",
        _FILTERED,
        options=("--modified-before",),
        form="modified_before",
        label="Modified before",
    ),
)
FILTERS: tuple[RequestField, ...] = tuple(f for f in FIELDS if f.filter)
BY_NAME: Mapping[str, RequestField] = {f.name: f for f in FIELDS}


def offered(use: Use) -> tuple[RequestField, ...]:
    """The fields `use` offers, in the table's order."""
    return tuple(f for f in FIELDS if use in f.offers)


def read(field: RequestField, given: str | Sequence[str] | None) -> FilterValue:
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


def given_values(use: Use, params: Mapping[str, object]) -> dict[str, object]:
    """What a face's parameters (`with_fields`) received, by their fields' names."""
    values: dict[str, object] = {}
    for f in offered(use):
        value = params.get(f.param(use))
        values[f.name] = not value if f.inverted else value
    return values


def search_request(values: Mapping[str, object]) -> SearchRequest:
    """The request of the values a face read, by their fields' names: a value not given (None,
    no tags) is left to the configuration, a filter not given filters nothing."""
    # Imported here: every `kb` command loads this module, and only a search the store.
    from kb.services.searching import SearchRequest
    from kb.store import SearchFilter

    filters: dict[str, Any] = {f.name: values[f.name] for f in FILTERS if values.get(f.name)}
    given: dict[str, Any] = {
        f.name: values[f.name] for f in FIELDS if not f.filter and values.get(f.name) is not None
    }
    return SearchRequest(**given, filters=SearchFilter(**filters))


T = TypeVar("T")


def with_fields(
    use: Use, parameter: Callable[[RequestField], object]
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A face's command, whose `**fields` receive the request's fields, given a signature
    that names them: after its own parameters, one keyword parameter per field `use` offers,
    annotated by `parameter` (the type the face reads it as, and how). typer makes a
    command's argument and options, and the MCP SDK a tool's arguments, from its signature:
    this is how each face's fields come from FIELDS."""

    def named(command: Callable[..., T]) -> Callable[..., T]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        added = [
            inspect.Parameter(
                f.param(use),
                inspect.Parameter.KEYWORD_ONLY,
                default=_unset(f),
                annotation=parameter(f),
            )
            for f in offered(use)
        ]
        # inspect.signature, which both libraries call, returns a function's __signature__.
        command.__dict__["__signature__"] = signature.replace(parameters=[*own, *added])
        return command

    return named


def _unset(f: RequestField) -> object:
    """A field's parameter's value when it is not given: none; the text is always given."""
    if f.kind == "text":
        return inspect.Parameter.empty
    return False if f.kind == "flag" else None


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
