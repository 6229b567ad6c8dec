"""What an MCP tool argument may hold, checked once where it enters kb, and the one line that
says what is wrong with it.

A model or an attacker can send anything JSON holds: a NUL character (PostgreSQL text cannot
hold one), a path longer than the system allows, an offset past PostgreSQL's bigint. The
argument types here refuse those before a tool runs; `ArgumentCheckedServer` turns the SDK's
many-line validation report into one line a model can act on.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError
from pydantic_core import ErrorDetails

from kb.mcp.stdio import StdioServer
from kb.services.inputs import MAX_OFFSET, NAME_BYTES, path_text, plain_text
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult


def _whole_number(value: object) -> object:
    """A whole number's value as it came, refused if it is JSON's true or false: Python
    counts a bool as 0 or 1, so `top_k: true` would be read as 1."""
    if isinstance(value, bool):
        raise ValueError(f"must be a whole number, not {str(value).lower()}")
    return value


# Last in a whole number's annotations, after its range: placed before the range, pydantic
# would write the range into the tool's schema under names no client reads (`ge`, `le`).
WHOLE_NUMBER = BeforeValidator(_whole_number)
Text = Annotated[str, AfterValidator(plain_text)]
# A vault's name, as the config gives it.
Name = Annotated[Text, Field(max_length=NAME_BYTES)]
PathText = Annotated[str, AfterValidator(path_text)]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET), WHOLE_NUMBER]


class ArgumentCheckedServer(StdioServer):
    """An MCP server that reports a tool's invalid arguments in one line."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(_problem(error) for error in cause.errors())
            raise ToolError(f"invalid arguments to {name}: {problems}") from cause


# pydantic's wording, "Input should be …", names no argument; these say what a value must be.
_MUST = {
    "missing": "required",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "bool_type": "must be true or false",
    "string_unicode": "must be valid Unicode (no lone surrogate)",
}


def _problem(error: ErrorDetails) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "arguments"
    ctx = error.get("ctx", {})
    kind = error["type"]
    if kind == "value_error":
        message = str(ctx["error"])
    elif kind == "greater_than_equal":
        message = f"must be at least {ctx['ge']}"
    elif kind == "less_than_equal":
        message = f"must be at most {ctx['le']}"
    elif kind == "string_too_long":
        message = f"must be at most {ctx['max_length']} characters"
    elif kind == "literal_error":
        message = f"must be {ctx['expected']}"
    else:
        message = _MUST.get(kind, error["msg"])
    return f"{where}: {message}"
