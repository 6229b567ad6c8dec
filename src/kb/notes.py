"""Notes on disk: which files are notes, listing them, their size and mtime, reading and
hashing them.

A leaf module: the indexer, the watcher, `kb verify` and the MCP server all see a vault
through it, and nothing here knows about the index.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kb.config import VaultConfig
from kb.errors import NoteError

NOTE_SUFFIXES = (".md", ".markdown")
MAX_NOTE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Scope:
    """Part of a vault: some files, and everything under some folders ("a/b/"; "" is the root)."""

    files: frozenset[str] = frozenset()
    folders: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class OnDisk:
    path: str
    size: int
    mtime_ns: int
    personal: bool


# Why a note whose file name is not UTF-8 is not indexed (a row's path is text).
MISNAMED = "its file name is not valid UTF-8: rename it to index it"


def is_note(vault: VaultConfig, rel_path: str) -> bool:
    """Whether a vault-relative path names a note: Markdown, and not ignored."""
    return rel_path.lower().endswith(NOTE_SUFFIXES) and not vault.is_ignored(rel_path)


def shown_path(rel_path: str) -> str:
    """A path as it is stored and shown: bytes that are not UTF-8 in a file name (kept by
    os.fsdecode as surrogates) become visible \\xNN escapes."""
    return os.fsencode(rel_path).decode("utf-8", "backslashreplace")


def nameable(notes: Iterable[OnDisk], misnamed: list[str]) -> Iterator[OnDisk]:
    """The notes whose file name can be stored; the paths of the others (see MISNAMED), as
    the file system gives them, go to `misnamed`."""
    for note in notes:
        if shown_path(note.path) == note.path:
            yield note
        else:
            misnamed.append(note.path)


def stat_note(vault: VaultConfig, rel_path: str) -> OnDisk | None:
    """The note at a path, or None if it is missing, ignored or not a regular file."""
    if not is_note(vault, rel_path):
        return None
    try:
        st = os.stat(os.path.join(vault.path, rel_path))
    except OSError:
        return None  # missing, or vanished between listing and stat
    return _on_disk(vault, rel_path, st)


def _on_disk(vault: VaultConfig, rel_path: str, st: os.stat_result) -> OnDisk | None:
    # A FIFO or device named *.md would block or never end when read.
    if not stat.S_ISREG(st.st_mode):
        return None
    return OnDisk(rel_path, st.st_size, st.st_mtime_ns, vault.is_personal(rel_path))


def scan_vault(vault: VaultConfig, folder: str = "") -> Iterator[OnDisk]:
    """Every note of a vault, or of one of its folders ("a/b/"), skipping dot-folders,
    ignored paths and non-Markdown files."""
    if folder and (vault.is_ignored(folder) or not inside_vault(vault, folder)):
        return
    yield from _scan_folder(vault, os.path.join(vault.path, folder), folder)


def _scan_folder(vault: VaultConfig, top: str, rel_top: str) -> Iterator[OnDisk]:
    """A folder's notes in path order (code point order of the relative path, as the index
    lists its rows for `plan.pair`), without following links to folders, and with no limit
    on depth. Each note costs one stat and no Path object: on an unchanged vault, the scan
    is most of a sync."""
    # One sorted listing per folder on the way down. A folder sorts by its name and a
    # slash, which is where its notes' paths fall among its siblings': "a.md" < "a/b.md"
    # < "a0.md".
    listings = [_listing(top, rel_top)]
    while listings:
        entry = next(listings[-1], None)
        if entry is None:
            listings.pop()
            continue
        rel_path, dir_entry, is_folder = entry
        if is_folder:
            if not dir_entry.is_symlink() and not vault.is_ignored(rel_path):
                listings.append(_listing(dir_entry.path, rel_path))
            continue
        if not is_note(vault, rel_path):
            continue
        try:
            note = _on_disk(vault, rel_path, dir_entry.stat())
        except OSError:
            continue  # vanished between listing and stat
        if note is not None:
            yield note


def _listing(directory: str, rel_dir: str) -> Iterator[tuple[str, os.DirEntry[str], bool]]:
    """A folder's entries as (relative path, entry, is a folder), a folder's path ending in
    a slash, in path order."""
    try:
        with os.scandir(directory) as listing:
            entries = []
            for entry in listing:
                try:
                    is_folder = entry.is_dir()
                except OSError:
                    is_folder = False
                rel_path = rel_dir + entry.name + ("/" if is_folder else "")
                entries.append((rel_path, entry, is_folder))
    except OSError:
        return iter(())  # gone, or unreadable, since it was listed
    return iter(sorted(entries, key=lambda e: e[0]))


def scan_scope(vault: VaultConfig, scope: Scope) -> dict[str, OnDisk]:
    found = {f.path: f for folder in sorted(scope.folders) for f in scan_vault(vault, folder)}
    for path in scope.files:
        if path not in found and (note := stat_note(vault, path)) is not None:
            found[path] = note
    return found


def inside_vault(vault: VaultConfig, rel_path: str) -> bool:
    """Whether a vault-relative path, links resolved, still lies inside the vault."""
    return _resolved_inside(vault, rel_path) is not None


def _resolved_inside(vault: VaultConfig, rel_path: str) -> str | None:
    """A vault-relative path with its links resolved, or None if that leaves the vault."""
    root = os.path.realpath(vault.path)
    # Strings, not a Path: pathlib interns every part of a path it parses (for good where
    # interned strings are immortal: early 3.12 releases, free-threaded builds), and the
    # table of interned strings, grown to every file name of a large vault, never shrinks.
    real = os.path.realpath(os.path.join(vault.path, rel_path))
    return real if os.path.commonpath([root, real]) == root else None


def read_note(vault: VaultConfig, rel_path: str) -> bytes:
    """A note's bytes; FileNotFoundError if it is gone, NoteError if it cannot be read.

    The one place kb reads a note: whatever a link or an event names, nothing outside the
    vault is opened.
    """
    real = _resolved_inside(vault, rel_path)
    if real is None:
        raise NoteError("is a link to a file outside the vault; not read")
    try:
        # O_NOFOLLOW: a link put in the file's place since the check above is refused;
        # O_NONBLOCK: a FIFO put there does not hang the read.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise NoteError(f"cannot be read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(file.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise NoteError("is not a regular file")
        if st.st_size > MAX_NOTE_BYTES:
            raise NoteError(
                f"is {st.st_size // (1024 * 1024)} MiB, over the {MAX_NOTE_BYTES >> 20} "
                "MiB limit for a note"
            )
        try:
            return file.read()
        except OSError as exc:
            raise NoteError(f"cannot be read: {exc.strerror or exc}") from None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
