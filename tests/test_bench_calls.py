"""The calls benchmark on the example vault, with the counting fake provider."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_calls", ROOT / "bench/calls.py")
assert _spec and _spec.loader
calls = importlib.util.module_from_spec(_spec)
sys.modules["bench_calls"] = calls
_spec.loader.exec_module(calls)


def test_counts_calls_per_note_and_a_second_run_asks_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = ROOT / "examples/vault"
    assert (
        calls.main([str(vault), "--personal", "Alex/**", "--data-dir", str(tmp_path / "data")]) == 0
    )
    rows = {
        line[:34].strip(): line[34:].split()
        for line in capsys.readouterr().out.splitlines()
        if line.startswith(("no personal", "personal"))
    }
    assert set(rows) == {
        "no personal folder, batch_chunks 6",
        "no personal folder, batch_chunks 1",
        "personal Alex/**, batch_chunks 6",
        "personal Alex/**, batch_chunks 1",
    }
    # notes, chunks, calls, calls per note, per chunk, the calls by task, and "again" last.
    for figures in rows.values():
        assert figures[:2] == ["15", "115"] and figures[-1] == "0"  # one note is empty
    one_by_one = int(rows["no personal folder, batch_chunks 1"][2])
    assert one_by_one == 14 + 115  # a file summary per non-empty note, a summary per chunk
    batched = int(rows["no personal folder, batch_chunks 6"][2])
    assert batched < one_by_one * 0.4
    rewrites = int(rows["personal Alex/**, batch_chunks 1"][2]) - one_by_one
    assert rewrites > 0 and int(rows["personal Alex/**, batch_chunks 6"][2]) == batched + rewrites


def test_chosen_notes_by_path_prefix_and_count() -> None:
    vault = ROOT / "examples/vault"
    assert calls.chosen_notes(vault, [], None) is None
    assert calls.chosen_notes(vault, ["Alex/Journal/"], None) == {
        "Alex/Journal/2024-04-12.md",
        "Alex/Journal/2024-05-03.md",
    }
    assert calls.chosen_notes(vault, ["Alex/"], 1) == {"Alex/Goals 2024.md"}


def test_what_the_model_writes_is_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = ROOT / "examples/vault"
    args = [str(vault), "--personal", "Alex/**", "--personal-only", "--batch", "6"]
    writes = ["--writes", "summaries", "voices", "voices,statements", "voices,questions"]
    assert calls.main([*args, *writes, "--data-dir", str(tmp_path / "data")]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(line for line in out if line.startswith("configuration"))
    tasks = header.split()[6:-1]
    rows = {
        line.split(", writes ")[1].split()[0]: dict(
            zip(tasks, line.split()[-len(tasks) - 1 : -1], strict=True)
        )
        for line in out
        if line.startswith("personal Alex/**")
    }
    assert set(rows) == {"summaries", "voices", "voices,statements", "voices,questions"}
    # The voice of each note outside Alex/ (one is empty), no summary; then a call per chunk.
    assert rows["voices"]["voice"] == rows["voices,statements"]["voice"] != "0"
    assert rows["voices"]["file_summary"] == rows["voices"]["chunk_summaries"] == "0"
    assert rows["voices,statements"]["statements"] == "115"
    assert rows["voices,questions"]["questions"] == "115"
    assert rows["voices,questions"]["voice"] == rows["voices"]["voice"]
    assert rows["voices,questions"]["statements"] == rows["voices,statements"]["questions"] == "0"
