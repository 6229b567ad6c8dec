"""Is the index equal to the vaults? Every note present with its current content, every
chunk embedded by the configured model or queued for it, and no row for anything that is gone.

This reads and hashes every note (it trusts no size or mtime), so it is the check that
`kb verify` runs and that the daemon's tests wait for.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from kb.config import Config, VaultConfig
from kb.context import ContextBuild
from kb.errors import NoteError
from kb.hashes import content_hash
from kb.llm import embed_name
from kb.store import Documents
from kb.vault import obsidian, presence
from kb.vault.notes import (
    MISNAMED,
    OnDisk,
    Unlisted,
    nameable,
    read_note,
    scan_vault,
    shown_path,
)
from kb.vault.presence import Held
from kb.vault.sync_plan import Stored, pair

KINDS = {
    "missing": "a note on disk with no row",
    "stale": (
        "a row whose hash or personal flag differs from the file, or whose context was built"
        " with other settings (owner_name, context, chunking, prompts)"
    ),
    "extra": "a row for a file that is gone",
    "failed": "a note that could not be indexed (its error is recorded)",
    "unembedded": (
        "a note with chunks lacking a vector from the configured model, not queued for them"
    ),
    "unreadable": "a note that cannot be read",
    "unlistable": "a vault folder that cannot be read (the notes indexed under it are kept)",
    "no vault": "a configured vault folder that does not exist",
    "broken": "rows written twice or half (duplicate documents, orphan or missing chunks)",
}


@dataclass(frozen=True)
class Difference:
    vault: str
    path: str
    kind: str  # a key of KINDS
    detail: str = ""


@dataclass
class VerifyReport:
    notes: int = 0
    rows: int = 0
    differences: list[Difference] = field(default_factory=list)

    @property
    def in_sync(self) -> bool:
        return not self.differences


def verify(
    config: Config, documents: Documents, held: Callable[[str], Held] | None = None
) -> VerifyReport:
    """`held` (the store's `vaults.held`) gives the device each vault was last synced on:
    without it, a vault's folder is taken for its missing disk only when it is empty."""
    report = VerifyReport()
    diffs = report.differences
    unembedded = set(documents.without_vectors(embed_name(config.llm)))
    build = ContextBuild.of(config)
    counts = documents.row_counts()
    for listed in config.vaults:
        # As a sync sees it: Obsidian's templates and excluded files are not notes.
        vault, _ = obsidian.followed(listed)
        if not vault.path.is_dir():
            report.rows += counts.get(vault.name, 0)
            diffs.append(Difference(vault.name, "", "no vault", str(vault.path)))
            continue
        # A folder the sync takes for its missing disk is one it does not read: its rows are
        # kept, not "extra" (which would send the user to delete them).
        kept = held(vault.name) if held else Held(counts.get(vault.name, 0) > 0, None)
        if why := presence.absence(presence.look(vault, kept), kept):
            report.rows += counts.get(vault.name, 0)
            diffs.append(Difference(vault.name, "", "unlistable", why))
            continue
        failures = documents.failures(vault.name)
        misnamed: list[str] = []
        unlisted: list[Unlisted] = []
        # Counted apart: `pair` leaves out the rows kept under a folder that cannot be read.
        report.rows += counts.get(vault.name, 0)
        with documents.each_state(vault.name) as states:
            notes = nameable(scan_vault(vault, unlisted=unlisted), misnamed)
            for row, note in pair(states, notes, unlisted):
                read, found = _check(vault, row, note, failures, unembedded, build)
                report.notes += read
                diffs.extend(found)
        for name in map(shown_path, misnamed):
            kind = "failed" if name in failures else "unreadable"
            diffs.append(Difference(vault.name, name, kind, MISNAMED))
        for folder in unlisted:
            diffs.append(
                Difference(vault.name, shown_path(folder.path), "unlistable", folder.reason)
            )
    for problem, count in documents.row_problems().items():
        if count:
            diffs.append(Difference("", "", "broken", f"{count} {problem.replace('_', ' ')}"))
    # The rows of vaults this config does not name are no difference: another configuration
    # may share the index (`kb status` lists them, `kb forget` removes them).
    return report


def _check(
    vault: VaultConfig,
    row: Stored | None,
    note: OnDisk | None,
    failures: Mapping[str, str],
    unembedded: Collection[tuple[str, str]],
    build: ContextBuild,
) -> tuple[bool, list[Difference]]:
    """Whether the note at one path was read, and how its row and file differ."""
    extra = [Difference(vault.name, row.path, "extra")] if row else []
    if note is None:
        return False, extra
    try:
        digest = content_hash(read_note(vault, note.path))
    except FileNotFoundError:
        return False, extra  # deleted while being verified
    except NoteError as exc:
        # Its row is kept (the file is there): not `extra`.
        kind = "failed" if note.path in failures else "unreadable"
        return False, [Difference(vault.name, note.path, kind, str(exc))]
    if row is None:
        if note.path in failures:
            return True, [Difference(vault.name, note.path, "failed", failures[note.path])]
        return True, [Difference(vault.name, note.path, "missing")]
    if row.content_hash != digest:
        detail = f"indexed {row.content_hash[:12]}, file {digest[:12]}"
        return True, [Difference(vault.name, note.path, "stale", detail)]
    if row.personal != note.personal:
        return True, [Difference(vault.name, note.path, "stale", "personal flag")]
    if row.context_build != build.id(row.personal) + vault.dates.build_part(row.path):
        detail = "context built with other settings"
        return True, [Difference(vault.name, note.path, "stale", detail)]
    if (vault.name, note.path) in unembedded:
        return True, [Difference(vault.name, note.path, "unembedded")]
    return True, []
