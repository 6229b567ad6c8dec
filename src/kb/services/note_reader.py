"""Reading a note for a face (MCP's `get_note`, the web page's note view): the one way a
request's vault name and path become a note's text.

A path is only ever read inside a configured vault's root, after links are resolved, and
only if it is a note kb would index: the config's rules and the vault's Obsidian settings
(its templates folder, its excluded files), read as a sync reads them (kb.vault.obsidian.followed),
for the path and for where it leads (see kb.vault.notes.read_note).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kb.config import VaultConfig
from kb.errors import KbError, NoteError
from kb.services.inputs import path_text
from kb.vault.notes import inside_vault, is_note, read_note
from kb.vault.obsidian import followed
from kb.vault.parsing import decode


@dataclass(frozen=True)
class NoteText:
    vault: str
    path: str
    start_line: int  # 1-based, inclusive
    end_line: int
    total_lines: int
    text: str


class Vaults:
    """Reads notes inside the configured vault roots only."""

    def __init__(self, vaults: tuple[VaultConfig, ...]) -> None:
        self.by_name = {v.name: v for v in vaults}

    def resolve(self, vault: str, path: str) -> tuple[VaultConfig, str]:
        """A note's vault and vault-relative path, or a KbError saying why there is none."""
        listed = self.by_name.get(vault)
        if listed is None:
            raise KbError(f"no vault named {vault[:80]!r}; vaults: {', '.join(self.by_name)}")
        try:
            # Every face's request comes through here: a name the system cannot take is
            # refused before any file call would fail on it.
            path_text(path)
        except ValueError as exc:
            raise KbError(f"path: {exc}") from None
        # Read at each request, as at each sync: what the indexer refuses is never served.
        config, _ = followed(listed)
        rel = path.replace("\\", "/").strip()
        if not rel or rel.startswith("/") or ".." in rel.split("/"):
            raise KbError(f"{path!r} is not a path inside the vault")
        if not is_note(config, rel):
            raise KbError(f"{path!r} is not a note (a Markdown file that is not ignored)")
        # A symlink may point anywhere: only what really lies under the root is served.
        if not inside_vault(config, rel):
            raise KbError(f"{path!r} leads outside the vault")
        # os.path.isfile, not Path.is_file: a path the system refuses is no note either.
        if not os.path.isfile(os.path.join(config.path, rel)):
            raise KbError(f"no note {path!r} in vault {vault!r}")
        return config, rel

    def read(
        self, vault: str, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> NoteText:
        """A note as it is on disk now, whole or lines `start_line` to `end_line`."""
        config, rel = self.resolve(vault, path)
        try:
            text = decode(read_note(config, rel))
        except (FileNotFoundError, NoteError) as exc:
            raise KbError(f"{vault}/{path}: {exc}") from None
        lines = text.split("\n")
        first = max(1, start_line or 1)
        last = min(len(lines), end_line or len(lines))
        if first > last:
            raise KbError(f"no lines {first}-{end_line or first} in a note of {len(lines)} lines")
        return NoteText(vault, path, first, last, len(lines), "\n".join(lines[first - 1 : last]))
