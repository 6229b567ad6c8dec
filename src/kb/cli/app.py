"""The `kb` command: its global options, and each command from the module of its kind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kb.cli import background, index, init, plugin, query, related, serve, status
from kb.cli.shared import Options

app = typer.Typer(
    help="kb: a contextual search index of your Markdown vault.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            envvar="KB_CONFIG",
            dir_okay=False,
            help="Config file (default: ~/.config/kb/config.toml).",
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log more.")] = False,
) -> None:
    ctx.obj = Options(config, verbose)


app.command()(index.index)
app.command()(index.reindex)
app.command()(query.query)
app.command(name="ask")(query.ask_command)
app.command(name="mcp")(serve.mcp_command)
app.command(name="serve")(serve.serve_command)
app.command()(status.status)
app.command()(related.related)
app.command()(background.daemon)
app.command(name="worker")(background.worker_command)
app.command(name="init")(init.init_command)
app.command(name="verify")(index.verify_command)
app.command(name="forget")(index.forget_command)
app.add_typer(plugin.app, name="obsidian")
