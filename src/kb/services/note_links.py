"""A note's links for every face (`kb` commands, MCP `note_links`, the page's note view and
`/api/links`), and the one way a NOTE argument becomes an indexed note.

A NOTE is, in this order: `vault:path` (a configured vault's name, a colon, a path in it);
a file path (absolute, or from the working directory) inside a configured vault's folder;
a path relative to a vault's root (`folder/Note.md`); or a note's name as a link names it
(`Note`, `folder/Note`, an alias), resolved as `[[Note]]` is (kb.vault.link_rules). A path
in two vaults, or a name of notes in two vaults, is refused with the choices.

Only the notes a sync indexed are found: an ignored or excluded note has no row, and no
link leads to it (a link naming one is kept as unresolved: its text is the linking note's).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kb.config import VaultConfig
from kb.errors import KbError
from kb.services.inputs import path_text
from kb.store.links import LinkRow, Links, StoredNote
from kb.vault.link_rules import NoteName, link_key, resolve


@dataclass(frozen=True)
class NoteLinks:
    """A note's links: the notes it links to, the notes that link to it (`line` is in the
    linking note), and its links that lead to no indexed note."""

    note: StoredNote
    links_to: list[LinkRow]
    linked_from: list[LinkRow]
    unresolved: list[LinkRow]

    def as_json(self) -> dict[str, Any]:
        def rows(found: list[LinkRow]) -> list[dict[str, Any]]:
            return [{k: v for k, v in asdict(r).items() if k != "document_id"} for r in found]

        return {
            "vault": self.note.vault,
            "path": self.note.path,
            "links_to": rows(self.links_to),
            "linked_from": rows(self.linked_from),
            "unresolved": [
                {k: v for k, v in asdict(r).items() if k not in ("document_id", "path", "title")}
                for r in self.unresolved
            ],
        }


class NoteFinder:
    """NOTE arguments made indexed notes, within a configuration's vaults."""

    def __init__(self, vaults: Sequence[VaultConfig], links: Links) -> None:
        self.vaults = list(vaults)
        self.names = [v.name for v in vaults]
        self.links = links

    def find(self, note: str, *, files: bool = True) -> StoredNote:
        """The indexed note `note` names (the module's forms), or a KbError saying why none.
        Without `files`, a file path is not one of them: a remote face's caller may not probe
        this machine's files."""
        try:
            path_text(note)
        except ValueError as exc:
            raise KbError(f"note: {exc}") from None
        text = note.strip()
        if not text:
            raise KbError("no note named: give a path or a note's name")
        vault, colon, rest = text.partition(":")
        if colon and vault in self.names:
            return self._one(self.links.note_at([vault], _relative(rest)), text)
        for v in self.vaults if files else ():
            inside = _inside(v, text)
            if inside is not None:
                return self._one(self.links.note_at([v.name], inside), text)
        at = self.links.note_at(self.names, _relative(text))
        if at:
            return self._one(at, text)
        return self._one(self._named(text), text)

    def _named(self, text: str) -> list[StoredNote]:
        """The notes `[[text]]` leads to, one a vault at most."""
        candidates = self.links.notes_named(self.names, link_key(text))
        found = []
        for vault in self.names:
            own = {c.path: c for c in candidates if c.vault == vault}
            names = [NoteName(c.path, c.aliases) for c in own.values()]
            path = resolve(text, "", names)
            if path is not None:
                found.append(own[path])
        return found

    def _one(self, found: list[StoredNote], text: str) -> StoredNote:
        if not found:
            raise KbError(f"no indexed note {text[:200]!r} in vaults {', '.join(self.names)}")
        if len(found) > 1:
            choices = ", ".join(f"{n.vault}:{n.path}" for n in found)
            raise KbError(f"{text[:200]!r} names a note in several vaults: {choices}")
        return found[0]

    def links_of(self, note: str, *, files: bool = True) -> NoteLinks:
        """The links of the note `note` names (`find`'s forms), both ways."""
        found = self.find(note, files=files)
        return NoteLinks(
            found,
            links_to=self.links.out_links(found.document_id),
            linked_from=self.links.backlinks(found.document_id),
            unresolved=self.links.unresolved(found.document_id),
        )


def _relative(path: str) -> str:
    return path.replace("\\", "/").strip().lstrip("/")


def _inside(vault: VaultConfig, text: str) -> str | None:
    """`text` as a path inside `vault`'s folder, if it is a file there."""
    if not os.path.isfile(text):
        return None
    root = vault.folder
    real = os.path.realpath(text)
    if not real.startswith(root + os.sep):
        return None
    return os.path.relpath(real, root).replace(os.sep, "/")
