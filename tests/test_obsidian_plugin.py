"""`kb obsidian install`: the built plugin copied into a vault, or one line saying why not.
(The plugin itself is tested by scripts/test-obsidian.)"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kb.cli.app import app
from kb.cli.plugin import PLUGIN_FILES, SOURCE
from support.paths import ROOT


def _built(folder: Path) -> Path:
    folder.mkdir()
    for name in PLUGIN_FILES:
        (folder / name).write_text(f"/* {name} */")
    return folder


def test_the_plugin_is_copied_into_the_vaults_plugins(tmp_path: Path) -> None:
    plugin = _built(tmp_path / "built")
    vault = tmp_path / "notes"
    (vault / ".obsidian").mkdir(parents=True)
    done = CliRunner().invoke(app, ["obsidian", "install", str(vault), "--from", str(plugin)])
    assert done.exit_code == 0, done.output
    target = vault / ".obsidian" / "plugins" / "kb"
    assert sorted(p.name for p in target.iterdir()) == sorted(PLUGIN_FILES)
    assert (target / "main.js").read_text() == "/* main.js */"
    assert "Community plugins" in done.output
    # Again, over the old copy: the new files.
    (plugin / "main.js").write_text("/* newer */")
    again = CliRunner().invoke(app, ["obsidian", "install", str(vault), "--from", str(plugin)])
    assert again.exit_code == 0
    assert (target / "main.js").read_text() == "/* newer */"


def test_an_unbuilt_plugin_or_a_folder_obsidian_never_opened_is_one_line(tmp_path: Path) -> None:
    vault = tmp_path / "notes"
    (vault / ".obsidian").mkdir(parents=True)
    unbuilt = tmp_path / "src"
    unbuilt.mkdir()
    refused = CliRunner().invoke(app, ["obsidian", "install", str(vault), "--from", str(unbuilt)])
    assert refused.exit_code == 1
    assert "kb's Obsidian plugin is not built" in refused.output
    assert "npm ci && npm run build" in refused.output
    plain = tmp_path / "plain"
    plain.mkdir()
    plugin = _built(tmp_path / "built")
    refused = CliRunner().invoke(app, ["obsidian", "install", str(plain), "--from", str(plugin)])
    assert refused.exit_code == 1 and "no .obsidian/ folder" in refused.output
    assert not (plain / ".obsidian").exists()


def test_the_plugin_is_found_beside_kbs_sources_with_the_manifests_id() -> None:
    assert SOURCE == ROOT / "obsidian"
    assert json.loads((SOURCE / "manifest.json").read_text())["id"] == "kb"
    assert (SOURCE / "styles.css").is_file()
