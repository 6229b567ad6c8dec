"""The README's screenshots, made again: kb serve's search page (docs/images/search.png) and
kb's Obsidian pane (docs/images/obsidian-pane.png), on the example vault with the offline
provider, in the system's Chromium.

The Obsidian app cannot run here, so the pane is the plugin's own code (obsidian/src/parse.ts
and render.ts, bundled by esbuild) rendering kb serve's answers for a note, with the plugin's
styles.css, in a frame that borrows the look of Obsidian's default light theme.

    .venv/bin/python scripts/screenshots.py     # after `npm ci` in obsidian/
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
PLUGIN = ROOT / "obsidian"
VAULT = ROOT / "examples" / "vault"
QUESTION = "when did I climb a mountain"
NOTE = "Projects/Billing Anomaly Detection.md"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Obsidian's default light theme, the variables the plugin's styles read.
FRAME = """<!doctype html><meta charset="utf-8"><style>
:root { --text-normal: #222; --text-muted: #5c5c5c; --text-faint: #ababab;
  --text-accent: #8a5cf5; --text-error: #e93147; --text-warning: #ec7500;
  --background-modifier-hover: rgba(0,0,0,.067); --font-ui-small: 13px;
  --font-ui-smaller: 12px; --font-ui-medium: 15px; --radius-s: 4px; }
body { margin: 0; font: 14px -apple-system, "Segoe UI", Inter, Roboto, sans-serif;
  color: var(--text-normal); display: grid; grid-template-columns: 44px 1fr 360px;
  grid-template-rows: 1fr 26px; height: 100vh; overflow: hidden; }
.ribbon { background: #f6f6f6; border-right: 1px solid #e3e3e3; grid-row: 1 / 3; }
.editor { padding: 28px 48px; overflow: hidden; background: #fff; }
.editor h1 { font-size: 26px; margin: 0 0 16px; }
.editor pre { font-family: inherit; font-size: 15px; line-height: 1.6; white-space: pre-wrap;
  margin: 0; color: #333; }
.side { background: #f6f6f6; border-left: 1px solid #e3e3e3; overflow: hidden; }
.tab { padding: 8px 14px; font-size: 13px; color: var(--text-muted);
  border-bottom: 1px solid #e3e3e3; background: #fbfbfb; }
.statusbar { grid-column: 2 / 4; display: flex; justify-content: flex-end; align-items: center;
  padding: 0 12px; font-size: 12px; color: var(--text-muted); background: #f6f6f6;
  border-top: 1px solid #e3e3e3; }
</style>
<div class="ribbon"></div>
<div class="editor"><h1>TITLE</h1><pre>TEXT</pre></div>
<div class="side"><div class="tab">Related notes (kb)</div><div class="kb-pane"></div></div>
<div class="statusbar"><span class="kb-status"></span></div>
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """kb serve on the example vault, indexed into a fresh data directory."""
    config = folder / "kb.toml"
    config.write_text(
        f'owner_name = "Alex Doe"\ndata_dir = "{folder / "data"}"\n\n[[vaults]]\n'
        f'name = "example"\npath = "{VAULT}"\npersonal = ["Alex/**"]\n\n[llm]\n'
        'provider = "fake"\nchat_model = "offline-digest"\nembed_model = "hash-256"\n'
    )
    kb = [sys.executable, "-m", "kb", "--config", str(config)]
    subprocess.run([*kb, "index", "--wait"], check=True, capture_output=True)
    port = _free_port()
    server = subprocess.Popen(
        [*kb, "serve", "--port", str(port)], stderr=subprocess.PIPE, text=True
    )
    assert server.stderr is not None
    line = server.stderr.readline()
    if not line.startswith("kb serve: http"):
        raise SystemExit(f"kb serve did not start: {line}{server.stderr.read()}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.load(answer)


def _bundle(folder: Path) -> str:
    out = folder / "pane.js"
    subprocess.run(
        ["npx", "esbuild", "test/pane-page.ts", "--bundle", "--format=iife", f"--outfile={out}"],
        cwd=PLUGIN,
        check=True,
        capture_output=True,
    )
    return out.read_text()


def _frame(title: str) -> str:
    text = (VAULT / NOTE).read_text().split("\n---\n", 1)[-1]
    lines = [line for line in text.splitlines() if not line.startswith("# ")][:40]
    body = "\n".join(lines).replace("&", "&amp;").replace("<", "&lt;")
    return FRAME.replace("TITLE", title).replace("TEXT", body)


def main() -> None:
    chromium = os.environ.get("KB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, served(Path(tmp)) as url:
        query = urllib.parse.urlencode(
            {"vault": "example", "path": NOTE, "top_k": 8, "unlinked": "true"}
        )
        related = _json(f"{url}/api/related?{query}")
        status = _json(f"{url}/api/status")
        script = _bundle(Path(tmp))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 1000, "height": 760})
            page.goto(f"{url}/?" + urllib.parse.urlencode({"q": QUESTION}))
            page.locator("article.card details").first.evaluate("d => d.open = true")
            # The box takes the focus as the page opens: let go of it, as a reader would.
            page.evaluate("document.activeElement.blur()")
            page.screenshot(path=str(IMAGES / "search.png"))
            pane = browser.new_page(viewport={"width": 1200, "height": 760})
            title = Path(NOTE).stem
            pane.set_content(_frame(title))
            pane.add_style_tag(path=str(PLUGIN / "styles.css"))
            pane.add_script_tag(content=script)
            pane.evaluate("([r, s, t]) => window.kbPane(r, s, t, 8)", [related, status, title])
            pane.screenshot(path=str(IMAGES / "obsidian-pane.png"))
            browser.close()
    print(f"wrote {IMAGES / 'search.png'} and {IMAGES / 'obsidian-pane.png'}")


if __name__ == "__main__":
    main()
