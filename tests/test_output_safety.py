"""What kb prints: note text cannot drive the terminal, `:emoji:` codes and markup stay as
written, `--json` is exact, and no credential reaches any output or log line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kb.logfmt import LogfmtFormatter, event
from kb.redact import redact
from kb.terminal import printable
from support.cli import run_cli
from support.configs import write_config

HOSTILE = (
    "# Trap\n\nClipboard \x1b]52;c;cm0gLXJmIH4=\x07 then \x1b[2J\x1b[31mred\x1b[0m "
    "and \x9b31m C1 and \u202egnp.exe. Flagged :x: and :warning: with [bold]markup[/bold].\n"
)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "trap.md").write_text(HOSTILE)
    return vault, write_config(tmp_path / "kb.toml", vault, name="example")


def test_printable_shows_controls_as_escapes() -> None:
    assert printable("a\x1b[31mb\x07\tc\nd") == "a\\x1b[31mb\\x07\tc\nd"
    assert printable("\x9b\u202e\ud800") == "\\x9b\\u202e\\ud800"
    assert printable("plain text, émoji 🎉 :x:") == "plain text, émoji 🎉 :x:"


def test_query_output_neutralises_controls_and_keeps_text(
    hostile: tuple[Path, Path], db_url: str
) -> None:
    _, cfg = hostile
    assert run_cli(cfg, db_url, "index").returncode == 0
    shown = run_cli(cfg, db_url, "query", "clipboard flagged markup")
    assert shown.returncode == 0, shown.stderr
    for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert raw not in shown.stdout and raw not in shown.stderr
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in shown.stdout
    # The chunk as written: no emoji, and markup printed, not applied.
    assert ":x: and :warning:" in shown.stdout and "❌" not in shown.stdout
    assert "[bold]markup[/bold]" in shown.stdout
    exact = json.loads(run_cli(cfg, db_url, "query", "clipboard flagged markup", "--json").stdout)
    assert exact[0]["content"] == HOSTILE.rstrip("\n")


def test_hostile_file_name_in_status_and_verify(tmp_path: Path, db_url: str) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "\x1b]0;owned\x07.md").write_bytes(b"\xff not utf-8")
    cfg = write_config(tmp_path / "kb.toml", vault, name="example")
    indexed = run_cli(cfg, db_url, "index")
    assert indexed.returncode == 3
    for result in (indexed, run_cli(cfg, db_url, "status"), run_cli(cfg, db_url, "verify")):
        assert "\x1b" not in result.stdout + result.stderr
        assert "\\x1b]0;owned\\x07.md" in result.stdout + result.stderr


@pytest.mark.parametrize(
    "secret_form",
    [
        "dsn",  # host=… password=hunter2 dbname=…
        "url_userinfo",  # postgresql://postgres:hunter2@/db?host=…
        "url_param",  # postgresql:///db?host=…&password=hunter2
    ],
)
def test_status_never_prints_the_password(
    hostile: tuple[Path, Path], db_url: str, secret_form: str
) -> None:
    _, cfg = hostile
    parts = conninfo_to_dict(db_url)
    if secret_form == "dsn":
        url = make_conninfo(db_url, password="hunter2")
    elif secret_form == "url_userinfo":
        url = f"postgresql://{parts['user']}:hunter2@/{parts['dbname']}?host={parts['host']}"
    else:
        url = (
            f"postgresql:///{parts['dbname']}?host={parts['host']}"
            f"&user={parts['user']}&password=hunter2"
        )
    for args in (("status",), ("status", "--json")):
        result = run_cli(cfg, url, *args)
        assert result.returncode == 0, result.stderr
        assert "hunter2" not in result.stdout + result.stderr
        assert "***" in result.stdout


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("postgresql://kb:s3cr@t@db.example/kb", "s3cr@t"),
        ("postgres://kb:pw@h:5432/d?sslmode=require&password=pw2", "pw2"),
        ("host=db user=kb password=hunter2 dbname=kb", "hunter2"),
        ("host=db password = 'two words' dbname=kb", "two words"),
        ("connect failed: PASSWORD=Xy9 sslpassword=Zz8", "Xy9"),
        ("https://api.example/v1?api_key=sk-123&x=1", "sk-123"),
    ],
)
def test_redact_every_form(text: str, secret: str) -> None:
    cleaned = redact(text)
    assert secret not in cleaned and "***" in cleaned


def test_redact_leaves_plain_text_alone() -> None:
    text = "cannot reach Ollama at http://localhost:11434: user@example.com a=b"
    assert redact(text) == text


def test_daemon_log_lines_are_redacted_and_printable() -> None:
    record = logging.LogRecord("kb.daemon", logging.ERROR, __file__, 1, "db down", None, None)
    logger = logging.getLogger("kb.test-logfmt")
    captured: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = captured.append  # type: ignore[method-assign,assignment]
    logger.addHandler(handler)
    try:
        event(
            logger,
            "database unreachable",
            logging.ERROR,
            error="postgresql://kb:hunter2@db/kb refused",
            path="\x1b[2Jx.md",
        )
    finally:
        logger.removeHandler(handler)
    line = LogfmtFormatter().format(captured[0])
    assert "hunter2" not in line and "\x1b" not in line and "kb:***@db" in line
    assert record.getMessage() == "db down"
