"""`kb query` and `kb related` answered by a running daemon: the search run by the daemon, the
results shown by the launcher as the command alone shows them, only for the same
configuration, only for its owner, and never anything but those two."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kb.cli.query import forwarded
from kb.cli.related import forwarded as forwarded_related
from kb.config import load_config
from kb.container import Container
from kb.daemon.query_socket import (
    Failed,
    Listed,
    Reply,
    Served,
    ask_daemon,
    decode_reply,
    parse_request,
    query_line,
    serving,
    socket_path,
)
from kb.locations import config_identity
from support.cli import run_kb
from support.configs import write_config

FAKE = 'provider = "fake"\nchat_model = "fake-chat"\nembed_model = "hash-256"'


@pytest.mark.parametrize(
    ("argv", "config", "args"),
    [
        (["query", "ramen"], None, ["ramen"]),
        (["-c", "a.toml", "query", "ramen", "--json"], "a.toml", ["ramen", "--json"]),
        (["--config=b.toml", "query", "x"], "b.toml", ["x"]),
        (["-c", "query", "query", "x"], "query", ["x"]),
        (["related", "Canvas", "--json"], None, ["Canvas", "--json"]),
    ],
)
def test_a_query_goes_to_the_daemon(argv: list[str], config: str | None, args: list[str]) -> None:
    line = query_line(argv)
    assert line is not None
    assert line.config == (Path(config) if config else None)
    assert line.args == tuple(args)
    assert line.command == argv[-len(args) - 1]


@pytest.mark.parametrize(
    "argv",
    [
        ["-v", "query", "x"],  # its log lines are printed where it runs
        ["--config", "query", "index"],  # `query` is the config file here
        ["index"],
        ["ask", "query"],
        ["query", "--help"],
        ["related", "--help"],
        ["--unknown", "query", "x"],
        ["-c"],
        [],
    ],
)
def test_nothing_else_goes_to_the_daemon(argv: list[str]) -> None:
    assert query_line(argv) is None


def test_the_identity_follows_the_config_file_and_kbs_environment(tmp_path: Path) -> None:
    config = tmp_path / "kb.toml"
    config.write_text("owner_name = 'A'\n")
    env = {"HOME": "/home/a", "KB_PROVIDER": "fake"}
    same = config_identity(config, env)
    assert config_identity(config, {**env, "PATH": "/bin"}) == same
    assert config_identity(config, {**env, "KB_PROVIDER": "ollama"}) != same
    # A provider's own variable is compared by the daemon, which knows its provider.
    assert config_identity(config, {**env, "OLLAMA_HOST": "h:1"}) == same
    assert config_identity(None, {**env, "KB_CONFIG": str(config)}) == same
    config.write_text("owner_name = 'B, edited'\n")
    assert config_identity(config, env) != same


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b'{"argv": "query x", "identity": "i", "environment": {}}',
        b'{"argv": ["query", 1], "identity": "i", "environment": {}}',
        b'{"argv": ["query"], "identity": 7, "environment": {}}',
        b'{"argv": ["query"], "environment": {}}',
        b'{"argv": ["query"], "identity": "i"}',
        b'{"argv": ["query"], "identity": "i", "environment": {"HOME": 1}}',
        b'{"argv": ["query"], "identity": "i", "environment": ["HOME"]}',
    ],
)
def test_a_malformed_request_is_an_error(raw: bytes) -> None:
    with pytest.raises((ValueError, KeyError)):
        parse_request(raw)


HIT = {
    "vault": "v",
    "path": "a.md",
    "header_path": ["# A"],
    "content": "text",
    "score": 0.5,
    "similarity": None,
    "start_line": 1,
    "end_line": 2,
    "relevance": 7,
    "rerank_score": -1.25,
    "vector_rank": None,
    "vector_score": None,
    "text_rank": 1,
    "text_score": 0.5,
    "date": "2024-04-12",
    "fused_rank": 3,
    "judged": 1.5,
    "lifted_by": ["text_share +0.42"],
}
RESULT = {"hits": [HIT], "mode_used": "text", "warnings": [], "json": False, "explain": True}


def test_a_reply_is_rebuilt_as_the_daemon_found_it() -> None:
    reply = decode_reply(RESULT)
    assert isinstance(reply, Served) and reply.explain and not reply.as_json
    assert reply.found.mode_used == "text" and reply.found.hits[0].relevance == 7
    assert reply.found.hits[0].rerank_score == -1.25
    assert reply.found.hits[0].lifted_by == ["text_share +0.42"]
    assert decode_reply({"error": "the index is empty"}) == Failed("the index is empty")


HIT_C = {"vault": "v", "path": "c.md", "title": "C", "score": 1.25, "why": ["x"]}
RELATED = {
    "vault": "v",
    "path": "a.md",
    "links_to": [{"target": "B", "path": "b.md", "line": 3}],
    "linked_from": [],
    "unresolved": [{"target": "Nowhere", "line": 4}],
    "title": "A",
    "lines": None,
    "related": [HIT_C],
    "ranker": "trees",
}
LISTED = {"related_notes": RELATED, "json": False, "explain": False}


def test_related_notes_are_rebuilt_as_the_daemon_found_them() -> None:
    reply = decode_reply(LISTED)
    assert reply == Listed(RELATED, as_json=False, explain=False)


@pytest.mark.parametrize(
    "answer",
    [
        [],
        {**LISTED, "related_notes": []},
        {**LISTED, "related_notes": {**RELATED, "related": [{"path": "c.md"}]}},
        {**LISTED, "related_notes": {**RELATED, "lines": "1-2"}},
        {**LISTED, "related_notes": {**RELATED, "unresolved": [{"line": 4}]}},
        {**LISTED, "related_notes": {**RELATED, "related": [{**HIT_C, "lifts": {"a": "1"}}]}},
        {"refused": "not a query"},
        {"exit": 0, "out": "", "err": ""},  # what a daemon of an older kb answers
        {**RESULT, "mode_used": "fuzzy"},
        {**RESULT, "json": "yes"},
        {**RESULT, "warnings": [1]},
        {**RESULT, "hits": [{**HIT, "extra": 1}]},
        {**RESULT, "hits": [{**HIT, "start_line": "1"}]},
        {**RESULT, "hits": [{**HIT, "score": True}]},
        {**RESULT, "hits": [{**HIT, "rerank_score": "high"}]},
        {**RESULT, "hits": [{**HIT, "header_path": "# A"}]},
        {**RESULT, "hits": [{**HIT, "lifted_by": [0.42]}]},
        {"error": None},
    ],
)
def test_a_reply_the_launcher_cannot_show_as_the_command_would_is_run_again(
    answer: object,
) -> None:
    with pytest.raises((ValueError, KeyError)):
        decode_reply(answer)


@pytest.fixture
def runtime() -> Iterator[Path]:
    """A short private runtime folder (socket paths have at most 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="kbq-") as folder:
        os.chmod(folder, 0o700)
        yield Path(folder)


@pytest.fixture
def socket_setup(
    tmp_path: Path, vault: Path, db_url: str, runtime: Path
) -> tuple[Path, dict[str, str]]:
    config = write_config(tmp_path / "kb.toml", vault, name="example")
    env = {
        **os.environ,
        "KB_DATABASE_URL": db_url,
        "XDG_RUNTIME_DIR": str(runtime),
        "COLUMNS": "120",
    }
    return config, env


def _cold(env: dict[str, str]) -> dict[str, str]:
    """The same configuration with no daemon's socket to find."""
    return {**env, "XDG_RUNTIME_DIR": tempfile.mkdtemp(prefix="kbn-")}


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < end, "the daemon never answered queries"
        time.sleep(0.1)


def test_a_running_daemon_answers_kb_query_as_the_command_would(
    socket_setup: tuple[Path, dict[str, str]],
) -> None:
    config, env = socket_setup
    assert run_kb(config, env, "index", "--wait").returncode == 0
    daemon = subprocess.Popen(
        [sys.executable, "-m", "kb", "--config", str(config), "-v", "daemon"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        _wait_for(socket_path(config_identity(config, env), env), daemon)
        for args in (
            ("query", "miso ramen chili oil", "--json", "-k", "3"),
            ("query", "when did I climb a mountain", "--explain", "--tag", "travel"),
            ("query", "zzzz nothing qqqq", "-m", "text"),
            ("related", "Weeknight Miso Ramen", "--explain"),
            ("related", "Weeknight Miso Ramen", "--unlinked", "-k", "3", "--json"),
            ("related", "No Such Note"),
        ):
            served, alone = run_kb(config, env, *args), run_kb(config, _cold(env), *args)
            assert (served.returncode, served.stdout, served.stderr) == (
                alone.returncode,
                alone.stdout,
                alone.stderr,
            )
        assert json.loads(run_kb(config, env, "query", "ramen", "--json").stdout)
        bad = run_kb(config, env, "query", "ramen", "--mode", "bogus")
        assert bad.returncode == 2 and "must be one of" in bad.stderr
    finally:
        daemon.terminate()
        _, log = daemon.communicate(timeout=60)
    assert log.count("answering queries") == 1
    assert log.count("answered a query for a launcher") == 4  # the usage error ran here
    assert log.count("answered a related for a launcher") == 3


@pytest.fixture
def parts(socket_setup: tuple[Path, dict[str, str]]) -> Iterator[Container]:
    config, env = socket_setup
    assert run_kb(config, env, "index", "--wait").returncode == 0
    with Container.open(load_config(config, env)) as opened:
        yield opened


def _send(path: Path, request: dict[str, object]) -> dict[str, object]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(path))
        conn.sendall(json.dumps(request).encode() + b"\n")
        conn.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    answer: dict[str, object] = json.loads(data)
    return answer


def _request(identity: str, *argv: str, env: dict[str, str] | None = None) -> dict[str, object]:
    return {"argv": list(argv), "identity": identity, "environment": env or {}}


def test_the_daemon_runs_nothing_but_a_query_of_its_own_configuration(
    socket_setup: tuple[Path, dict[str, str]], parts: Container
) -> None:
    config, env = socket_setup
    identity = config_identity(config, env)
    calls: list[tuple[str, ...]] = []
    run = forwarded(parts)

    def counted(args: tuple[str, ...]) -> Reply | None:
        calls.append(args)
        return run(args)

    with serving(identity, env, counted) as path:
        assert path is not None
        assert "refused" in _send(path, _request("another", "query", "ramen"))
        assert "refused" in _send(path, _request(identity, "reindex"))
        assert "refused" in _send(path, _request(identity, "-c", "x", "query", "--help"))
        assert "refused" in _send(path, {"argv": ["query"]})
        assert calls == []

        answer = decode_reply(_send(path, _request(identity, "query", "miso ramen", "--json")))
        assert isinstance(answer, Served) and answer.as_json
        assert answer.found.mode_used == "hybrid"
        assert answer.found.hits[0].path.endswith("Miso Ramen.md")
        reply = ask_daemon(["--config", str(config), "query", "miso ramen"], env)
        assert isinstance(reply, Served) and not reply.as_json
        assert reply.found.hits[0].path.endswith("Miso Ramen.md")
        # A usage error: the launcher runs it, to say so as the command line does.
        assert "refused" in _send(path, _request(identity, "query", "x", "--mode", "fuzzy"))
        assert calls == [("miso ramen", "--json"), ("miso ramen",), ("x", "--mode", "fuzzy")]
        # Another override is another configuration: the launcher runs the command itself.
        other = {**env, "KB_LLM_CONCURRENCY": "3"}
        assert ask_daemon(["-c", str(config), "query", "x"], other) is None


def test_the_daemon_answers_kb_related_and_the_launcher_runs_it_without_one(
    socket_setup: tuple[Path, dict[str, str]], parts: Container
) -> None:
    config, env = socket_setup
    identity = config_identity(config, env)
    argv = ["--config", str(config), "related", "Weeknight Miso Ramen", "--json"]
    assert ask_daemon(argv, env) is None  # no daemon: the launcher runs it
    with serving(identity, env, forwarded(parts)) as path:
        assert path is not None
        # A daemon not given `kb related` refuses it.
        assert "refused" in _send(path, _request(identity, *argv[2:]))
    with serving(identity, env, forwarded(parts), related=forwarded_related(parts)) as path:
        assert path is not None
        reply = ask_daemon(argv, env)
        assert isinstance(reply, Listed) and reply.as_json
        assert reply.related_notes["path"].endswith("Weeknight Miso Ramen.md")
        assert reply.related_notes["related"]
        missing = ask_daemon([*argv[:3], "No Such Note"], env)
        assert isinstance(missing, Failed) and missing.error == reply_error(parts, "No Such Note")
        # A usage error: the launcher runs it, to say so as the command line does.
        assert "refused" in _send(path, _request(identity, "related", "x", "--top-k", "0"))


def reply_error(parts: Container, note: str) -> str:
    """The one line `kb related NOTE` stops with when NOTE names no note."""
    from kb.errors import KbError

    with pytest.raises(KbError) as raised:
        parts.note_finder().find(note)
    return str(raised.value)


def test_a_daemon_answers_only_a_launcher_that_agrees_on_its_providers_variables(
    socket_setup: tuple[Path, dict[str, str]], parts: Container
) -> None:
    config, env = socket_setup
    identity = config_identity(config, env)
    read = (("OLLAMA_HOST", "http://gpu-box:11434"),)
    with serving(identity, env, forwarded(parts), read=read) as path:
        assert path is not None
        query = ("query", "miso ramen")
        agrees = {**env, "OLLAMA_HOST": "http://gpu-box:11434"}
        assert "hits" in _send(path, _request(identity, *query, env=agrees))
        assert "refused" in _send(path, _request(identity, *query, env=env))
        other = {**env, "OLLAMA_HOST": "http://localhost:11434"}
        assert "refused" in _send(path, _request(identity, *query, env=other))
        reply = ask_daemon(["--config", str(config), *query], agrees)
        assert isinstance(reply, Served)
        assert ask_daemon(["--config", str(config), *query], other) is None


def test_one_daemon_answers_and_a_dead_ones_socket_is_taken_over(
    socket_setup: tuple[Path, dict[str, str]], parts: Container
) -> None:
    config, env = socket_setup
    identity = config_identity(config, env)
    argv = ["--config", str(config), "query", "ramen"]
    path = socket_path(identity, env)
    path.parent.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # bound, never listening: what a killed daemon leaves
    stale.close()
    assert ask_daemon(argv, env) is None
    with serving(identity, env, forwarded(parts)) as first:
        assert first == path
        with serving(identity, env, forwarded(parts)) as second:
            assert second is None
        assert ask_daemon(argv, env) is not None
    assert not path.exists()
    assert ask_daemon(argv, env) is None


def test_no_socket_in_a_folder_others_can_enter(
    socket_setup: tuple[Path, dict[str, str]], parts: Container, runtime: Path
) -> None:
    config, env = socket_setup
    identity = config_identity(config, env)
    folder = runtime / "kb"
    folder.mkdir(mode=0o700)
    folder.chmod(0o777)
    with serving(identity, env, forwarded(parts)) as path:
        assert path is None
    folder.chmod(0o700)
    with serving(identity, env, forwarded(parts)) as path:
        assert path is not None
        folder.chmod(0o755)
        assert ask_daemon(["-c", str(config), "query", "ramen"], env) is None
        folder.chmod(0o700)
