"""The `kb` command: `launch` is its entry point (a query a running daemon can answer goes
to it), `app` holds the commands, `render` prints search results on a terminal."""
