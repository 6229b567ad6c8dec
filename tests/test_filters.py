"""The search filters, defined once (kb.services.request_fields): every face offers each of them
(`kb query` and `kb ask`'s options, the MCP tools `search` and `ask`'s arguments, the web
page's form fields), reads the same text into the same filter, and says in the same words
what it cannot read. A filter added to the definition that a face lacks fails here."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from typing import Any

import anyio
import pytest
import typer
from mcp import Client
from starlette.testclient import TestClient
from typer.core import TyperGroup
from typer.testing import CliRunner

from kb.cli.app import app
from kb.cli.query import forwarded
from kb.mcp.tools import build_server
from kb.results import SearchResult
from kb.search.answer import NOTHING_FOUND, Answer, Timings
from kb.services.request_fields import FILTERS, MAX_TAGS, RequestField, read
from kb.services.searching import SearchRequest
from kb.store import SearchFilter
from kb.web.forms import FormError, read_form
from kb.web.routes import web_app
from support.fake_kb import Kb
from support.reading import tool_schemas, tool_text

# Each filter as a person writes it (tags several times), and what it is read as.
GIVEN: dict[str, tuple[tuple[str, ...], Any]] = {
    "path_prefix": (("Projects/",), "Projects/"),
    "tags": (("travel,", "#work/meetings"), ("travel", "work/meetings")),
    "after": (("2024-04-01",), dt.date(2024, 4, 1)),
    "before": (("2024-05-01T10:00:00",), dt.date(2024, 5, 1)),
    "modified_after": (("2024-01-02",), dt.datetime(2024, 1, 2)),
    "modified_before": (("2024-03-04T05:06",), dt.datetime(2024, 3, 4, 5, 6)),
}
EXPECTED = SearchFilter(**{name: value for name, (_, value) in GIVEN.items()})


def _field(name: str) -> RequestField:
    return next(f for f in FILTERS if f.name == name)


def test_every_filter_sets_a_field_of_the_search_filter() -> None:
    # The paths and vaults a search keeps to are kb's to set, never a face's.
    fields = {f.name for f in dataclasses.fields(SearchFilter)} - {"paths", "vaults"}
    assert {f.name for f in FILTERS} == fields == set(GIVEN)


def test_every_filter_is_offered_by_every_face(kb: Kb) -> None:
    cli = typer.main.get_command(app)
    assert isinstance(cli, TyperGroup)
    for command in ("query", "ask"):
        options = {p.name: p.opts for p in cli.commands[command].params}
        for f in FILTERS:
            assert f.options == tuple(options.get(f.name, ())), (command, f.name)
    tools = tool_schemas(kb)
    for tool in ("search", "ask"):
        arguments = tools[tool]["properties"]
        for f in FILTERS:
            assert arguments.get(f.name, {}).get("description") == f.help, (tool, f.name)
    web = TestClient(web_app(kb, host="127.0.0.1", token=None), base_url="http://127.0.0.1:8766")
    for page in ("/", "/ask"):
        html = web.get(page).text
        for f in FILTERS:
            assert f'name="{f.form}"' in html and f"{f.label} <input" in html, (page, f.form)


class Recorder:
    """A search service that keeps the requests the faces make of it, and finds nothing."""

    def __init__(self) -> None:
        self.requests: list[SearchRequest] = []

    def search(self, request: SearchRequest) -> SearchResult:
        self.requests.append(request)
        return SearchResult([], "hybrid")

    def ask(self, request: SearchRequest, **streaming: object) -> Answer:
        self.requests.append(request)
        nothing = Timings(0.0, None, 0.0, 0.0)
        return Answer(request.text, NOTHING_FOUND, [], [], None, True, nothing, "hybrid", ())


def test_every_face_reads_the_filters_the_same_way(kb: Kb, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    monkeypatch.setattr(kb, "search_service", lambda: recorder)
    # `kb query`'s options, read as the daemon reads a launcher's command line.
    options = [
        arg
        for name, (texts, _) in GIVEN.items()
        for t in texts
        for arg in (_field(name).options[0], t)
    ]
    assert forwarded(kb)(("x", *options)) is not None
    arguments = {
        name: list(texts) if _field(name).kind == "tags" else texts[0]
        for name, (texts, _) in GIVEN.items()
    }

    async def main() -> None:
        async with Client(build_server(kb)) as client:
            for tool, text in (("search", "query"), ("ask", "question")):
                result = await client.call_tool(tool, {text: "x", **arguments})
                assert not result.is_error, tool_text(result)

    anyio.run(main)
    form = read_form({"q": "x", **{_field(n).form: " ".join(t) for n, (t, _) in GIVEN.items()}})
    assert form.request is not None
    read_by = [r.filters for r in recorder.requests] + [form.request.filters]
    assert read_by == [EXPECTED] * 4  # kb query, MCP search and ask, the page


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        ("after", "soon", "'soon' is not a day (YYYY-MM-DD)"),
        ("before", "2024-13-01", "'2024-13-01' is not a day (YYYY-MM-DD)"),
        (
            "modified_after",
            "noon",
            "'noon' is not a day or a time (YYYY-MM-DD, or YYYY-MM-DDTHH:MM:SS)",
        ),
        ("tags", " ".join(f"t{i}" for i in range(MAX_TAGS + 1)), f"21 tags; at most {MAX_TAGS}"),
    ],
)
def test_what_a_filter_cannot_read_is_said_alike_by_every_face(
    kb: Kb, name: str, text: str, error: str
) -> None:
    f = _field(name)
    with pytest.raises(ValueError, match=re.escape(error)):
        read(f, text)
    shown = CliRunner().invoke(app, ["query", "x", f.options[0], text], env={"COLUMNS": "300"})
    assert shown.exit_code == 2 and f"Invalid value for '{f.options[0]}': {error}" in shown.output
    with pytest.raises(FormError) as page:
        read_form({"q": "x", f.form: text})
    assert str(page.value) == f"{f.form}: {error}"

    async def main() -> None:
        async with Client(build_server(kb)) as client:
            for tool, asked in (("search", "query"), ("ask", "question")):
                value: object = text.split() if f.kind == "tags" else text
                result = await client.call_tool(tool, {asked: "x", name: value})
                assert tool_text(result) == f"invalid arguments to {tool}: {name}: {error}"

    anyio.run(main)


def test_an_empty_filter_filters_nothing() -> None:
    for f in FILTERS:
        assert read(f, None) in (None, ())
        assert read(f, " ") in (None, ())
        assert read(f, []) in (None, ())
