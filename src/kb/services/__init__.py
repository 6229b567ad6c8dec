"""What kb does, once for every face: the CLI, the MCP server and the daemon's socket."""
