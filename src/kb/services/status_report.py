"""What the index holds and who is working on it: one report, read once, for every face.

`kb status` renders it, `kb status --json` prints `as_json()`, and MCP's `status` tool
answers with `summary()`, the shorter form an assistant needs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from kb.config import Config
from kb.llm import embed_profile
from kb.llm.profiles import EmbedderProfile
from kb.redact import redact
from kb.store import DaemonRow, QueueStatus, Reconciliation, Status, Undated, WorkerRow
from kb.store.documents import Documents
from kb.store.links import LinkCounts, Links
from kb.store.lock import Daemons
from kb.store.queue import Queue
from kb.store.state import State
from kb.store.vaults import VaultRows
from kb.store.workers import Workers
from kb.vault import obsidian
from kb.vault.sync_plan import StoredVault, own_vaults, searched_vaults


@dataclass(frozen=True)
class StatusSources:
    """The repositories the report reads, handed in by the composition root."""

    vaults: VaultRows
    state: State
    daemons: Daemons
    queue: Queue
    workers: Workers
    documents: Documents
    links: Links


@dataclass(frozen=True)
class Configured:
    """The models the config names (the index may hold others, see Status.chat_models)."""

    chat_model: str
    embed_model: str
    embed_profile: EmbedderProfile
    provider: str


@dataclass(frozen=True)
class StatusReport:
    database: str  # where the index lives, any password redacted
    vaults: list[str]
    index: Status
    links: LinkCounts  # the links between notes, and those leading to no indexed note
    daemons: list[DaemonRow]
    last_reconcile: Reconciliation | None
    queue: QueueStatus  # the notes waiting for their LLM context
    vectors: QueueStatus  # the notes waiting for their vectors (found by their words meanwhile)
    workers: list[WorkerRow]
    configured: Configured
    # Each vault's Obsidian settings kb follows, one a line (kb.vault.obsidian).
    obsidian: dict[str, list[str]]
    undated: list[Undated]  # notes whose date property names no day
    # Vaults the index holds that are not this config's: another configuration's (one of
    # this config's names at another folder too, its sync refused), or one dropped from
    # this config, kept until `kb forget` removes it.
    other_vaults: list[StoredVault]
    # Of those, the ones a running daemon or worker (another configuration's) holds, and by
    # whom ("daemon host:pid watches it"): `kb forget` refuses them while it runs.
    held: dict[str, str]

    @property
    def writer(self) -> DaemonRow | None:
        """The daemon that watches and writes, if one is alive."""
        return next((d for d in self.daemons if d.alive and d.role == "writer"), None)

    @property
    def daemon(self) -> Literal["running", "not running"]:
        return "running" if self.writer else "not running"

    @property
    def running_workers(self) -> list[WorkerRow]:
        return [w for w in self.workers if w.alive]

    def as_json(self) -> dict[str, Any]:
        """The whole report, as `kb status --json` prints it; every string redacted (an
        error may quote a database URL)."""
        data = {
            "database": self.database,
            **asdict(self.index),
            "links": asdict(self.links),
            "daemons": [asdict(d) for d in self.daemons],
            "last_reconcile": asdict(self.last_reconcile) if self.last_reconcile else None,
            "vectors": asdict(self.vectors),
            "enrichment": {
                **asdict(self.queue),
                "workers": [asdict(w) for w in self.workers],
            },
            "configured": asdict(self.configured),
            "obsidian": self.obsidian,
            "undated": [asdict(u) for u in self.undated],
            "other_vaults": [
                {**asdict(v), "held_by": self.held.get(v.name)} for v in self.other_vaults
            ],
        }
        redacted: dict[str, Any] = _redacted(data)
        return redacted

    def summary(self) -> dict[str, Any]:
        """The short form MCP's `status` tool answers with."""
        index, queue = self.index, self.queue
        return {
            "vaults": self.vaults,
            "documents": index.documents,
            "chunks": index.chunks,
            "links": self.links.links,
            "unresolved_links": self.links.unresolved,
            "embedded": index.embedded,
            "embed_model": index.embed_model,
            "chat_models": index.chat_models,
            "last_sync": asdict(index.last_sync) if index.last_sync else None,
            "failed_files": [f"{f.vault}/{f.path}" for f in index.failures],
            "other_vaults": {v.name: v.notes for v in self.other_vaults},
            "daemon": self.daemon,
            # Notes found by their words already, not yet by their meaning.
            "vectors": _backlog(self.vectors),
            # Notes searchable already, whose LLM context workers have yet to write.
            "enrichment": _backlog(queue),
        }


def _backlog(queue: QueueStatus) -> dict[str, Any]:
    return {
        "queued": queue.items,
        "in_progress": queue.in_progress,
        "failing": queue.failing,
        "done_last_hour": queue.done_last_hour,
        "notes_per_minute": round(queue.rate * 60, 2) if queue.rate else None,
        "eta_seconds": round(queue.eta_seconds) if queue.eta_seconds else None,
    }


def status_report(config: Config, sources: StatusSources) -> StatusReport:
    """Read the report from the index, for `config`."""
    database = (config.database_url and redact(config.database_url)) or (
        f"embedded PostgreSQL in {config.data_dir / 'pgdata'}"
    )
    llm = config.llm
    names = [v.name for v in config.vaults]
    folders = [v.folder for v in config.vaults]
    stored = sources.vaults.stored()
    daemons = sources.daemons.listed()
    workers = sources.workers.listed()
    # Its vaults but a name the index holds for another configuration's folder (its sync
    # refused), whose notes, workers and counts are not this config's.
    holders = {v.name: (v.folder, v.config) for v in stored}
    configured = config.folders()
    own = own_vaults(configured, config.file, holders)
    held = {
        vault: f"{kind} {who} {does}"
        for kind, does, beats in (
            ("worker", "builds its notes", workers),
            ("daemon", "watches it", daemons),
        )
        for who, vault in ((b.id, v) for b in beats if b.alive for v in b.vaults)
        if vault not in own
    }
    kept_to = searched_vaults(configured, config.file, holders)
    return StatusReport(
        database=database,
        vaults=names,
        index=sources.state.status(kept_to),
        links=sources.links.counts(kept_to),
        # Another configuration's daemons and workers on this index are theirs, not this one's.
        daemons=[d for d in daemons if d.serves(names, folders)],
        last_reconcile=sources.state.last_reconcile(),
        queue=sources.queue.status(kept_to),
        vectors=sources.queue.status(kept_to, "embed"),
        workers=[w for w in workers if w.serves(own)],
        configured=Configured(
            chat_model=llm.chat_model,
            embed_model=llm.embed_model,
            embed_profile=embed_profile(llm),
            provider=llm.provider,
        ),
        obsidian={v.name: obsidian.followed(v)[1].lines() for v in config.vaults},
        undated=sources.documents.undated(kept_to),
        other_vaults=[v for v in stored if v.name not in own],
        held=held,
    )


def duration(seconds: float | None) -> str:
    """An ETA or an age, as a person reads it: "45 s", "12 min", "3.5 h"."""
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value
