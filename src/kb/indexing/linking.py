"""The links part of a sync: the links of notes indexed before links were stored written
from their files (no chunking, no model), and the links a sync wrote, and those that name
the notes it wrote, moved or deleted, resolved (kb.store.links). A sync that changed nothing
costs two lookups of empty partial indexes here."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from kb.config import VaultConfig
from kb.errors import NoteError
from kb.store.links import Links
from kb.vault.link_rules import Link, extract, link_key
from kb.vault.notes import read_note
from kb.vault.parsing import decode, parse_note
from kb.vault.sync_plan import Move

log = logging.getLogger("kb.indexer")

# Notes whose links are written to one transaction when filling an older index's links.
_FILL_GROUP = 500


def fill(links: Links, vault: VaultConfig) -> list[str]:
    """Write the links of the vault's notes stored before links were (their rows stand as
    they are: the next edit of such a note indexes it whole). The paths filled."""
    due = links.without_links(vault.name)
    if not due:
        return []
    root = vault.folder
    ready: list[tuple[str, Sequence[str], Sequence[Link]]] = []
    for path, spans in sorted(due.items()):
        try:
            note = parse_note(decode(read_note(vault, path, root=root)))
        except (OSError, NoteError) as exc:
            # Gone or unreadable since its row was written: its next sync sees to it.
            log.debug("%s/%s: links not read: %s", vault.name, path, exc)
            continue
        found = extract(note.body, first_line=note.body_start_line, spans=spans)
        ready.append((path, note.metadata.get("aliases", []), found))
    for at in range(0, len(ready), _FILL_GROUP):
        links.write(vault.name, ready[at : at + _FILL_GROUP])
    log.info("%s: links written for %d notes stored before links were", vault.name, len(ready))
    return [path for path, _, _ in ready]


def resolve_again(
    links: Links,
    vault: str,
    *,
    written: Iterable[str],
    moves: Iterable[Move],
    gone_keys: Iterable[str],
) -> int:
    """Resolve the links a sync may have changed the end of: those written and not resolved
    yet, those that name a note it wrote, or moved (by either name), or deleted (`gone_keys`,
    read before the delete), and those that led to a note it wrote (an alias may be gone)."""
    written = list(written)
    keys = {link_key(p) for p in written} | set(gone_keys)
    keys |= {k for m in moves for k in (link_key(m.source), link_key(m.target.path))}
    keys |= links.keys_of(vault, written)  # their aliases, as just written
    return links.resolve(vault, keys=keys, sources=written)
