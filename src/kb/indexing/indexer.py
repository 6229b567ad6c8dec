"""The indexing pipeline: scan → parse → chunk → contextualize → store; the first of three
speeds.

A file is only read when its size or mtime changed, only re-chunked when its
hash changed, and only sent to the LLM for the chunks whose cached outputs are
missing. Renames and moves are re-keyed without any model call.

No embedder is asked here: a note is stored with the vectors already known for its texts
(by their hashes) and its full-text terms, so it is found by its words when this returns;
the texts with no vector wait in the embedding queue (`kb.indexing.vectorize`), queued in
the same transaction. With enrichment on, no chat model is asked either: a note whose LLM
outputs are all cached is stored with its full context, any other with the outputs that are
cached and structural context for the rest, and queued for enrichment; workers
(`kb.indexing.enrich`) write the missing outputs last.

A sync covers a whole vault (`kb index`, the daemon's reconciliation) or a Scope:
the files and folders a watcher named, judged by their state on disk now.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kb.config import Config, VaultConfig, load_config
from kb.errors import ConfigError, KbError, NoteError
from kb.hashes import content_hash
from kb.indexing import linking
from kb.note_writing.building import NoteBuilder
from kb.note_writing.bulk import bulk_bracket
from kb.note_writing.events import Emit, FileEvent, SyncReport
from kb.note_writing.preparing import NotePreparer
from kb.note_writing.space import EmbeddingSpace
from kb.note_writing.write_plan import IndexState, WritePlan, write_plan
from kb.note_writing.writing import NoteWriter, failed
from kb.store.caches import Caches
from kb.store.documents import Documents
from kb.store.links import Links
from kb.store.queue import Queue
from kb.store.state import LastSync, State
from kb.store.text_index import TextIndex
from kb.store.vaults import VaultRows
from kb.store.vectors import Vectors
from kb.vault import obsidian, presence, sync_plan
from kb.vault.notes import (
    MISNAMED,
    OnDisk,
    Scope,
    Unlisted,
    gone,
    nameable,
    read_note,
    scan_scope,
    scan_vault,
    shown_path,
    stat_note,
)

log = logging.getLogger("kb.indexer")


@dataclass
class _Survey:
    """What a sync of `scope` (None: the whole vault) looks closer at: the rows and notes not
    unchanged on their stat; how many rows and notes the vault has in all; the notes whose
    names cannot be stored, and the folders that could not be read."""

    scope: Scope | None
    stored: dict[str, sync_plan.Stored]
    on_disk: dict[str, OnDisk]
    rows: int = 0
    notes: int = 0
    misnamed: list[str] = field(default_factory=list)
    unlisted: list[Unlisted] = field(default_factory=list)


@dataclass(frozen=True)
class SyncSettings:
    """What a sync reads of the configuration, and nothing more."""

    vaults: tuple[VaultConfig, ...]
    # Whether the LLM context is left to the enrichment queue's workers (two speeds).
    enrich: bool
    # Whether a note is written without waiting on a chat model (enrichment, or none asked).
    model_free: bool
    llm_concurrency: int
    max_chars: int
    database: tuple[str, Path]  # its URL and kb's data directory: what a full disk names
    # The config file, resolved (None: a config read from no file): the index records which
    # configuration holds each vault (kb.vault.sync_plan.vault_refusal).
    config: str | None = None

    @classmethod
    def of(cls, config: Config) -> SyncSettings:
        enrich = config.enrich.enabled and config.context.summaries == "llm"
        return cls(
            vaults=tuple(config.vaults),
            enrich=enrich,
            model_free=enrich or config.context.summaries != "llm",
            llm_concurrency=max(1, config.llm.concurrency),
            max_chars=config.chunking.max_chars,
            database=(config.database_url, config.data_dir),
            config=config.file,
        )


class Indexer:
    def __init__(
        self,
        settings: SyncSettings,
        builder: NoteBuilder,
        *,
        documents: Documents,
        vaults: VaultRows,
        state: State,
        caches: Caches,
        queue: Queue,
        vectors: Vectors,
        text_index: TextIndex,
        links: Links,
        on_event: Callable[[FileEvent], None] | None = None,
        on_scan: Callable[[int], None] | None = None,
        checkpoint: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.documents = documents
        self.vaults = vaults
        self.state = state
        self.caches = caches
        self.queue = queue
        self.vectors = vectors
        self.text_index = text_index
        self.links = links
        self.chat_name = builder.context.chat.name
        self.on_event = on_event or (lambda event: None)
        self.on_scan = on_scan or (lambda files: None)
        # Called before each file and each write; it raises Interrupted to stop the run there.
        self.checkpoint = checkpoint or (lambda: None)
        self.enrich = settings.enrich
        self.context = builder.context
        self.preparer = NotePreparer(
            builder, self.context, self.chat_name, max_chars=settings.max_chars
        )
        workers = settings.llm_concurrency
        # With no chat model on this path, twice as many notes are read and stored at once
        # as the embedding server has requests in flight (Embedding holds them to that): it
        # is then never left waiting while a note is parsed or written.
        self.writer = NoteWriter(
            self.preparer,
            documents,
            threads=2 * workers if settings.model_free else workers,
            checkpoint=lambda: self.checkpoint(),
            database=settings.database,
        )
        embedding = builder.embedding
        self.space = EmbeddingSpace(
            vectors=vectors,
            queue=queue,
            vaults=vaults,
            embedding=embedding,
            model=embedding.embedder.name,
            own_vaults=[v.name for v in settings.vaults],
        )

    def close(self) -> None:
        self.writer.close()

    def __enter__(self) -> Indexer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- whole-vault sync --------------------------------------------------------------------------

    def sync(
        self, *, force: bool = False, vaults: Iterable[VaultConfig] | None = None
    ) -> SyncReport:
        """Make the index equal to every configured vault (or to the ones given). Vaults the
        config does not name are left as they are: another configuration may share this
        database, and a vault dropped from the config waits for `kb forget`."""
        report = SyncReport()
        self._follow_renames()
        self.space.follow()
        for vault in self.settings.vaults if vaults is None else vaults:
            self._sync_vault(vault, report, force=force)
        last = LastSync(_now_iso(), report.files, report.indexed, report.failed, report.llm_calls)
        self.state.synced(last)
        return report

    def _follow_renames(self) -> None:
        """Refuse a vault another configuration holds; re-key the rows of vaults the config
        now names otherwise (same folder)."""
        stored, held = self._holders(self.settings.vaults)
        configured = {v.name: v.folder for v in self.settings.vaults}
        for old, new in sync_plan.vault_renames(configured, stored, held).items():
            notes = self.vaults.rename(old, new)
            log.info("vault '%s' is now '%s' in the config: its %d notes kept", old, new, notes)

    def _holders(
        self, vaults: Iterable[VaultConfig]
    ) -> tuple[list[sync_plan.StoredVault], set[str]]:
        """The stored vaults and those another configuration still names, once none of
        `vaults` is refused (KbError, one line)."""
        stored = self.vaults.stored()
        config = self.settings.config
        held = {v.name for v in stored if v.config != config and _names(v)}
        present = {v.name for v in stored if v.folder is not None and os.path.isdir(v.folder)}
        for vault in vaults:
            claim = self._claim(vault)
            refusal = sync_plan.vault_refusal(claim, stored, held, present)
            if refusal is not None:
                raise KbError(refusal)
            for v in stored:
                if v.name == claim.name and v.folder not in (None, claim.folder):
                    log.info(
                        "vault '%s' moved from %s to %s: its rows follow",
                        v.name,
                        v.folder,
                        claim.folder,
                    )
        return stored, held

    def _claim(self, vault: VaultConfig) -> sync_plan.VaultClaim:
        """The vault as this configuration names it, and the settings it builds notes with."""
        built = {
            "conflicts": vault.conflicts,
            "obsidian": str(vault.obsidian),
            "date properties": ", ".join(vault.dates.keys),
            "context": self.context.build_id(False),
            "owner's context": self.context.build_id(True),
            "embedding model": self.space.model,
        }
        return sync_plan.VaultClaim(
            vault.name,
            vault.folder,
            self.settings.config,
            sync_plan.vault_settings(vault.personal, vault.ignore, built),
        )

    def sync_scope(self, vault: VaultConfig, scope: Scope) -> SyncReport:
        """Make the index equal to the vault for some files and folders, as they are now."""
        self._holders([vault])
        report = SyncReport()
        self._sync_vault(vault, report, force=False, scope=scope)
        return report

    def _sync_vault(
        self,
        vault: VaultConfig,
        report: SyncReport,
        *,
        force: bool,
        scope: Scope | None = None,
    ) -> None:
        def emit(event: FileEvent) -> None:
            report.add(event)
            self.on_event(event)

        followed = self._recorded(vault, emit)
        if followed is None:
            return
        vault = followed
        rules = self._rules(vault, force=force, trust_stat=scope is None)
        survey = self._survey(vault, scope, rules, emit)
        self.on_scan(survey.notes + len(survey.misnamed))
        for path in survey.misnamed:
            # Listed like any note that failed, under a name that can be stored and shown.
            emit(failed(self.documents, vault, shown_path(path), NoteError(MISNAMED)))
        for folder in survey.unlisted:
            emit(self._unlistable(vault, folder))
        todo = self._decide(vault, survey, rules, emit)
        self.checkpoint()
        self._touch_and_move(vault, todo, emit)
        plan = self._plan(len(todo.index), force)
        with bulk_bracket(self.text_index, bulk=plan.bulk):
            self.writer.index(vault, todo.index, emit, plan)
        self.checkpoint()
        self._delete(vault, todo, survey, emit)

    def _recorded(self, vault: VaultConfig, emit: Emit) -> VaultConfig | None:
        """The vault as a sync sees it, its folder and settings recorded; None when its disk
        is away."""
        # Read at each sync: an edit of .obsidian/*.json is taken up as a config change is.
        claim = self._claim(vault)
        vault, _ = obsidian.followed(vault)
        held = self.vaults.held(vault.name)
        root = presence.look(vault, held)
        if why := presence.absence(root, held):
            # Its notes are kept as under a folder that cannot be read, and looked at again
            # as one is: nothing is deleted while the disk is away.
            emit(self._unlistable(vault, Unlisted("", why)))
            return None
        if root is None:
            raise KbError(f"vault '{vault.name}': {vault.path} is not a directory")
        self.vaults.record(claim.name, claim.folder, claim.config, claim.settings, root.device)
        return vault

    def _decide(
        self, vault: VaultConfig, survey: _Survey, rules: sync_plan.Rules, emit: Emit
    ) -> sync_plan.Plan:
        """What becomes of the surveyed notes, once those to read are hashed: a note gone
        since the scan leaves `on_disk` (it is deleted), one that cannot be read is reported
        as failed."""
        stored, on_disk = survey.stored, survey.on_disk
        to_read, new = sync_plan.to_read(stored, list(on_disk.values()), rules)
        # Only hashes are kept here: a file's bytes are read again by the worker that
        # indexes it, so a first sync of a large vault does not hold it all in memory.
        read: list[sync_plan.Read] = []
        root = vault.folder
        for f in to_read:
            self.checkpoint()
            try:
                read.append(sync_plan.Read(f, content_hash(read_note(vault, f.path, root=root))))
            except FileNotFoundError:
                del on_disk[f.path]
            except NoteError as exc:
                emit(failed(self.documents, vault, f.path, exc))
        elsewhere = {}
        if survey.scope is not None and not rules.force:
            elsewhere = self._vanished_elsewhere(vault, sync_plan.new_hashes(stored, read), stored)
        return sync_plan.decide(
            stored, read, on_disk.keys(), rules, elsewhere, new, survey.unlisted
        )

    def _plan(self, notes: int, force: bool) -> WritePlan:
        """How this sync writes its `notes` notes, from the index as it is now."""
        return write_plan(
            notes,
            force=force,
            enrich=self.enrich,
            model_free=self.settings.model_free,
            index=IndexState(
                holds_vectors=self.vectors.space() is not None,
                holds_outputs=self.caches.holds_outputs,
                notes=lambda: sum(self.documents.row_counts().values()),
            ),
        )

    def _delete(
        self, vault: VaultConfig, todo: sync_plan.Plan, survey: _Survey, emit: Emit
    ) -> None:
        """The rows of notes gone deleted, the links their names resolved again, and the
        failures recorded for notes no longer there let go of."""
        docs, on_disk = self.documents, survey.on_disk
        scope, misnamed, unlisted = survey.scope, survey.misnamed, survey.unlisted
        # Paths named by the scope but not on disk may have a failure recorded, and no row.
        deleted = set(todo.delete) | (
            {
                shown_path(p)
                for p in scope.files
                if p not in on_disk and p not in misnamed and not sync_plan.kept(p, unlisted)
            }
            if scope
            else set()
        )
        # The names of the notes about to go, while their rows say them.
        gone_keys = self.links.keys_of(vault.name, deleted)
        docs.delete(vault.name, deleted)
        linking.resolve_again(
            self.links,
            vault.name,
            written=[*(f.path for f in todo.index), *linking.fill(self.links, vault)],
            moves=todo.moves,
            gone_keys=gone_keys,
        )
        if scope is None:
            failed_names = {*map(shown_path, misnamed), *(shown_path(u.path) for u in unlisted)}
            docs.keep_failures(
                vault.name,
                lambda p: (
                    p in failed_names
                    or sync_plan.kept(p, unlisted)
                    or stat_note(vault, p) is not None
                ),
            )
        for path in todo.delete:
            emit(FileEvent(vault.name, path, "deleted"))

    def _rules(self, vault: VaultConfig, *, force: bool, trust_stat: bool) -> sync_plan.Rules:
        """What decides which of the vault's notes are indexed again (kb.vault.sync_plan)."""
        retry = self.caches.paths_with_fallbacks(vault.name, self.chat_name)
        if not self.enrich:
            # Notes still queued from when enrichment was on get their LLM context now.
            retry |= self.queue.paths(vault.name)
        return sync_plan.Rules(
            force=force,
            trust_stat=trust_stat,
            build=self.context.build_id(False),
            personal_build=self.context.build_id(True),
            retry=frozenset(retry),
            dates=vault.dates,
        )

    def _touch_and_move(self, vault: VaultConfig, todo: sync_plan.Plan, emit: Emit) -> None:
        """The notes found unchanged, and those moved, recorded as such."""
        docs = self.documents
        docs.touch(vault.name, todo.touch)
        for f in todo.touch:
            emit(FileEvent(vault.name, f.path, "unchanged"))
        for move in todo.moves:
            self.checkpoint()
            f = move.target
            docs.move(vault.name, move.source, f.path, f.size, f.mtime_ns)
            log.debug("%s/%s: moved from %s", vault.name, f.path, move.source)
            emit(FileEvent(vault.name, f.path, "moved", moved_from=move.source))

    def _survey(
        self,
        vault: VaultConfig,
        scope: Scope | None,
        rules: sync_plan.Rules,
        emit: Emit,
    ) -> _Survey:
        """The rows and notes of a sync that are not unchanged on their stat (those are
        reported as they go by: a full sync of a large vault holds a few at a time)."""
        docs = self.documents
        survey = _Survey(scope, {}, {})
        misnamed, unlisted = survey.misnamed, survey.unlisted
        if scope is not None:
            survey.stored = docs.states_in(
                vault.name, map(shown_path, scope.files), map(shown_path, scope.folders)
            )
            found = nameable(scan_scope(vault, scope, unlisted).values(), misnamed)
            survey.on_disk = {f.path: f for f in found}
            survey.rows, survey.notes = len(survey.stored), len(survey.on_disk)
            return survey
        with docs.each_state(vault.name) as states:
            notes = nameable(scan_vault(vault, unlisted=unlisted), misnamed)
            for old, new in sync_plan.pair(states, notes, unlisted):
                survey.rows += old is not None
                survey.notes += new is not None
                if old and new and sync_plan.unchanged(old, new, rules):
                    emit(FileEvent(vault.name, new.path, "unchanged"))
                    continue
                if old:
                    survey.stored[old.path] = old
                if new:
                    survey.on_disk[new.path] = new
        return survey

    def _vanished_elsewhere(
        self, vault: VaultConfig, hashes: list[str], in_scope: Mapping[str, sync_plan.Stored]
    ) -> dict[str, sync_plan.Stored]:
        if not hashes:
            return {}
        return {
            d.path: d
            for d in self.documents.states_with_hashes(vault.name, hashes)
            if d.path not in in_scope and gone(vault, d.path)
        }

    def _unlistable(self, vault: VaultConfig, folder: Unlisted) -> FileEvent:
        # Recorded with the failed notes, so that `kb status` lists it until it can be read.
        self.documents.record_failure(
            vault.name,
            shown_path(folder.path),
            f"cannot be read ({folder.reason}): the notes indexed under it are kept as they were",
        )
        return FileEvent(vault.name, shown_path(folder.path), "unlistable", error=folder.reason)


def _names(vault: sync_plan.StoredVault) -> bool:
    """Whether the config file that last synced `vault` still names it at its folder: a
    file gone, or naming it no more, holds it no more; one that cannot be read may."""
    if vault.config is None or not os.path.isfile(vault.config):
        return False
    try:
        config = load_config(Path(vault.config))
    except ConfigError:
        return True
    return any(v.name == vault.name and vault.folder in (None, v.folder) for v in config.vaults)


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
