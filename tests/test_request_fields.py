"""The fields of a search or a question, defined once (kb.services.request_fields): the table
holds every field of a request, each face offers exactly the fields the table gives it, within
the table's bounds for that face, and says where each default comes from in the table's words."""

from __future__ import annotations

import dataclasses

import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from kb.cli.app import app
from kb.config import MAX_TOP_K, AskConfig, QueryConfig
from kb.results import SEARCH_MODES
from kb.services.request_fields import (
    BY_NAME,
    FIELDS,
    MODE_MEANINGS,
    MODES,
    USES,
    Use,
    offered,
)
from kb.services.searching import SearchRequest
from kb.store import SearchFilter
from kb.web.forms import read_form
from support.fake_kb import Kb
from support.reading import tool_schemas

COMMANDS: dict[Use, str] = {"kb query": "query", "kb ask": "ask"}
TOOLS: dict[Use, str] = {"mcp search": "search", "mcp ask": "ask"}


def test_the_table_holds_every_field_of_a_request() -> None:
    # The paths and vaults a search keeps to are kb's to set, never a face's.
    asked = {f.name for f in dataclasses.fields(SearchRequest)} - {"filters"}
    filtered = {f.name for f in dataclasses.fields(SearchFilter)} - {"paths", "vaults"}
    assert [f.name for f in FIELDS] == list(BY_NAME)
    assert set(BY_NAME) == asked | filtered
    assert all(f.filter == (f.name in filtered) for f in FIELDS)
    assert all(f.offers for f in FIELDS) and all(set(f.offers) <= set(USES) for f in FIELDS)


def test_the_modes_are_the_search_modes_the_default_first() -> None:
    assert sorted(MODES) == sorted(SEARCH_MODES) == sorted(MODE_MEANINGS)
    assert MODES[0] == QueryConfig.mode


def test_each_face_offers_the_fields_the_table_gives_it(kb: Kb) -> None:
    cli = typer.main.get_command(app)
    assert isinstance(cli, TyperGroup)
    for use, command in COMMANDS.items():
        params = {p.name for p in cli.commands[command].params} - {"as_json"}
        assert params == {f.param(use) for f in offered(use)}, use
    tools = tool_schemas(kb)
    for use, tool in TOOLS.items():
        assert set(tools[tool]["properties"]) == {f.param(use) for f in offered(use)}, use
        assert tools[tool]["required"] == [BY_NAME["text"].param(use)]
    assert set(read_form({}).given) == {f.form for f in offered("page")}


def test_each_face_holds_top_k_to_its_own_bound(kb: Kb) -> None:
    top_k = BY_NAME["top_k"]
    assert {use: top_k.most(use) for use in USES} == {
        "kb query": MAX_TOP_K,
        "kb ask": MAX_TOP_K,
        "mcp search": 50,
        "mcp ask": 20,
        "page": 50,
    }
    for use, command in COMMANDS.items():
        most = top_k.most(use)
        past = CliRunner().invoke(app, [command, "x", "-k", str(most + 1)], env={"COLUMNS": "300"})
        assert past.exit_code == 2 and f"less than or equal to {most}" in past.output, use
    tools = tool_schemas(kb)
    for use, tool in TOOLS.items():
        bounded, _ = tools[tool]["properties"]["top_k"]["anyOf"]
        assert bounded["maximum"] == top_k.most(use)


def test_a_default_is_named_where_it_comes_from() -> None:
    top_k = BY_NAME["top_k"]
    searched = f"(default: query.top_k, {QueryConfig.top_k})."
    assert top_k.help_in("kb query") == f"How many chunks {searched}"
    assert top_k.help_in("mcp search") == f"How many passages {searched}"
    for use in ("kb ask", "mcp ask"):
        assert top_k.help_in(use).endswith(f"(default: ask.passages, {AskConfig.passages}).")
    assert (
        BY_NAME["mode"].help_in("kb query").endswith(f"(default: query.mode, {QueryConfig.mode}).")
    )
