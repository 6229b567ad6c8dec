"""What a test reads back: a search of its store, its own SQL's rows, a note's chunks, a
tool's text, the MCP tools' argument schemas, a hit's similarity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from mcp import Client
from mcp.types import CallToolResult, TextContent

from kb.models.base import Embedder
from kb.results import SearchResult
from kb.search.hybrid import run
from kb.search.plan import SearchPlan
from kb.store import SearchHit, Store

if TYPE_CHECKING:
    from support.fake_kb import Kb


def search_store(store: Store, embedder: Embedder, plan: SearchPlan) -> SearchResult:
    """A search of a test's store (`kb.search.hybrid.run`, given the repositories it reads)."""
    return run(
        embedder, plan, candidates=store.candidates, vectors=store.vectors, queue=store.queue
    )


def rows(store: Store, query: str, *params: object) -> list[dict[str, Any]]:
    """Rows of a test's own SQL (statements written as literals, as kb's are)."""
    with store.pool.connection() as conn:
        return conn.execute(query, params).fetchall()


def stored_chunks(store: Store, path: str) -> list[dict[str, Any]]:
    """A note's chunk rows, in order."""
    return rows(
        store,
        "SELECT c.* FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE d.path = %s ORDER BY position",
        path,
    )


def tool_text(result: CallToolResult) -> str:
    """The text of a tool's answer: kb's tools answer in text."""
    content = result.content[0]
    assert isinstance(content, TextContent)
    return content.text


def similarity(hit: SearchHit) -> float:
    """A hit's cosine similarity, which every search that embedded the query gives."""
    assert hit.similarity is not None
    return hit.similarity


def tool_schemas(kb: Kb) -> dict[str, dict[str, Any]]:
    """The MCP tools' argument schemas, as a client lists them."""
    from kb.mcp.tools import build_server

    schemas: dict[str, dict[str, Any]] = {}

    async def main() -> None:
        async with Client(build_server(kb)) as client:
            for tool in (await client.list_tools()).tools:
                schemas[tool.name] = tool.input_schema

    anyio.run(main)
    return schemas
