"""Frontmatter that would cost unbounded work: YAML alias bombs, recursive aliases, deep
nesting, huge metadata. Each costs milliseconds, and a failed note says why."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kb.errors import NoteError
from kb.store import Store
from kb.vault.parsing import MAX_FRONTMATTER_DEPTH, parse_note
from support.configs import make_config
from support.fake_kb import Kb


def alias_bomb(levels: int) -> str:
    """Each level is a list of nine aliases of the level below: 9**levels values."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "---\n" + "\n".join(lines) + "\n---\n# Body\n\nText after the bomb.\n"


def deep(levels: int) -> str:
    return f"---\nx: {'[' * levels}{']' * levels}\n---\n# Body\n\nKept body.\n"


def test_alias_bomb_fails_fast_with_its_reason() -> None:
    started = time.monotonic()
    with pytest.raises(NoteError, match="expands to over 10000 values"):
        parse_note(alias_bomb(6))
    with pytest.raises(NoteError, match="expands to over"):
        parse_note(alias_bomb(10))
    assert time.monotonic() - started < 2


def test_shared_aliases_within_the_bound_still_load() -> None:
    note = parse_note("---\nbase: &b {x: 1}\none: *b\ntwo: *b\ntags: [a]\n---\nbody\n")
    assert note.metadata["one"] == note.metadata["two"] == {"x": 1}


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(NoteError, match="refers to itself"):
        parse_note("---\na: &a [1, *a]\n---\nbody\n")


@pytest.mark.parametrize("levels", [MAX_FRONTMATTER_DEPTH + 1, 5000])
def test_deep_nesting_keeps_the_body(levels: int) -> None:
    note = parse_note(deep(levels))
    assert note.body == "# Body\n\nKept body.\n" and note.body_start_line == 4
    assert "nested over" in note.warnings[0]


def test_nesting_within_the_bound_loads() -> None:
    assert parse_note(deep(10)).metadata["x"] == [[[[[[[[[[]]]]]]]]]]


def test_oversized_frontmatter_keeps_the_body() -> None:
    text = "---\n" + "".join(f"k{i}: {'x' * 60}\n" for i in range(2000)) + "---\nbody\n"
    note = parse_note(text)
    assert note.body == "body\n" and "over 64 KiB" in note.warnings[0]


def test_indexing_goes_on_past_hostile_frontmatter(store: Store, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a-bomb.md").write_text(alias_bomb(10))
    (vault / "b-deep.md").write_text(deep(5000))
    (vault / "c-after.md").write_text("# After\n\nWritten after the bomb.\n")
    kb = Kb(store, make_config(vault))
    started = time.monotonic()
    report = kb.sync()
    assert time.monotonic() - started < 30
    assert [(f.path, "expands to over" in f.error) for f in report.failures] == [
        ("a-bomb.md", True)
    ]
    assert set(store.documents.states("v")) == {"b-deep.md", "c-after.md"}
    assert store.documents.failures("v").keys() == {"a-bomb.md"}


@pytest.mark.parametrize("value", ["0000-00-00", "2024-13-45", "2024-02-30 25:61:61"])
def test_impossible_dates_keep_the_body(value: str) -> None:
    note = parse_note(f"---\ndate: {value}\ntags: [a]\n---\n# Body\n\nKept.\n")
    assert note.body == "# Body\n\nKept.\n" and "not valid YAML" in note.warnings[0]
