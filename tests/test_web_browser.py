"""`kb serve` in a real browser: Chromium (the system's, see scripts/test-browser) driven by
Playwright against a whole `kb serve` process on the example vault with the fake provider.

Each test saves a screenshot of the page it checked under test-output/screenshots (or
$KB_SCREENSHOTS). Without a Chromium the tests are skipped, unless KB_REQUIRE_BROWSER=1 says
they must run (the README's test command sets it).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Dialog, Page, expect, sync_playwright

from kb.config import AskConfig
from support.cli import kb_command
from support.configs import write_config
from support.paths import EXAMPLE_VAULT, ROOT

HOSTILE = "# Trap\n\nA <script>alert('owned')</script> and <img src=x onerror=alert(2)> trap.\n"
SHOTS = Path(os.environ.get("KB_SCREENSHOTS", ROOT / "test-output" / "screenshots"))
# A name that resolves to this machine, as a DNS-rebinding attacker's name would.
REBINDING_NAME = "rebind.example"
# A worker whose chat model takes a while, so that the page can be seen following it.
SLOW_WORKER = """
import sys, time
from pathlib import Path
from kb.config import load_config
from kb.container import Container
from kb.llm.fake import FakeChat, FakeEmbedder

class SlowChat(FakeChat):
    def complete(self, prompt):
        time.sleep(0.4)
        return super().complete(prompt)

config = load_config(Path(sys.argv[1]))
parts = Container.open(config)
parts.chat, parts.embedder = SlowChat("fake-chat"), FakeEmbedder("hash-256")
parts.worker(until_empty=True, concurrency=1).run()
parts.close()
"""


def _chromium() -> str | None:
    if (given := os.environ.get("KB_CHROMIUM")) and os.access(given, os.X_OK):
        return given
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    return None


CHROMIUM = _chromium()
if CHROMIUM is None:
    if os.environ.get("KB_REQUIRE_BROWSER") == "1":
        raise RuntimeError("KB_REQUIRE_BROWSER=1 but no Chromium: run scripts/test-browser")
    pytest.skip("no Chromium (scripts/test-browser installs it)", allow_module_level=True)


@dataclass(frozen=True)
class Served:
    url: str
    config: Path
    env: dict[str, str]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path, db_url: str) -> Iterator[Served]:
    """`kb serve` on a copy of the example vault (and a hostile note), indexed without
    waiting for the LLM context: the queue is full until a worker drains it."""
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, vault)
    (vault / "Trap.md").write_text(HOSTILE)
    config = write_config(tmp_path / "kb.toml", vault, name="example")
    env = {**os.environ, "KB_DATABASE_URL": db_url}
    subprocess.run(kb_command(config, "index"), env=env, check=True, capture_output=True)
    port = _free_port()
    server = subprocess.Popen(
        kb_command(config, "serve", "--port", str(port)),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    line = server.stderr.readline()  # printed once the page is served
    assert line.startswith("kb serve: http://127.0.0.1:"), line + server.stderr.read()
    try:
        yield Served(f"http://127.0.0.1:{port}", config, env)
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture
def page(served: Served) -> Iterator[Page]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--host-resolver-rules=MAP {REBINDING_NAME} 127.0.0.1",
            ],
        )
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        tab = context.new_page()
        dialogs: list[str] = []

        def refuse(dialog: Dialog) -> None:
            dialogs.append(dialog.message)
            dialog.dismiss()

        tab.on("dialog", refuse)
        yield tab
        browser.close()
        assert not dialogs, f"a note's script ran: {dialogs}"


def _shot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_search_with_filters_and_open_a_note(page: Page, served: Served) -> None:
    page.goto(served.url + "/")
    page.get_by_placeholder("Search your notes").fill("when did I climb a mountain")
    page.keyboard.press("Enter")
    page.wait_for_selector("article.card")
    assert "q=when+did+I+climb+a+mountain" in page.url  # the URL holds the search
    assert page.locator("article.card").count() == 5
    assert page.locator("article.card mark").count() > 0
    assert page.locator(".badge", has_text="your note").count() > 0
    _shot(page, "search")

    page.locator("summary", has_text="Filters").click()
    page.get_by_label("Folder or note").fill("Alex/")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**path=Alex%2F**")
    paths = page.locator(".where .path").all_inner_texts()
    assert paths and all(p.startswith("example/Alex/") for p in paths)
    _shot(page, "search-filtered")

    page.locator("article.card").first.get_by_role("link", name="Read the note").click()
    page.wait_for_selector("ol.lines")
    first = page.url.rsplit("#L", 1)[1]
    target = page.locator(f"#L{first}")
    assert "in-passage" in (target.get_attribute("class") or "")
    assert target.is_visible() and target.bounding_box() is not None
    box = target.bounding_box()
    assert box is not None and 0 <= box["y"] < 900  # scrolled to the passage
    _shot(page, "note")

    # The same search in another tab, from the address alone.
    other = page.context.new_page()
    other.goto(served.url + "/?q=when+did+I+climb+a+mountain")
    assert other.locator("article.card").count() == 5


def test_ask_streams_an_answer_with_citations_and_sources(page: Page, served: Served) -> None:
    page.goto(served.url + "/ask?q=which+miso+goes+into+the+ramen")
    page.wait_for_selector("section.answer.done", timeout=30_000)
    assert page.locator("a.cite").count() > 0
    cite = page.locator("a.cite").first.get_attribute("href")
    assert cite is not None and page.locator(cite).count() == 1  # a link to its passage
    # The passages the answer read: `[ask] passages` of them, fewer than a search lists.
    assert page.locator("section.answer article.card").count() == AskConfig.passages
    _shot(page, "ask")

    page.goto(served.url + "/ask?q=zebra&path=Nowhere%2F")
    page.wait_for_selector("section.answer.done")
    assert page.locator(".verdict").inner_text() == "Not in your notes"
    _shot(page, "ask-not-in-notes")


def test_the_status_page_moves_while_a_worker_drains_the_queue(page: Page, served: Served) -> None:
    page.goto(served.url + "/status")
    before = page.locator("[data-field=progress-text]").inner_text()
    done, _, rest = before.partition(" of ")
    assert rest.startswith("16 notes") and int(done) < 8, before  # most are queued
    _shot(page, "status-queued")
    worker = subprocess.Popen(
        [sys.executable, "-c", SLOW_WORKER, str(served.config)],
        env=served.env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # No reload: the page refreshes itself, and shows the worker at work.
        expect(page.locator(".beats li.alive", has_text="worker on")).to_be_visible(timeout=30_000)
        expect(page.locator("[data-field=progress-text]")).not_to_have_text(before)
        _shot(page, "status-draining")
        expect(page.locator("[data-field=progress-text]")).to_have_text(
            re.compile(r"^16 of 16 notes"), timeout=60_000
        )
    finally:
        assert worker.wait(timeout=120) == 0, worker.stderr.read() if worker.stderr else ""
    assert page.locator("[data-field=eta]").inner_text() == "-"
    _shot(page, "status-drained")


def test_a_hostile_note_is_text_and_a_foreign_host_gets_nothing(page: Page, served: Served) -> None:
    page.goto(served.url + "/?q=trap+script+alert&path=Trap.md")
    passage = page.locator("pre.passage").first.inner_text()
    assert "<script>alert('owned')</script>" in passage
    assert page.locator("pre.passage script, pre.passage img").count() == 0
    page.goto(served.url + "/note?vault=example&path=Trap.md")
    assert "<img src=x onerror=alert(2)>" in page.locator("ol.lines").inner_text()
    _shot(page, "hostile-note")

    port = served.url.rsplit(":", 1)[1]
    answer = page.goto(f"http://{REBINDING_NAME}:{port}/?q=mountain")
    assert answer is not None and answer.status == 403
    assert "does not answer to the name" in page.content()
    assert "Takao" not in page.content()
