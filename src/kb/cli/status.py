"""`kb status`: what the index holds, who works on it, what failed."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

import typer

from kb.cli.render import shown
from kb.cli.shared import AsJson, session, stdout
from kb.services.status_report import duration

if TYPE_CHECKING:
    from kb.services.status_report import StatusReport


def status(
    ctx: typer.Context,
    as_json: AsJson = False,
) -> None:
    """What the index holds, which models made it, and what failed."""
    with session(ctx) as parts:
        status = parts.status_reader()()
    if as_json:
        text = json.dumps(status.as_json(), ensure_ascii=False, indent=2, default=str)
        stdout().file.write(text + "\n")
        return
    report = status.index
    stdout().print(f"database     {shown(status.database)}")
    stdout().print(f"documents    {report.documents}")
    stdout().print(f"chunks       {report.chunks} ({report.embedded} embedded)")
    links = status.links
    stdout().print(f"links        {links.links} ({links.unresolved} lead to no indexed note)")
    stdout().print(
        f"embeddings   {report.embed_model or '-'} ({report.dimensions or '-'} dimensions)"
    )
    share = report.cut / report.chunks if report.chunks else 0.0
    stdout().print(
        f"embedder     reads {status.configured.embed_profile.window} tokens; {report.cut} "
        f"chunks ({share:.0%}) have a full context longer than that, embedded cut"
    )
    models = ", ".join(f"{m} ({n} chunks)" for m, n in report.chat_models.items()) or "-"
    stdout().print(f"chat models  {shown(models)}")
    fallbacks = ", ".join(f"{n} {task.replace('_', ' ')}" for task, n in report.fallbacks.items())
    stdout().print(f"fallbacks    {fallbacks or 'none'}")
    last = report.last_sync
    stdout().print(f"last sync    {last.at if last else 'never'}")
    stdout().print(f"failed files {len(report.failures)}")
    for f in report.failures:
        stdout().print(f"  {shown(f.vault)}/{shown(f.path)}: {shown(f.error)}")
    for vault, lines in status.obsidian.items():
        stdout().print(
            f"obsidian     {shown(vault)}: {'; '.join(map(shown, lines)) or 'no settings'}"
        )
    for other in status.other_vaults:
        holder = status.held.get(other.name)
        then = (
            shown(holder)
            if holder
            else f"`kb forget {shown(shlex.quote(other.name))}` removes them"
        )
        # One of its names, synced from another folder by another configuration.
        whose = (
            f"at {shown(other.folder or '?')}, not this config's folder"
            if other.name in status.vaults
            else "this config does not name"
        )
        stdout().print(f"other vault  {shown(other.name)}: {other.notes} notes {whose}; {then}")
    if status.undated:
        stdout().print(f"undated      {len(status.undated)} notes (a date property names no day)")
    _print_daemons(status)
    _print_enrichment(status)


def _print_enrichment(status: StatusReport) -> None:
    for name, queue in (("vectors", status.vectors), ("enrichment", status.queue)):
        rate = f"{queue.rate * 60:.1f} notes/min" if queue.rate else "no recent rate"
        stdout().print(
            f"{name:<12} {queue.items} notes queued, {queue.in_progress} in progress, "
            f"{queue.failing} failing; {queue.done_last_hour} done in the last hour, {rate}, "
            f"ETA {duration(queue.eta_seconds) if queue.items else '-'}"
        )
        for f in queue.failures:
            stdout().print(
                f"  failing: {shown(f.vault)}/{shown(f.path)}: {shown(f.error)}"
                f" ({f.attempts} attempts)"
            )
    alive = status.running_workers
    stdout().print(f"workers      {len(alive) or 'none'} running")
    for w in alive:
        stdout().print(
            f"  {shown(w.host)} (pid {w.pid}): {w.in_hand} of {w.concurrency} "
            f"notes in hand, heartbeat {w.heartbeat_age:.0f}s ago"
        )
        if w.last_error:
            stdout().print(f"  last error: {shown(w.last_error)}")


def _print_daemons(status: StatusReport) -> None:
    writer = status.writer
    if writer:
        stdout().print(
            f"daemon       running on {shown(writer.host)} (pid {writer.pid}), "
            f"{shown(writer.activity)}, {writer.queue_length} paths queued, "
            f"heartbeat {writer.heartbeat_age:.0f}s ago"
        )
    else:
        stdout().print("daemon       not running")
    for d in status.daemons:
        if d is writer:
            continue
        state = "standby" if d.alive and d.role == "standby" else "dead"
        if d.alive and d.role != "standby":
            state = shown(d.activity)
        stdout().print(
            f"  {state}: {shown(d.host)} (pid {d.pid}), heartbeat {d.heartbeat_age:.0f}s ago"
        )
    for d in status.daemons:
        if d.alive and d.last_error:
            stdout().print(f"  last error: {shown(d.last_error)}")
    last = status.last_reconcile
    if last:
        stdout().print(
            f"reconciled   {last.at} ({shown(last.reason)}): {last.files} files, "
            f"{last.indexed} indexed, {last.deleted} deleted, {last.failed} failed"
        )
    else:
        stdout().print("reconciled   never")
