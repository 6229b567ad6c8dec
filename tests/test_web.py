"""`kb serve`'s page over HTTP, in process: what each route shows, what the guard refuses,
and that a note's text is only ever shown as text. (The browser tests: test_web_browser.py.)"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.responses import PlainTextResponse
from starlette.testclient import TestClient

from kb.config import AskConfig
from kb.container import Container, open_store
from kb.errors import KbError
from kb.llm.fake import FakeChat
from kb.llm.ollama import OllamaChat, OllamaEmbedder
from kb.llm.openai import OpenAIChat
from kb.llm.profiles import UNKNOWN, ProfiledEmbedder
from kb.models.base import Prompt
from kb.search.answer import Answer, Timings
from kb.services.access import Access, access, host_refusal
from kb.services.note_reader import Vaults
from kb.web.cards import answer_pieces, note_lines, obsidian_url, segments
from kb.web.forms import FormError, read_form
from kb.web.routes import ANSWERS_AT_ONCE, Parts, build_app, web_app
from kb.web.server import STOP_GRACE, WebServer
from support.cli import kb_command, run_kb
from support.configs import write_config
from support.fake_kb import Kb
from support.http import QuietHandler, serving
from support.llm_server import Endless
from support.unprivileged import NoAccount, account, as_user

HOSTILE = "# Trap\n\nA <script>alert('owned')</script> and <img src=x onerror=alert(2)> trap.\n"


@pytest.fixture
def web(kb: Kb) -> TestClient:
    kb.sync()
    return TestClient(web_app(kb, host="127.0.0.1", token=None), base_url="http://127.0.0.1:8766")


def test_the_search_page_shows_cards_with_the_matched_words(web: TestClient) -> None:
    page = web.get("/", params={"q": "when did I climb Mount Takao"})
    assert page.status_code == 200
    assert page.text.count('<article class="card"') == 5
    assert "<mark>climbed</mark>" in page.text
    assert "your note" in page.text
    assert "Friday, 12 April 2024 — Mount Takao" in page.text  # the header path
    assert "vector #" in page.text and "text BM25 #" in page.text  # why it ranked
    # The note in the page, scrolled to the passage, and in Obsidian.
    assert "/note?vault=v&amp;path=Alex%2FJournal%2F2024-04-12.md&amp;start=" in page.text
    assert "obsidian://open?vault=vault&amp;file=Alex%2FJournal%2F2024-04-12" in page.text


def test_the_filters_of_kb_query_narrow_the_cards(web: TestClient) -> None:
    everywhere = web.get("/", params={"q": "Mount Takao Fuji", "top_k": "20"}).text
    assert "Clippings/" in everywhere and "Alex/Journal/" in everywhere
    mine = web.get("/", params={"q": "Mount Takao Fuji", "path": "Alex/", "mode": "text"}).text
    assert "Clippings/" not in mine and "Alex/Journal/" in mine
    assert 'value="Alex/"' in mine and '<option value="text" selected>' in mine
    later = web.get("/", params={"q": "Takao", "after": "2999-01-01"}).text
    assert "No passage matches with these filters." in later
    # The note's own date (its daily-note name here), not its file's time.
    that_day = web.get("/", params={"q": "Takao", "after": "2024-04-12", "before": "2024-04-13"})
    paths = {line for line in that_day.text.split('"') if line.startswith("/note?")}
    assert paths and all("2024-04-12.md" in p for p in paths)
    assert "<time>2024-04-12</time>" in that_day.text


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"q": "x", "mode": "psychic"}, "mode: 'psychic' is not one of vector, text, hybrid"),
        ({"q": "x", "after": "soon"}, "after: 'soon' is not a day (YYYY-MM-DD)"),
        ({"q": "x", "top_k": "100000"}, "top_k: '100000' is not a number from 1 to 50"),
        ({"q": "x" * 2001}, "q: the query is 2001 characters; at most 2000"),
        ({"q": "a\x00b"}, "q: contains a NUL character"),
        ({"q": "x", "path": "a/" + "b" * 300}, "path: the name"),
        ({"q": "x", "path": "Alex/../.."}, "path filter 'Alex/../..': '..' cannot name a folder"),
    ],
)
def test_a_bad_query_string_is_one_line(
    web: TestClient, params: dict[str, str], error: str
) -> None:
    page = web.get("/", params=params)
    assert page.status_code == 400
    assert error.replace("'", "&#39;") in page.text
    api = web.get("/api/search", params=params)
    assert api.status_code == 400 and api.json()["error"].startswith(error)


def test_the_note_page_shows_the_whole_note_with_the_passage_marked(web: TestClient) -> None:
    page = web.get(
        "/note", params={"vault": "v", "path": "Alex/Journal/2024-04-12.md", "start": 15, "end": 23}
    )
    assert page.status_code == 200
    assert page.text.count('class="in-passage') == 9
    assert 'id="L1"' in page.text and 'id="L45"' in page.text


@pytest.mark.parametrize(
    "path", ["../kb.toml", "/etc/passwd", "Alex/../../kb.toml", ".obsidian/app.json", "nope.md"]
)
def test_nothing_outside_a_vault_is_ever_read(web: TestClient, path: str) -> None:
    page = web.get("/note", params={"vault": "v", "path": path})
    assert page.status_code == 404 and "root:" not in page.text
    assert web.get("/api/note", params={"vault": "v", "path": path}).status_code == 404


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"path": "Alex/" + "é" * 200 + ".md"}, "path: the name"),
        # Under the system's limit alone, over it once the vault's root is in front.
        ({"path": "a/" * 2040 + "b.md"}, "no note"),
        ({"path": "Alex/Journal/2024-04-12.md", "start": "\u00b2"}, "start: '²' is not"),
        ({"path": "Alex/Journal/2024-04-12.md", "end": "\u0663"}, "end: '٣' is not"),
        ({"path": "Alex/Journal/2024-04-12.md", "start": "+3"}, "start: '+3' is not"),
        ({"path": "Alex/Journal/2024-04-12.md", "start": " 3"}, "start: ' 3' is not"),
    ],
)
def test_a_note_address_kb_cannot_read_is_one_line(
    kb: Kb, vault: Path, params: dict[str, str], error: str, caplog: Any
) -> None:
    web = _served(kb)
    for url in ("/note", "/api/note"):
        answer = web.get(url, params={"vault": "v", **params})
        assert answer.status_code in (400, 404), (url, answer.status_code)
        assert str(vault) not in answer.text and "Traceback" not in answer.text
        assert error.replace("'", "&#39;" if url == "/note" else "'") in answer.text
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


@pytest.mark.parametrize("top_k", ["\u00b2", "\u0663", "+3", "1_0"])
def test_a_number_that_is_not_ascii_digits_is_one_line(kb: Kb, top_k: str) -> None:
    web = _served(kb)
    for url in ("/", "/api/search", "/ask", "/api/ask"):
        answer = web.get(url, params={"q": "mountain", "top_k": top_k})
        assert answer.status_code == 400, (url, answer.status_code)
        assert "top_k: " in answer.text and "is not a number from 1 to 50" in answer.text


def _served(kb: Kb) -> TestClient:
    """The page as a browser meets it: a failure is the page's 500, not an exception here."""
    kb.sync()
    app = web_app(kb, host="127.0.0.1", token=None)
    return TestClient(app, base_url="http://127.0.0.1:8766", raise_server_exceptions=False)


def test_a_hostile_note_is_shown_as_text(kb: Kb, vault: Path) -> None:
    (vault / "Trap.md").write_text(HOSTILE)
    kb.sync()
    web = TestClient(web_app(kb, host="127.0.0.1", token=None), base_url="http://127.0.0.1:8766")
    for page in (
        web.get("/", params={"q": "trap script alert"}),
        web.get("/note", params={"vault": "v", "path": "Trap.md"}),
    ):
        assert "<script>alert" not in page.text and "<img src=x" not in page.text
        assert "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]


def test_the_answer_streams_as_events_then_comes_whole_with_its_sources(web: TestClient) -> None:
    with web.stream("GET", "/api/ask", params={"q": "when did I climb Mount Takao"}) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        events = [
            (block.split("\n")[0].removeprefix("event: "), json.loads(block.split("data: ", 1)[1]))
            for block in answer.read().decode().split("\n\n")
            if block.strip()
        ]
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "done" and kinds.count("text") > 1
    done = events[-1][1]
    assert '<a class="cite" href="#source-' in done["html"]
    # The passages the answer read: `[ask] passages` of them, fewer than a search lists.
    read = AskConfig.passages
    assert done["html"].count('<article class="card"') == read and done["cited"]


def test_an_answer_the_notes_do_not_hold_says_so(web: TestClient) -> None:
    with web.stream("GET", "/api/ask", params={"q": "zebra", "path": "Nowhere/"}) as answer:
        body = answer.read().decode()
    assert '<p class=\\"verdict\\">Not in your notes</p>' in body
    assert "not-in-notes" in body and '"not_in_notes": true' in body


def test_the_status_page_and_its_json(web: TestClient) -> None:
    page = web.get("/status")
    assert page.status_code == 200 and "15 of 15 notes have their LLM context" in page.text
    assert web.get("/status/panel").text.strip().startswith("<dl")
    assert web.get("/api/status").json()["documents"] == 15


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "attacker.example"},  # DNS rebinding: the name is not this server's
        {"host": "127.0.0.1:8766", "origin": "http://attacker.example"},
        {"host": "127.0.0.1:8766", "origin": "null"},
        {"host": "127.0.0.1:8766", "sec-fetch-site": "cross-site", "sec-fetch-mode": "cors"},
    ],
)
def test_another_sites_requests_get_nothing(web: TestClient, headers: dict[str, str]) -> None:
    for url in ("/?q=mountain", "/api/search?q=mountain", "/api/status", "/api/ask?q=x"):
        answer = web.get(url, headers=headers)
        assert answer.status_code == 403, (url, headers)
        assert "Takao" not in answer.text


OBSIDIAN = {"origin": "app://obsidian.md", "sec-fetch-site": "cross-site", "sec-fetch-mode": "cors"}


def test_the_obsidian_app_reads_the_json_api_with_the_token(kb: Kb) -> None:
    kb.sync()
    app = web_app(kb, host="127.0.0.1", token="s3cret")
    web = TestClient(app, base_url="http://127.0.0.1:8766")
    bearer = {**OBSIDIAN, "authorization": "Bearer s3cret"}
    found = web.get("/api/search", params={"q": "mountain"}, headers=bearer)
    assert found.status_code == 200 and "Climbed" in found.text
    assert found.headers["access-control-allow-origin"] == "app://obsidian.md"
    assert found.headers["content-security-policy"].startswith("default-src 'none'")
    with web.stream("GET", "/api/ask", params={"q": "mountain"}, headers=bearer) as answer:
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == "app://obsidian.md"
        done = answer.read().decode().split("event: done\ndata: ")[1]
    # The answer's text and sources, for a client that renders them itself.
    answered = json.loads(done)
    assert answered["sources"] and set(answered["sources"][0]) == {
        "vault",
        "path",
        "header_path",
        "start_line",
        "end_line",
    }
    assert isinstance(answered["text"], str)
    # No token, no answer; the app may read that it was refused.
    refused = web.get("/api/search", params={"q": "mountain"}, headers=OBSIDIAN)
    assert refused.status_code == 401 and "Climbed" not in refused.text
    assert refused.headers["access-control-allow-origin"] == "app://obsidian.md"
    # Its fetch asks before sending the bearer header: allowed, GET only, nothing read.
    ask = {**OBSIDIAN, "access-control-request-method": "GET"}
    preflight = web.options("/api/ask?q=x", headers=ask)
    assert preflight.status_code == 204 and preflight.text == ""
    assert preflight.headers["access-control-allow-methods"] == "GET"
    assert preflight.headers["access-control-allow-headers"] == "authorization"
    assert preflight.headers["access-control-allow-private-network"] == "true"
    assert web.options("/api/ask", headers={**ask, "host": "attacker.example"}).status_code == 403
    # The app's origin opens the JSON API only: no page, nothing written.
    assert web.get("/", params={"q": "mountain"}, headers=bearer).status_code == 403
    assert web.options("/", headers=ask).status_code == 405
    assert web.post("/api/search?q=x", headers=bearer).status_code == 405


def test_other_origins_get_no_cors_and_nothing(kb: Kb) -> None:
    kb.sync()
    web = TestClient(
        web_app(kb, host="127.0.0.1", token="s3cret"), base_url="http://127.0.0.1:8766"
    )
    for origin in ("https://evil.example", "app://obsidian.md.evil.example", "app://evil"):
        headers = {"origin": origin, "authorization": "Bearer s3cret"}
        answer = web.get("/api/search", params={"q": "mountain"}, headers=headers)
        assert answer.status_code == 403 and "Climbed" not in answer.text
        assert "access-control-allow-origin" not in answer.headers
        preflight = web.options("/api/search", headers={"origin": origin})
        assert preflight.status_code == 405
        assert "access-control-allow-origin" not in preflight.headers
    # The page's own calls carry no CORS header either.
    same = web.get("/api/status", headers={"authorization": "Bearer s3cret"})
    assert same.status_code == 200 and "access-control-allow-origin" not in same.headers


def test_the_vaults_are_listed_with_their_folder_names(kb: Kb, web: TestClient) -> None:
    (kb.config.vaults[0].path / ".obsidian").mkdir(exist_ok=True)
    folder = kb.config.vaults[0].path.name
    app = TestClient(web_app(kb, host="127.0.0.1", token=None), base_url="http://127.0.0.1:8766")
    assert app.get("/api/vaults").json() == {
        "vaults": [{"name": "v", "folder": folder, "obsidian": True}]
    }


@pytest.mark.parametrize(
    "host",
    ["localhost:1, evil.com", "127.0.0.1:8766,evil.com", "localhost evil.com", "localhost:x"],
)
def test_a_host_header_no_browser_sends_is_refused(kb: Kb, host: str) -> None:
    kb.sync()
    for app in (
        web_app(kb, host="127.0.0.1", token=None),
        web_app(kb, host="0.0.0.0", token="s3cret"),  # any name, with the token
    ):
        web = TestClient(app, base_url="http://127.0.0.1:8766")
        answer = web.get("/api/status", headers={"host": host, "authorization": "Bearer s3cret"})
        assert answer.status_code == 400, (host, answer.status_code)
        assert answer.text == "the Host header is not a name and a port\n"


def test_a_link_from_another_site_may_open_the_front_page_only(web: TestClient) -> None:
    navigation = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}
    assert web.get("/", headers=navigation).status_code == 200
    assert web.get("/?q=mountain", headers=navigation).status_code == 200  # a search, shown
    assert web.get("/ask?q=x", headers=navigation).status_code == 403


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_the_page_only_reads(web: TestClient, method: str) -> None:
    assert web.request(method, "/api/search?q=x").status_code == 405


def test_with_a_token_every_request_carries_it(kb: Kb) -> None:
    kb.sync()
    app = web_app(kb, host="0.0.0.0", token="s3cret")
    web = TestClient(app, base_url="http://kb.lan:8766", follow_redirects=False)
    assert web.get("/api/status").status_code == 401
    assert web.get("/api/status", headers={"authorization": "Bearer guess"}).status_code == 401
    assert web.get("/api/status", headers={"authorization": "bearer s3cret"}).status_code == 200
    first = web.get("/", params={"token": "s3cret", "q": "mountain"})
    assert first.status_code == 303 and first.headers["location"] == "/?q=mountain"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert web.get("/?q=mountain").status_code == 200  # the cookie, from now on
    stranger = TestClient(app, base_url="http://kb.lan:8766", follow_redirects=False)
    assert stranger.get("/", params={"token": "guess"}).status_code == 401


def test_the_access_rules() -> None:
    loopback = access("127.0.0.1", None)
    for host in ("127.0.0.1:8766", "[::1]:8766", "LocalHost", "localhost:"):
        assert host_refusal(host, loopback) is None, host
    assert host_refusal("kb.lan:8766", loopback) == (
        403,
        "this server does not answer to the name 'kb.lan'",
    )
    for host in ("localhost:1, evil.com", "[::1", "::1", "localhost:8766.evil.com"):
        assert host_refusal(host, Access(None, None)) == (
            400,
            "the Host header is not a name and a port",
        )
    # With its port known, a server answers on that port only (none named: HTTP's 80).
    exact = access("127.0.0.1", None, port=8766)
    assert host_refusal("LocalHost:8766", exact) is None
    assert host_refusal("localhost:8767", exact) == (
        403,
        "this server does not answer on port 8767",
    )
    assert host_refusal("localhost", exact) == (403, "this server does not answer on port 80")
    assert loopback.hosts is not None and "attacker.example" not in loopback.hosts
    assert access("0.0.0.0", "t").hosts is None  # any name, but only with the token
    assert access("0.0.0.0", None).hosts == frozenset({"127.0.0.1", "localhost", "::1"})
    assert "kb.lan" in (access("0.0.0.0", "t", ["KB.lan"]).hosts or ())


def test_forms_read_the_url() -> None:
    form = read_form({"q": " mountain ", "tags": "#travel, work/meetings", "after": "2024-04-01"})
    assert form.request is not None and form.request.text == "mountain"
    assert form.request.filters.tags == ("travel", "work/meetings")
    assert form.request.filters.after == dt.date(2024, 4, 1)
    assert read_form({}).request is None
    with pytest.raises(FormError, match="tags: 21 tags"):
        read_form({"q": "x", "tags": " ".join(f"t{i}" for i in range(21))})


def test_marks_that_do_not_add_up_show_the_passage_unmarked() -> None:
    assert segments("a \x02climb\x03 b", "a climb b") == [
        ("a ", False),
        ("climb", True),
        (" b", False),
    ]
    assert segments("x\x02y \x02climbs\x03", "x\x02y climbs") == [("x\x02y climbs", False)]
    assert segments("\x02open", "open") == [("open", False)]


def test_obsidian_addresses_and_note_lines() -> None:
    assert obsidian_url("My Vault", "Trips/Day 2 & more.md") == (
        "obsidian://open?vault=My%20Vault&file=Trips%2FDay%202%20%26%20more"
    )
    lines = note_lines("# A\n\nb\nc", 3, 4)
    assert [(line.number, line.in_passage, line.heading) for line in lines] == [
        (1, False, True),
        (2, False, False),
        (3, True, False),
        (4, True, False),
    ]


def test_citations_become_links_to_their_sources() -> None:
    answer = Answer(
        "q", "Yes [1, 2]. No [3].", [], [1, 2, 3], "m", False, Timings(0, 0, 0, 0), "hybrid", ()
    )
    assert [(p.text, p.number) for p in answer_pieces(answer)] == [
        ("Yes ", None),
        ("[1]", 1),
        ("[2]", 2),
        (". No ", None),
        ("[3]", 3),
        (".", None),
    ]


# -- faults -------------------------------------------------------------------------------------


def test_dead_model_servers_leave_full_text_search_and_one_line(kb: Kb, dead_url: str) -> None:
    kb.sync()
    _dead_models(kb, dead_url)
    web = TestClient(web_app(kb, host="127.0.0.1", token=None), base_url="http://127.0.0.1:8766")
    page = web.get("/", params={"q": "postgres upgrade"})
    assert page.status_code == 200 and '<article class="card"' in page.text
    assert "full-text search only" in page.text and "by their words alone" in page.text
    vector = web.get("/", params={"q": "postgres upgrade", "mode": "vector"})
    assert vector.status_code == 503 and "cannot reach Ollama" in vector.text
    with web.stream("GET", "/api/ask", params={"q": "postgres upgrade"}) as answer:
        body = answer.read().decode()
    [failure] = [b for b in body.split("\n\n") if b.startswith("event: failure")]
    assert "cannot reach Ollama" in failure and "\n" not in json.loads(failure.split("data: ")[1])


def _dead_models(parts: Container, url: str) -> None:
    dead = OllamaEmbedder(url, "hash-256", timeout=5, retries=0)
    parts.embedder = ProfiledEmbedder(dead, UNKNOWN)
    parts.chat = OllamaChat(url, "fake-chat", timeout=5, retries=0)


def test_a_lost_database_is_one_line_and_the_server_goes_on(kb: Kb, db_url: str) -> None:
    kb.sync()
    lost = open_store(db_url)
    lost.close()
    report = Container(kb.config, lost).status_reader()
    parts = Parts(
        lost.candidates,
        report,
        kb.search_service(),
        Vaults(kb.config.vaults),
        kb.related_service(),
        kb.note_finder(),
    )
    web = TestClient(build_app(parts, access("127.0.0.1", None)), raise_server_exceptions=False)
    for url in ("/status", "/api/status"):
        page = web.get(url, headers={"host": "127.0.0.1"})
        assert page.status_code == 500 and "Traceback" not in page.text
    healthy = TestClient(web_app(kb, host="127.0.0.1", token=None), base_url="http://127.0.0.1")
    assert healthy.get("/status").status_code == 200


class SlowChat(FakeChat):
    """A chat model on a slow machine: it thinks until `go` is set, then writes a word every
    20 ms for minutes; it counts the streams opened and the streams closed."""

    def __init__(self) -> None:
        super().__init__("slow-chat")
        self.go = threading.Event()
        self.opened = 0
        self.closed = 0

    def stream(self, prompt: Prompt) -> Iterator[str]:
        with self._lock:
            self.opened += 1
        try:
            self.go.wait(120)
            for _ in range(10_000):
                yield "word "
                time.sleep(0.02)
        finally:
            with self._lock:
                self.closed += 1


@pytest.fixture
def slow_server(kb: Kb) -> Iterator[tuple[str, SlowChat]]:
    kb.sync()
    chat = kb.chat = SlowChat()
    server = WebServer(
        web_app(kb, host="127.0.0.1", token=None), host="127.0.0.1", port=_free_port()
    )
    server.start()
    try:
        yield server.url.rstrip("/"), chat
    finally:
        chat.go.set()
        server.server.should_exit = True


def test_pending_answers_leave_the_pages_free(slow_server: tuple[str, SlowChat]) -> None:
    base, chat = slow_server
    web = httpx.Client(base_url=base, timeout=30, limits=httpx.Limits(max_connections=100))
    with web, contextlib.ExitStack() as streams, ThreadPoolExecutor(40) as pool:
        opened = list(
            pool.map(
                lambda _: streams.enter_context(web.stream("GET", "/api/ask?q=mountain")),
                range(40),
            )
        )
        answering = [r for r in opened if r.status_code == 200]
        refused = [r for r in opened if r.status_code == 503]
        assert 1 <= len(answering) <= 8 and len(answering) + len(refused) == 40
        line = refused[0].read().decode()
        assert json.loads(line) == {
            "error": f"kb is writing {len(answering)} answers already, as many as it writes "
            "at once: ask again when one is done"
        }
        assert refused[0].headers["retry-after"]
        # The pages answer at once while every answer waits on the model.
        fast = streams.enter_context(httpx.Client(base_url=base, timeout=5))
        assert fast.get("/api/search", params={"q": "mountain"}).status_code == 200
        assert fast.get("/status").status_code == 200
        note = fast.get("/note", params={"vault": "v", "path": "Alex/Journal/2024-04-12.md"})
        assert note.status_code == 200
        # The page says so too, before its stream is refused.
        ask = fast.get("/ask", params={"q": "mountain"})
        assert ask.status_code == 503 and "as many as it writes at once" in ask.text
        chat.go.set()
    assert chat.opened <= len(answering)  # never more model streams than places


def test_a_closed_stream_stops_its_answer(slow_server: tuple[str, SlowChat]) -> None:
    base, chat = slow_server
    chat.go.set()
    with httpx.Client(base_url=base, timeout=30) as web:
        with web.stream("GET", "/api/ask", params={"q": "mountain"}) as answer:
            assert answer.status_code == 200
            first = next(answer.iter_lines())
            assert first == "event: text"
        # The tab is closed: its model stream is closed too, and its place is free again.
        _wait_for(lambda: chat.closed, lambda closed: closed == 1, seconds=15)
        assert chat.opened == 1
        with web.stream("GET", "/api/ask", params={"q": "mountain"}) as again:
            assert again.status_code == 200


def test_a_closed_answer_closes_the_models_answer_before_its_place_is_free(kb: Kb) -> None:
    kb.sync()
    gone, over = threading.Semaphore(0), threading.Event()
    handler = type("Handler", (Endless,), {"gone": gone, "over": over})
    with serving(handler) as url:
        parts: Container = kb
        parts.chat = OpenAIChat(url, "endless", api_key="", timeout=5, retries=0)
        server = WebServer(
            web_app(parts, host="127.0.0.1", token=None), host="127.0.0.1", port=_free_port()
        )
        server.start()
        # Nothing is closed by the collector meanwhile: only by the answer's own close.
        gc.disable()
        try:
            with httpx.Client(base_url=server.url.rstrip("/"), timeout=30) as web:
                for _ in range(ANSWERS_AT_ONCE):
                    with web.stream("GET", "/api/ask", params={"q": "mountain"}) as answer:
                        assert answer.status_code == 200
                        assert next(answer.iter_lines()) == "event: text"
                # Every tab closed: their places are free again once their answers stopped,
                _wait_for(
                    lambda: web.get("/ask", params={"q": "x"}).status_code, lambda s: s == 200
                )
            # and the model server was told each time: it writes none of them on.
            assert all(gone.acquire(timeout=5) for _ in range(ANSWERS_AT_ONCE))
        finally:
            gc.enable()
            over.set()
            server.server.should_exit = True


def _serve(config: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        kb_command(config, *args),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def process_config(tmp_path: Path, vault: Path, db_url: str) -> tuple[Path, dict[str, str]]:
    config = write_config(tmp_path / "kb.toml", vault, name="example")
    env = {k: v for k, v in os.environ.items() if k != "KB_SERVE_TOKEN"}
    env["KB_DATABASE_URL"] = db_url
    return config, env


@pytest.mark.parametrize("token", [None, "", "  "])
def test_kb_serve_will_not_listen_beyond_loopback_without_a_token(
    process_config: tuple[Path, dict[str, str]], token: str | None
) -> None:
    config, env = process_config
    if token is not None:
        env["KB_SERVE_TOKEN"] = token
    result = run_kb(config, env, "serve", "--host", "0.0.0.0", "--port", "1")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: refusing to serve 0.0.0.0 without a token: set KB_SERVE_TOKEN, or listen on "
        "127.0.0.1"
    ]


def test_a_taken_port_is_one_line(process_config: tuple[Path, dict[str, str]]) -> None:
    config, env = process_config
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_kb(config, env, "serve", "--port", str(port))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"error: cannot serve on 127.0.0.1:{port}: the address is in use" in result.stderr


def test_a_port_kept_for_the_administrator_is_a_permission_line() -> None:
    try:
        who = account()
    except NoAccount as exc:
        pytest.skip(str(exc))

    def serve_on_port_80() -> None:
        with pytest.raises(KbError) as refused:
            WebServer(PlainTextResponse("x"), host="127.0.0.1", port=80).start()
        assert str(refused.value) == (
            "cannot serve on 127.0.0.1:80: permission denied (ports below 1024 need the "
            "administrator's rights; choose another with --port)"
        )

    as_user(who, serve_on_port_80)


def test_kb_daemon_serves_the_page_while_it_watches(
    process_config: tuple[Path, dict[str, str]], vault: Path
) -> None:
    config, env = process_config
    port = _free_port()
    daemon = _serve(config, env, "daemon", "--serve", "--port", str(port))
    base = f"http://127.0.0.1:{port}"
    try:
        status = _wait_for(
            lambda: httpx.get(base + "/api/status").json(), lambda s: s["documents"] == 15
        )
        assert [d["role"] for d in status["daemons"] if d["alive"]] == ["writer"]
        (vault / "Inbox" / "Lighthouse.md").write_text(
            "# Lighthouse\n\nThe lighthouse keeper waved.\n"
        )
        found = _wait_for(
            lambda: httpx.get(base + "/api/search", params={"q": "lighthouse keeper"}).json(),
            lambda s: any(h["path"] == "Inbox/Lighthouse.md" for h in s["hits"]),
        )
        assert found["hits"]
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0, daemon.stderr.read() if daemon.stderr else ""


def test_kb_serve_stops_at_its_first_sigterm_while_a_search_waits(
    process_config: tuple[Path, dict[str, str]], vault: Path
) -> None:
    config, env = process_config
    asked, release = threading.Event(), threading.Event()

    class Holding(QuietHandler):
        """A /rerank server that writes its answer a byte at a time until the test is over."""

        def do_POST(self) -> None:
            asked.set()
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            with contextlib.suppress(OSError):  # kb let go
                while not release.wait(0.05):
                    self.wfile.write(b" ")
                    self.wfile.flush()

    with serving(Holding) as rerank:
        write_config(
            config,
            vault,
            name="example",
            rerank={"backend": "http", "url": f"{rerank}/rerank", "timeout": 60},
        )
        assert run_kb(config, env, "index").returncode == 0
        port = _free_port()
        server = _serve(config, env, "serve", "--port", str(port))
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_for(lambda: httpx.get(base + "/api/status").status_code, lambda s: s == 200)

            def search() -> None:
                with contextlib.suppress(httpx.TransportError):  # the server went meanwhile
                    httpx.get(base + "/api/search", params={"q": "mountain"}, timeout=60)

            threading.Thread(target=search, daemon=True).start()
            assert asked.wait(30)
            server.send_signal(signal.SIGTERM)
            # The one signal stops it, though the search waits on the server for a minute.
            stopped = server.wait(timeout=STOP_GRACE + 4)
            assert stopped == 0, server.stderr.read() if server.stderr else ""
        finally:
            release.set()
            server.kill()
            server.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(read: Callable[[], Any], done: Callable[[Any], bool], seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = read()
            if done(value):
                return value
        except httpx.TransportError:
            value = None
        assert time.monotonic() < deadline, f"still {value!r}"
        time.sleep(0.3)


def test_kb_daemon_serve_keeps_the_token_out_of_its_log(
    process_config: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    config, env = process_config
    token = "s3cret-t0ken-of-the-page"
    env["KB_SERVE_TOKEN"] = token
    port = _free_port()
    log = tmp_path / "daemon.log"
    with log.open("w") as err:
        daemon = subprocess.Popen(
            kb_command(config, "daemon", "--serve", "--port", str(port)),
            env=env, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        _wait_for(log.read_text, lambda said: "reconciliation done" in said)
        page = httpx.get(f"http://127.0.0.1:{port}/api/status", headers={"host": "127.0.0.1"})
        assert page.status_code == 401
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0, log.read_text()
    said = log.read_text()
    assert "serving the web page" in said and token not in said, said
