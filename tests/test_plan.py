"""The sync plan, decided from data alone: no database, no files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kb.vault.notes import OnDisk, Unlisted
from kb.vault.sync_plan import (
    Move,
    Read,
    Rules,
    Stored,
    decide,
    groups,
    kept,
    new_hashes,
    pair,
    to_read,
    unchanged,
)

BUILD = "structure/4/256"


def row(
    path: str, digest: str = "h", *, size: int = 10, mtime: int = 1, personal: bool = False
) -> Stored:
    return Stored(path, digest, size, mtime, personal, BUILD)


def disk(path: str, *, size: int = 10, mtime: int = 1, personal: bool = False) -> OnDisk:
    return OnDisk(path, size, mtime, personal)


def test_an_unchanged_stat_is_trusted_by_a_full_scan_only() -> None:
    old = row("a.md")
    assert unchanged(old, disk("a.md"), Rules(build=BUILD))
    # A watcher named the file: a sync tool may have kept its mtime, so it is hashed.
    assert not unchanged(old, disk("a.md"), Rules(build=BUILD, trust_stat=False))
    files = [disk("a.md"), disk("new.md")]
    assert to_read({"a.md": old}, files, Rules(build=BUILD, trust_stat=False)) == (files, [])


def test_a_new_note_is_hashed_first_only_where_it_may_be_a_move() -> None:
    """With every stored note still in place, a new note cannot be one moved: it is read
    once, when it is indexed (a first index reads each note once)."""
    assert to_read({}, [disk("a.md"), disk("b.md")], Rules(build=BUILD)) == (
        [],
        [disk("a.md"), disk("b.md")],
    )
    stored = {"old.md": row("old.md")}
    files = [disk("new.md")]
    assert to_read(stored, files, Rules(build=BUILD)) == (files, [])
    # Indexed as new, with the notes read and left unread alike.
    plan = decide({}, [Read(disk("c.md"), "h")], {"a.md", "c.md"}, Rules(), new=[disk("a.md")])
    assert plan.index == (disk("c.md"), disk("a.md"))


def test_stale_notes_are_read_whatever_their_stat() -> None:
    stored = {"a.md": row("a.md"), "b.md": row("b.md"), "c.md": row("c.md")}
    stored["b.md"] = Stored("b.md", "h", 10, 1, False, "llm/3/256")  # built another way
    files = [disk("a.md"), disk("b.md"), disk("c.md")]
    rules = Rules(build=BUILD, retry=frozenset({"c.md"}))
    stale = [f for f in files if not unchanged(stored[f.path], f, rules)]
    assert [f.path for f in stale] == ["b.md", "c.md"]
    assert to_read(stored, stale, rules) == (stale, [])
    force = Rules(build=BUILD, force=True)
    assert not any(unchanged(stored[f.path], f, force) for f in files)
    assert to_read(stored, files, force) == (files, [])


def test_a_new_mtime_with_the_same_bytes_is_only_touched() -> None:
    stored = {"a.md": row("a.md", "h1")}
    touched = disk("a.md", mtime=2)
    plan = decide(stored, [Read(touched, "h1")], {"a.md"}, Rules(build=BUILD))
    assert plan.touch == (touched,) and not plan.index and not plan.moves and not plan.delete


def test_changed_bytes_are_indexed_and_missing_files_deleted() -> None:
    stored = {"a.md": row("a.md", "h1"), "gone.md": row("gone.md", "h2")}
    edited = disk("a.md", mtime=2)
    plan = decide(stored, [Read(edited, "h9")], {"a.md"}, Rules(build=BUILD))
    assert plan.index == (edited,) and plan.delete == ("gone.md",) and not plan.touch


def test_a_rename_is_a_move_not_a_delete_and_an_index() -> None:
    stored = {"old.md": row("old.md", "h1")}
    new = disk("new.md")
    plan = decide(stored, [Read(new, "h1")], {"new.md"}, Rules(build=BUILD))
    assert plan.moves == (Move("old.md", new),) and not plan.delete and not plan.index


def test_a_move_keeps_personal_notes_apart() -> None:
    # The same bytes moved into a personal folder need their first person rewritten.
    stored = {"old.md": row("old.md", "h1")}
    new = disk("Journal/new.md", personal=True)
    plan = decide(stored, [Read(new, "h1")], {new.path}, Rules(build=BUILD))
    assert plan.index == (new,) and plan.delete == ("old.md",)


def test_personal_notes_are_judged_by_the_personal_build() -> None:
    # An owner's new name changes how personal notes are built, and theirs only.
    rules = Rules(build=BUILD, personal_build=f"{BUILD}/owner:new")
    personal = Stored("J/a.md", "h", 10, 1, True, f"{BUILD}/owner:old")
    assert not unchanged(personal, disk("J/a.md", personal=True), rules)
    assert unchanged(row("a.md"), disk("a.md"), rules)
    plan = decide(
        {"J/a.md": personal}, [Read(disk("J/a.md", personal=True), "h")], {"J/a.md"}, rules
    )
    assert plan.index and not plan.touch
    # A renamed note built another way is indexed at its new path, not moved there stale.
    new = disk("J/b.md", personal=True)
    plan = decide({"J/a.md": personal}, [Read(new, "h")], {new.path}, rules)
    assert plan.index == (new,) and plan.delete == ("J/a.md",) and not plan.moves


def test_two_copies_of_one_moved_note_take_one_source_each() -> None:
    stored = {"a.md": row("a.md", "h1"), "b.md": row("b.md", "h1")}
    x, y = disk("x.md"), disk("y.md")
    plan = decide(stored, [Read(x, "h1"), Read(y, "h1")], {"x.md", "y.md"}, Rules(build=BUILD))
    assert plan.moves == (Move("a.md", x), Move("b.md", y)) and not plan.delete


def test_a_move_from_outside_the_scope_comes_from_elsewhere() -> None:
    new = disk("inbox/n.md")
    read = [Read(new, "h1")]
    assert new_hashes({}, read) == ["h1"]
    elsewhere = {"archive/n.md": row("archive/n.md", "h1")}
    plan = decide({}, read, {new.path}, Rules(build=BUILD), elsewhere)
    # The source's row is re-keyed; it is not the scope's to delete.
    assert plan.moves == (Move("archive/n.md", new),) and not plan.delete


def test_force_indexes_everything_and_never_moves() -> None:
    stored = {"a.md": row("a.md", "h1"), "old.md": row("old.md", "h2")}
    a, new = disk("a.md"), disk("new.md")
    plan = decide(stored, [Read(a, "h1"), Read(new, "h2")], {"a.md", "new.md"}, Rules(force=True))
    assert plan.index == (a, new) and plan.delete == ("old.md",) and not plan.moves


def test_groups_keep_the_order_and_give_each_worker_a_share() -> None:
    items = list(range(40))
    cut = groups(items, 16, 2)
    assert [len(g) for g in cut] == [16, 16, 8]
    assert [i for g in cut for i in g] == items
    # A few items are shared out rather than left to one worker.
    assert [list(g) for g in groups(items[:5], 16, 2)] == [[0, 1, 2], [3, 4]]
    assert [list(g) for g in groups(items[:3], 1, 2)] == [[0], [1], [2]]
    assert groups([], 16, 2) == []


def test_pair_matches_rows_and_notes_by_path() -> None:
    rows = [row("a.md"), row("b/c.md"), row("d.md")]
    files = [disk("a.md"), disk("b.md"), disk("d.md"), disk("e.md")]
    assert list(pair(rows, files)) == [
        (row("a.md"), disk("a.md")),
        (None, disk("b.md")),
        (row("b/c.md"), None),
        (row("d.md"), disk("d.md")),
        (None, disk("e.md")),
    ]
    assert list(pair([], [])) == []


PATHS = st.sets(st.text("ab/.-é", min_size=1, max_size=6))


@given(PATHS, PATHS)
def test_pair_gives_each_path_once_with_both_sides(rows: set[str], files: set[str]) -> None:
    paired = list(pair([row(p) for p in sorted(rows)], [disk(p) for p in sorted(files)]))
    paths = []
    for old, new in paired:
        path = old.path if old else new.path if new else ""
        assert (old is not None, new is not None) == (path in rows, path in files)
        paths.append(path)
    assert paths == sorted(rows | files)


def test_pair_keeps_the_rows_under_a_folder_that_cannot_be_read() -> None:
    """A row without its note under an unreadable folder is neither paired as deleted nor
    lost: the scan reports the folder as it reaches it, before any later note."""
    rows = [row("a.md"), row("b/c.md"), row("b/d/e.md"), row("bz.md"), row("c.md")]
    unlisted: list[Unlisted] = []

    def scan() -> Iterator[OnDisk]:
        yield disk("a.md")
        unlisted.append(Unlisted("b/", "Permission denied"))
        yield disk("b0.md")

    assert list(pair(rows, scan(), unlisted)) == [
        (row("a.md"), disk("a.md")),
        (None, disk("b0.md")),
        (row("bz.md"), None),
        (row("c.md"), None),
    ]
    # The vault's root: every row is kept.
    assert list(pair(rows, [], [Unlisted("", "Input/output error")])) == []
    assert kept("b/c.md", unlisted) and not kept("bz.md", unlisted)


def test_a_row_kept_unread_is_neither_deleted_nor_a_move_source() -> None:
    stored = {"b/c.md": row("b/c.md", "h1"), "gone.md": row("gone.md", "h2")}
    copy = disk("copy.md")
    plan = decide(
        stored,
        [Read(copy, "h1")],
        {"copy.md"},
        Rules(build=BUILD),
        unlisted=[Unlisted("b/", "Permission denied")],
    )
    assert plan.delete == ("gone.md",) and plan.moves == () and plan.index == (copy,)


def test_pair_refuses_paths_out_of_order() -> None:
    """Out of order, a note would look deleted and new at once: a sync must stop instead."""
    with pytest.raises(ValueError, match="out of order"):
        list(pair([row("b.md"), row("a.md")], [disk("a.md")]))
    with pytest.raises(ValueError, match="out of order"):
        list(pair([], [disk("a.md"), disk("a.md")]))


def test_unchanged_on_stat_needs_the_same_size_mtime_personal_flag_and_build() -> None:
    rules = Rules(build=BUILD)
    assert unchanged(row("a.md"), disk("a.md"), rules)
    assert not unchanged(row("a.md"), disk("a.md", mtime=2), rules)
    assert not unchanged(row("a.md"), disk("a.md", size=11), rules)
    assert not unchanged(row("a.md"), disk("a.md", personal=True), rules)
    assert not unchanged(row("a.md"), disk("a.md"), Rules(build="llm/4/256"))
    assert not unchanged(row("a.md"), disk("a.md"), Rules(build=BUILD, trust_stat=False))


def test_a_rename_to_another_day_is_indexed_not_re_keyed() -> None:
    # The day a daily note's name says is its date: the same text on another day is another note.
    old = Stored("Journal/2024-05-03.md", "h", 1, 1, False, "b")
    renamed = OnDisk("Journal/2024-05-04.md", 1, 2, False)
    kept_day = OnDisk("Archive/2024-05-03 copy.md", 1, 2, False)
    rules = Rules(build="b")
    plan = decide({old.path: old}, [Read(renamed, "h")], {renamed.path}, rules)
    assert (plan.moves, plan.index) == ((), (renamed,))
    moved = decide({old.path: old}, [Read(kept_day, "h")], {kept_day.path}, rules)
    assert [m.target for m in moved.moves] == [kept_day]
