"""Notes on disk: which files are notes, listing them, their size and mtime, reading and
hashing them, and the title a note goes by.

A leaf module: the indexer, the watcher, `kb verify` and the MCP server all see a vault
through it, and nothing here knows about the index.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from kb.config import VaultConfig
from kb.errors import NoteError
from kb.vault.chunking import Chunk

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
    return rel_path.lower().endswith(NOTE_SUFFIXES) and not _ignored(vault, rel_path)


def _ignored(vault: VaultConfig, rel_path: str) -> bool:
    # Where the disk folds case, "private/x.md" opens Private/x.md: a rule holds for every
    # spelling of what it names.
    return vault.is_ignored(rel_path, case_sensitive=not folds_case(os.fspath(vault.path)))


@functools.lru_cache(maxsize=64)
def folds_case(folder: str) -> bool:
    """Whether the file system holding a folder takes names that differ only in case for one
    (macOS and Windows by default), tried with one of the folder's own entries."""
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                swapped = entry.name.swapcase()
                # A name whose case does not round-trip ("ß" becomes "SS") proves nothing.
                if swapped != entry.name and swapped.swapcase() == entry.name:
                    return _same_file(entry.path, os.path.join(folder, swapped))
    except OSError:
        pass
    # No cased entry to try: the folder's own name in its parent, or an ancestor's (most
    # often on the same disk).
    path = os.path.realpath(folder)
    while (parts := os.path.split(path))[1]:
        head, name = parts
        swapped = name.swapcase()
        if swapped != name and swapped.swapcase() == name:
            return _same_file(path, os.path.join(head, swapped))
        path = head
    return True  # nothing to tell by: the rules then hold for every spelling


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samestat(os.lstat(a), os.lstat(b))
    except OSError:
        return False


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
    """The note at a path, or None if it is missing, ignored, not a regular file, or in a
    linked folder (the scan does not enter those)."""
    if not is_note(vault, rel_path) or _in_linked_folder(vault, rel_path):
        return None
    try:
        st = os.stat(os.path.join(vault.path, rel_path))
    except OSError as exc:
        if exc.errno in _UNOPENABLE:
            return _unopenable(vault, rel_path)
        return None  # missing, or vanished between listing and stat
    return _on_disk(vault, rel_path, st)


# A note that is listed but cannot be stat'ed, ever: a loop of links, or a path longer than
# the system allows (PATH_MAX: 4,096 bytes on Linux, 1,024 on macOS).
_UNOPENABLE = (errno.ELOOP, errno.ENAMETOOLONG)


def _unopenable(vault: VaultConfig, rel_path: str) -> OnDisk:
    # Listed with no size or mtime, so that reading it fails it with the reason, in
    # `kb index` and `kb verify`, instead of it being passed over without a word.
    return OnDisk(rel_path, -1, -1, vault.is_personal(rel_path))


def _in_linked_folder(vault: VaultConfig, rel_path: str) -> bool:
    """Whether a folder on a vault-relative path (the last one too, for "a/b/") is a link."""
    folder = os.fspath(vault.path)
    for part in rel_path.split("/")[:-1]:
        folder = os.path.join(folder, part)
        if os.path.islink(folder):
            return True
    return False


def gone(vault: VaultConfig, rel_path: str) -> bool:
    """Whether nothing is at a path: not merely out of reach (in a folder that cannot be
    read, whose notes are kept)."""
    try:
        os.lstat(os.path.join(vault.path, rel_path))
    except OSError as exc:
        return exc.errno in _GONE
    return False


def _on_disk(vault: VaultConfig, rel_path: str, st: os.stat_result) -> OnDisk | None:
    # A FIFO or device named *.md would block or never end when read.
    if not stat.S_ISREG(st.st_mode):
        return None
    return OnDisk(rel_path, st.st_size, st.st_mtime_ns, vault.is_personal(rel_path))


def scan_vault(
    vault: VaultConfig, folder: str = "", *, unlisted: list[Unlisted] | None = None
) -> Iterator[OnDisk]:
    """Every note of a vault, or of one of its folders ("a/b/"), skipping dot-folders,
    ignored paths and non-Markdown files.

    A folder that cannot be read goes to `unlisted`, as soon as the scan reaches it (before
    any later path); without a list to report to, the scan raises its OSError. A folder that
    is gone is only empty, but for the vault's root: its rows are kept (see `plan.kept`).
    """
    if folder and (
        _ignored(vault, folder)
        or not inside_vault(vault, folder)
        or _in_linked_folder(vault, folder)
    ):
        return  # as a scan of the whole vault would not enter it
    yield from _scan_folder(vault, os.path.join(vault.path, folder), folder, unlisted)


@dataclass(frozen=True, slots=True)
class Unlisted:
    """A folder the scan could not read ("a/b/"; "" is the vault's root), or a linked note
    it could not stat: the notes stored under it may be there still."""

    path: str
    reason: str


# What a path that does not exist gives: it is gone, not unreadable. Any other error
# (permission, I/O, a privacy control, a stale network mount) says nothing of its notes.
_GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG)


def _scan_folder(
    vault: VaultConfig, top: str, rel_top: str, unlisted: list[Unlisted] | None
) -> Iterator[OnDisk]:
    """A folder's notes in path order (code point order of the relative path, as the index
    lists its rows for `plan.pair`), without following links to folders, and with no limit
    on depth. Each note costs one stat and no Path object: on an unchanged vault, the scan
    is most of a sync."""
    # One sorted listing per folder on the way down. A folder sorts by its name and a
    # slash, which is where its notes' paths fall among its siblings': "a.md" < "a/b.md"
    # < "a0.md".
    listings = [_listing(top, rel_top, unlisted, root=not rel_top)]
    folders = [rel_top]
    while listings:
        entry = next(listings[-1], None)
        if entry is None:
            listings.pop()
            folders.pop()
            continue
        rel_path, dir_entry, is_folder = entry
        if is_folder:
            if not dir_entry.is_symlink() and not vault.is_ignored(rel_path):
                listings.append(_listing(dir_entry.path, rel_path, unlisted))
                folders.append(rel_path)
            continue
        if not is_note(vault, rel_path):
            continue
        try:
            note = _on_disk(vault, rel_path, dir_entry.stat())
        except OSError as exc:
            if exc.errno in _UNOPENABLE:
                yield _unopenable(vault, rel_path)
                continue
            if exc.errno in _GONE:
                continue  # vanished between listing and stat, or a broken link
            if dir_entry.is_symlink():
                _unreadable(unlisted, rel_path, exc)  # where it links to
                continue
            # A folder that can be listed but not searched: no note in it can be stat'ed.
            _unreadable(unlisted, folders[-1], exc)
            listings[-1] = iter(())
            continue
        if note is not None:
            yield note


def _listing(
    directory: str, rel_dir: str, unlisted: list[Unlisted] | None, *, root: bool = False
) -> Iterator[tuple[str, os.DirEntry[str], bool]]:
    """A folder's entries as (relative path, entry, is a folder), a folder's path ending in
    a slash, in path order; none if it is gone, or cannot be read (then it is `unlisted`)."""
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
        if entries:
            # A folder that can be listed but not searched (mode r--) names its notes but
            # gives none of them: it is as unreadable as one that cannot be listed.
            os.stat(os.path.join(directory, "."))
    except OSError as exc:
        # A vault's root that is gone (an unmounted disk) keeps its notes, as one that
        # cannot be read does; a folder in it that is gone was deleted or moved.
        if root or exc.errno not in _GONE or exc.errno == errno.ENAMETOOLONG:
            _unreadable(unlisted, rel_dir, exc)
        return iter(())
    return iter(sorted(entries, key=lambda e: e[0]))


def _unreadable(unlisted: list[Unlisted] | None, path: str, exc: OSError) -> None:
    """A folder (or linked note) at `path` reported unreadable, or `exc` raised where the
    scan has nowhere to report it: never taken for an empty folder."""
    if unlisted is None:
        raise exc
    unlisted.append(Unlisted(path, exc.strerror or str(exc)))


def scan_scope(
    vault: VaultConfig, scope: Scope, unlisted: list[Unlisted] | None = None
) -> dict[str, OnDisk]:
    """The notes of a Scope as they are now; what cannot be read goes to `unlisted`."""
    found = {
        f.path: f
        for folder in sorted(scope.folders)
        for f in scan_vault(vault, folder, unlisted=unlisted)
    }
    for path in scope.files:
        if path in found or not is_note(vault, path) or _in_linked_folder(vault, path):
            continue
        try:
            st = os.stat(os.path.join(vault.path, path))
        except OSError as exc:
            if exc.errno in _UNOPENABLE:
                found[path] = _unopenable(vault, path)
            elif exc.errno not in _GONE:
                # A folder above it cannot be searched (a plain file's stat needs nothing
                # else): its own folder is reported.
                _unreadable(unlisted, path[: path.rfind("/") + 1], exc)
            continue
        if (note := _on_disk(vault, path, st)) is not None:
            found[path] = note
    return found


def inside_vault(vault: VaultConfig, rel_path: str) -> bool:
    """Whether a vault-relative path, links resolved, still lies inside the vault."""
    return _resolved_inside(vault.folder, vault, rel_path) is not None


def _resolved_inside(root: str, vault: VaultConfig, rel_path: str) -> str | None:
    """A vault-relative path with its links resolved, or None if that leaves the vault
    (`root`: the vault folder's own path, links resolved)."""
    # Strings, not a Path: pathlib interns every part of a path it parses (for good where
    # interned strings are immortal: early 3.12 releases, free-threaded builds), and the
    # table of interned strings, grown to every file name of a large vault, never shrinks.
    walked = _walked(root, rel_path)
    if walked is not None:
        return walked  # no part of it leaves the root
    real = os.path.realpath(os.path.join(vault.path, rel_path))
    return real if os.path.commonpath([root, real]) == root else None


def _walked(root: str, rel_path: str) -> str | None:
    """The path under `root` when none of its parts is a link, each part looked at once
    (realpath would walk the whole of the vault's own path again for every note: a touched
    vault's sync spent half its time there); None where a part is a link, "." or "..",
    which realpath resolves."""
    path = root
    for part in rel_path.split("/"):
        if part in ("", ".", ".."):
            return None
        path = os.path.join(path, part)
        if os.path.islink(path):
            return None
    return path


def _real_note(vault: VaultConfig, rel_path: str, root: str) -> str:
    """The file a vault-relative path opens, links resolved; NoteError if the path, or what
    it leads to, is outside the vault, ignored or in a dot-folder."""
    real = _resolved_inside(root, vault, rel_path)
    if real is None:
        raise NoteError("is a link to a file outside the vault; not read")
    if _ignored(vault, rel_path):
        raise NoteError("is ignored (an ignore rule or a dot-folder); not read")
    # A link, or a linked folder, must not reach what its target's own path would not.
    target = rel_path
    if real != os.path.join(root, rel_path):
        target = os.path.relpath(real, root).replace(os.sep, "/")
    if target != rel_path and _ignored(vault, target):
        raise NoteError("leads through a link to an ignored file or dot-folder; not read")
    return real


def read_note(vault: VaultConfig, rel_path: str, *, root: str | None = None) -> bytes:
    """A note's bytes; FileNotFoundError if it is gone, NoteError if it cannot be read.

    The one place kb reads a note: whatever a link or an event names, nothing outside the
    vault, ignored or in a dot-folder is opened. `root` is `vault.folder` where the
    caller reads many notes (resolved once for them all, not once a note).
    """
    real = _real_note(vault, rel_path, root or vault.folder)
    try:
        # O_NOFOLLOW: a link put in the file's place since the check above is refused;
        # O_NONBLOCK: a FIFO put there does not hang the read.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NoteError("is a loop of links; not read") from None
        if exc.errno == errno.ENAMETOOLONG:
            size = len(os.fsencode(os.path.join(vault.path, rel_path)))
            raise NoteError(
                f"cannot be read: its path is too long ({size} bytes, more than the system allows)"
            ) from None
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


def note_title(metadata: Mapping[str, Any], chunks: Sequence[Chunk], path: str) -> str:
    """The frontmatter title, else the first top-level heading, else the file name."""
    if isinstance(title := metadata.get("title"), str) and title.strip():
        return title.strip()
    for chunk in chunks:
        if chunk.header_path and chunk.header_path[0].startswith("# "):
            return chunk.header_path[0][2:].strip()
    return PurePosixPath(path).stem
