"""`kb mcp`: the MCP server (`server`), its tools' argument types (`arguments`) and the
stdin reader that answers what the protocol library would drop (`stdio`)."""
