"""How `kb query` shows a hit to a person: where it is (path and line span) is never cut,
whatever the terminal's width or a pipe's, and its scores are shown whole, moved to the next
line when they do not fit."""

from __future__ import annotations

import datetime as dt
import io
import os
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from kb.cli.render import print_results
from kb.results import SearchHit, SearchResult
from support.cli import run_kb
from support.configs import write_config

FAKE = 'provider = "fake"\nchat_model = "fake-chat"\nembed_model = "hash-256"'
FUJI = "Clippings/How I Climbed Mount Fuji in One Night.md"
HIT = SearchHit(
    vault="example",
    path=FUJI,
    header_path=["# How I Climbed Mount Fuji in One Night", "## Why one night?"],
    content="I had exactly one free day in the middle of a work trip to Tokyo.",
    score=0.5,
    similarity=0.81234,
    start_line=16,
    end_line=18,
    relevance=7,
)
WHERE = f"1. example/{FUJI}:16-18"


def _shown(width: int, hit: SearchHit = HIT) -> list[str]:
    out = Console(file=io.StringIO(), width=width, emoji=False, highlight=False)
    err = Console(file=io.StringIO(), width=width)
    print_results(out, err, SearchResult([hit], "hybrid"), as_json=False, explain=False)
    assert isinstance(out.file, io.StringIO)
    text = out.file.getvalue()
    lines = text.splitlines()
    assert "…" not in text and all(Text(line).cell_len <= width for line in lines)
    return lines


def test_a_wide_terminal_shows_the_title_on_one_ruled_line() -> None:
    [first, *_] = _shown(120)
    assert first.startswith(f"{WHERE}  similarity 0.812  relevance 7/10 ─")
    assert len(first) == 120 and first.endswith("─")


def test_at_80_columns_the_scores_move_under_the_path_whole() -> None:
    first, second, *_ = _shown(80)
    assert first == WHERE
    assert second.startswith("   similarity 0.812  relevance 7/10 ─") and len(second) == 80


def test_at_40_columns_the_path_wraps_and_nothing_is_cut() -> None:
    first, second, third, *_ = _shown(40)
    assert f"{first} {second}" == WHERE
    assert third.startswith("   similarity 0.812  relevance 7/10")


def test_a_path_without_spaces_wider_than_the_terminal_is_folded_not_cut() -> None:
    name = "Projects/" + "-".join(["word"] * 12) + ".md"
    hit = SearchHit("example", name, [], "text", 1.25, None, 3, 4)
    lines = _shown(40, hit)
    where = f"example/{name}:3-4"
    folded = "".join(lines[: lines.index("   BM25 1.250 " + "─" * 26)]).replace(" ", "")
    assert folded == f"1.{where}"


@pytest.mark.parametrize("width", [10, 20, 40, 80, 200])
def test_the_scores_wrap_only_between_words(width: int) -> None:
    words = " ".join(_shown(width)).split()
    assert {"similarity", "0.812", "relevance", "7/10"} <= set(words)


def test_piped_output_keeps_the_path_and_score_of_each_hit(
    tmp_path: Path, vault: Path, db_url: str
) -> None:
    config = write_config(tmp_path / "kb.toml", vault, name="example", personal=())
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["KB_DATABASE_URL"] = db_url
    assert run_kb(config, env, "index", "--wait").returncode == 0  # vector mode needs them
    shown = run_kb(config, env, "query", "climbed mount fuji in one night", "--mode", "vector")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)  # a pipe is 80 columns wide
    titles = [n for n, line in enumerate(lines) if line.startswith(f"1. example/{FUJI}:")]
    assert titles, shown.stdout
    first = lines[titles[0]]
    # The path and line span, whole, and the note's date where it fits beside them.
    span, *dated = first.rsplit(":", 1)[1].split()
    assert first.count(":") == 1 and span.replace("-", "").isdigit()
    assert all(dt.date.fromisoformat(day) for day in dated) and len(dated) <= 1
    assert lines[titles[0] + 1].startswith("   similarity 0.")
    assert "…" not in shown.stdout
