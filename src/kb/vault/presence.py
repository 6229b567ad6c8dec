"""Whether a vault's folder is there to sync, or is where its disk was before it went.

On Linux an unmounted disk (a removable disk, an fstab entry, SSHFS or NFS, a Docker bind
mount) leaves its mount point behind: an empty folder on the disk beneath. Read as the
vault, it would be every note deleted, and every model call paid again once the disk is
back. A vault taken for a missing disk is reported as a folder that cannot be read, and
its notes are kept as they were.

The rule: the disk is missing, while the index holds notes of the vault, where
- there is no folder at all (the disk was mounted at a folder above it);
- the folder has no entry at all (no note, no `.obsidian/`, nothing): a mount point;
- the folder holds no note and is on another device than at the last sync: a mount point
  the disk beneath gave a file or two (a device here is a file system as mounted: a bind
  mount of a folder on the same disk is another one).
A folder on another device that holds notes is synced: the disk is back (a network or
memory file system takes a new device number at each mount) or the vault was moved to
another disk. A vault whose notes were all deleted keeps something in its folder (Obsidian's
`.obsidian/`) and syncs as usual; one emptied of every entry leaves the config for `kb forget`.

`absence` decides from data alone; `look` is the one reader.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from kb.config import VaultConfig
from kb.vault.notes import scan_vault


@dataclass(frozen=True)
class Held:
    """What the index holds of a vault: whether it has notes, and the device its folder was
    on at its last sync (None: not known yet)."""

    notes: bool
    device: int | None


@dataclass(frozen=True)
class Root:
    """A look at a vault's folder: whether it was listed with no entry at all, its device,
    and whether it holds a note (None: not looked for, its device being the one the index
    knows)."""

    empty: bool
    device: int
    notes: bool | None = None


def absence(root: Root | None, held: Held) -> str | None:
    """Why the vault's folder is taken for its missing disk (its notes kept), or None: it
    is synced as it is (a `root` of None, no folder at all, then stops the sync)."""
    if not held.notes:
        return None  # nothing to lose: an empty new vault is just empty
    if root is None:
        return "the folder is not there, as a disk not mounted leaves it"
    if root.empty:
        return "the folder is empty, as an unmounted disk leaves it"
    if held.device is not None and root.device != held.device and root.notes is False:
        return "the folder holds no note and is on another disk than at the last sync"
    return None


def look(vault: VaultConfig, held: Held) -> Root | None:
    """The vault's folder as `absence` reads it; None if there is no folder there."""
    try:
        device = _device(vault.path)
    except OSError:
        return None  # nothing there, or nothing kb may look at: no folder to sync
    try:
        with os.scandir(vault.path) as listing:
            empty = next(listing, None) is None
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        # A folder that cannot be listed (its permissions) is not known to be empty: the
        # sync's scan says what it cannot read.
        return Root(empty=False, device=device)
    notes = None
    if held.notes and not empty and held.device is not None and device != held.device:
        # Only here is the folder searched for a note: a scan that stops at the first.
        notes = next(iter(scan_vault(vault, unlisted=[])), None) is not None
    return Root(empty=empty, device=device, notes=notes)


def _device(path: Path) -> int:
    """The file system a folder is on: its device, and on Linux the mount it is read through
    (tests put another one here).

    A bind mount (Docker's, fstab's `bind`) shares its device with the folder it shows: only
    its mount tells its mount point, left with a `lost+found/` or `.obsidian/` once
    unmounted, from the vault. A new mount of the same disk is another file system here, as
    a network or memory one is: a folder that holds notes is synced all the same."""
    device = os.stat(path).st_dev
    mount = _mount_id(path)
    if mount is None:
        return device
    digest = hashlib.blake2b(f"{device}:{mount}".encode(), digest_size=7).digest()
    return int.from_bytes(digest)  # under 2**56: a bigint


def _mount_id(path: Path) -> int | None:
    """The id of the mount a folder is read through (Linux's `mnt_id`), or None where the
    system does not say."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_PATH", 0))
    except OSError:
        return None
    try:
        with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as info:
            for line in info:
                if line.startswith("mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return None
