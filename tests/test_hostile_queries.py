"""Queries as an attacker or a careless paste would write them: every one gets results or
one clear line, never a traceback, in every search mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kb.config import SearchMode
from kb.errors import KbError
from kb.search.plan import MAX_QUERY_CHARS, SearchPlan
from kb.store import SearchFilter
from support.configs import write_config
from support.fake_kb import Kb
from support.reading import search_store

METACHARACTERS = [
    "'",
    '"',
    "\\",
    "\\'",
    "'; DROP TABLE chunks; --",
    "$$ $1 %s %(q)s {model}",
    "a & b | !c <-> d:* (e)",
    "'a':* & !!b",
    ":* | & ! <2>",
    "% _ \\% LIKE",
    "\x01\x02\x1b[31m\x7f",
    "a\tb\nc\rd\ve\ff",
    "🎉 ✓ ﷽ \u202e",
    "x" * 3000,
    "1e308 -0 NaN Infinity 99999999999999999999999",
    "ramen " * 1500,
]


@pytest.mark.parametrize("mode", ["vector", "text", "hybrid"])
def test_metacharacters_are_only_text(kb: Kb, mode: SearchMode) -> None:
    kb.sync()
    for text in METACHARACTERS:
        hits = search_store(kb.store, kb.embedder, SearchPlan(text, top_k=3, mode=mode)).hits
        assert len(hits) <= 3, text
    assert kb.store.documents.states("v"), "the index is intact"


@pytest.mark.parametrize("text", ["", "   ", "x" * (MAX_QUERY_CHARS + 1), "\udce9"])
def test_unusable_queries_are_one_clear_error(kb: Kb, text: str) -> None:
    kb.sync()
    with pytest.raises(KbError):
        search_store(kb.store, kb.embedder, SearchPlan(text, top_k=3))


def test_extreme_dates_filter_without_error(kb: Kb) -> None:
    import datetime as dt

    kb.sync()
    for after, before, found in [
        (dt.datetime(1, 1, 1), None, True),
        (None, dt.datetime(1, 1, 1), False),
        (dt.datetime(9999, 12, 31, 23, 59, 59), None, False),
        (None, dt.datetime(9999, 12, 31, 23, 59, 59), True),
    ]:
        filters = SearchFilter(modified_after=after, modified_before=before)
        hits = search_store(
            kb.store, kb.embedder, SearchPlan("ramen", top_k=3, filters=filters)
        ).hits
        assert bool(hits) == found, (after, before)


def _kb_bytes(config: Path, db_url: str, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "KB_DATABASE_URL": db_url, "COLUMNS": "200"}
    command = [sys.executable.encode(), b"-m", b"kb", b"--config", os.fsencode(config)]
    return subprocess.run(
        [*command, *(a if isinstance(a, bytes) else a.encode() for a in args)],
        capture_output=True,
        env=env,
        timeout=300,
    )


def test_cli_hostile_queries_are_one_line(tmp_path: Path, vault: Path, db_url: str) -> None:
    cfg = write_config(tmp_path / "kb.toml", vault, name="example")
    assert _kb_bytes(cfg, db_url, "index").returncode == 0
    cases: list[tuple[tuple[str | bytes, ...], int]] = [
        (("query", "ramen " * 16_000), 1),  # 96 kB
        (("query", b"\xed\xa0\x80"), 1),  # an encoded surrogate: not UTF-8
        (("query", b"caf\xe9"), 1),  # Latin-1
        (("query", "ramen", "--before", "0001-01-01"), 0),
        (("query", "ramen", "--after", "0001-01-01"), 0),
        (("query", "ramen", "--before", "9999-12-31"), 0),
        (("query", "ramen", "--after", "9999-12-31T23:59:59"), 0),
        (("query", "'):* & !x <-> \\"), 0),
    ]
    for args, code in cases:
        result = _kb_bytes(cfg, db_url, *args)
        stderr = result.stderr.decode(errors="replace")
        assert result.returncode == code, (args[:2], stderr[-500:])
        assert "Traceback" not in stderr, (args[:2], stderr[-500:])
        if code:
            assert len(stderr.strip().splitlines()) == 1 and stderr.startswith("error:")
    found = json.loads(_kb_bytes(cfg, db_url, "query", "ramen", "--json").stdout)
    assert found and "ramen" in found[0]["content"].lower()
