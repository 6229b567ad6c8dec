"""Names as kb compares them: in one Unicode normal form.

The same name can be written two ways: "é" as one code point (composed, NFC, as Linux and
Windows programs mostly write it) or as "e" and a combining accent (decomposed, NFD, as
macOS writes names, and as Syncthing, Nextcloud, rsync or git then carry them to other
disks). A glob typed one way must hold for a folder named the other way, so globs, settings
and paths are compared composed; a path is still stored and opened as the disk names it.
"""

from __future__ import annotations

import unicodedata


def composed(name: str) -> str:
    """A name or glob in the form kb compares names in (NFC)."""
    return unicodedata.normalize("NFC", name)
