"""The `kb` command: `launch` is its entry point (a query a running daemon can answer goes
to it), `app` its global options and commands, each command in the module of its kind
(`index`, `query`, `serve`, `status`, `background`, `init`) over what they share (`shared`),
and `render` prints search results on a terminal.

Each command imports what only it needs when it runs: `kb --help` and `kb query` load no
Markdown parser, file watcher or answer prompts.
"""
