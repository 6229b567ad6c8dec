"""`kb obsidian install VAULT`: kb's Obsidian plugin, built in the repository's `obsidian/`,
copied into a vault's plugins folder, where Obsidian finds it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from kb.cli.shared import fail, stdout
from kb.errors import KbError

# What Obsidian loads of a plugin: the bundle, its manifest (id "kb"), its styles.
PLUGIN_FILES = ("main.js", "manifest.json", "styles.css")
# The plugin's sources beside kb's (a checkout, installed with `pip install -e`): where
# `npm run build` leaves main.js.
SOURCE = Path(__file__).resolve().parents[3] / "obsidian"

app = typer.Typer(help="kb inside Obsidian: its plugin.", no_args_is_help=True)


@app.command("install")
def install_command(
    vault: Annotated[
        Path, typer.Argument(file_okay=False, help="The Obsidian vault (the folder it opens).")
    ],
    plugin: Annotated[
        Path,
        typer.Option("--from", file_okay=False, help="The built plugin's folder."),
    ] = SOURCE,
) -> None:
    """Copy kb's Obsidian plugin (main.js, manifest.json, styles.css) into
    VAULT/.obsidian/plugins/kb/; then turn it on in Obsidian's community plugins."""
    try:
        target = install(plugin, vault)
    except KbError as exc:
        raise fail(str(exc)) from None
    stdout().print(
        f"kb's plugin is in {target}: turn it on in Obsidian (Settings → Community plugins), "
        "with `kb serve` running",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def install(plugin: Path, vault: Path) -> Path:
    """The plugin's files copied into the vault; the folder they are in."""
    if not (plugin / "main.js").is_file():
        raise KbError(
            f"kb's Obsidian plugin is not built ({plugin / 'main.js'} is missing): build it with "
            f"`cd {plugin} && npm ci && npm run build` (or scripts/test-obsidian)"
        )
    if not (vault / ".obsidian").is_dir():
        raise KbError(
            f"{vault} is not an Obsidian vault (no .obsidian/ folder): open it in Obsidian once"
        )
    target = vault / ".obsidian" / "plugins" / "kb"
    target.mkdir(parents=True, exist_ok=True)
    for name in PLUGIN_FILES:
        shutil.copyfile(plugin / name, target / name)
    return target
