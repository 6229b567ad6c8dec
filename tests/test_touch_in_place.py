"""A note touched without a change (same bytes, a new mtime) is recorded in place."""

from __future__ import annotations

import os
from pathlib import Path

from kb.store import Store
from support.configs import make_config
from support.fake_kb import Kb


def _pages(kb: Kb) -> dict[str, int]:
    """Each note's row, by the heap page it is on."""
    with kb.store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT path, (ctid::text::point)[0]::int AS page FROM documents"
        ).fetchall()
    return {r["path"]: r["page"] for r in rows}


def test_touching_every_note_moves_no_row(store: Store, vault: Path) -> None:
    """A sync tool that touches a whole vault must not cost each row a new place and each of
    the table's indexes a new entry: the new version of a row stays on its page (a heap-only
    update), which needs room left on every page."""
    kb = Kb(store, make_config(vault, context={"summaries": "structure"}))
    for n in range(120):  # rows enough to fill several pages
        note = vault / "Filler" / f"note {n:03}.md"
        note.parent.mkdir(exist_ok=True)
        note.write_text(f"# Filler {n}\n\nLine {n} of filler.\n")
    kb.sync()
    before = _pages(kb)
    assert len(set(before.values())) > 2
    for path in vault.rglob("*.md"):
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert kb.sync().indexed == 0
    after = _pages(kb)
    moved = [path for path in before if after[path] != before[path]]
    assert not moved, f"{len(moved)} of {len(before)} rows moved"
