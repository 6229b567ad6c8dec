"""`kb index`, `kb reindex`, `kb verify` and `kb forget`: the vaults into the index, the
check that they are equal, and a vault no config names out of it."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer

from kb.cli.render import shown
from kb.cli.shared import (
    EXIT_FILES_FAILED,
    EXIT_OUT_OF_SYNC,
    AsJson,
    interrupted_status,
    interruptible,
    session,
    stderr,
    stdout,
)
from kb.errors import KbError
from kb.services.status_report import duration

if TYPE_CHECKING:
    from rich.progress import Progress

    from kb.container import Container
    from kb.indexing.enrich import EnrichReport
    from kb.note_writing.events import SyncReport
    from kb.services.indexing import Queues


# How often the progress bar moves while files go by (seconds).
BAR_STEP = 0.05


def _progress() -> Progress:
    """A progress bar on stderr: what, a bar, done of total, the task's stats, time."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        console=stderr(),
        transient=False,
    )


def _run_sync(parts: Container, *, force: bool) -> SyncReport:
    from kb.note_writing.events import FileEvent, SyncReport

    with _progress() as progress:
        task = progress.add_task("indexing", total=None, stats="")
        report = SyncReport()

        def on_scan(files: int) -> None:
            total = progress.tasks[task].total or 0
            progress.update(task, total=total + files)

        done = [0, 0.0]  # files the bar has not shown yet; when it last moved

        def show() -> None:
            stats = (
                f"chunks {report.chunks} · LLM calls {report.llm_calls} · "
                f"skipped {report.unchanged + report.moved} · failed {report.failed}"
            )
            progress.update(task, advance=done[0], stats=stats)
            done[0], done[1] = 0, time.monotonic()

        def on_event(event: FileEvent) -> None:
            report.add(event)
            # Deleted rows and unreadable folders are no file of the scan's count.
            done[0] += event.action not in ("deleted", "unlistable")
            # The bar is drawn ten times a second: moving it for each of a large vault's
            # unchanged notes would cost more than looking at them.
            if time.monotonic() - done[1] >= BAR_STEP:
                show()

        with parts.indexer(on_event=on_event, on_scan=on_scan) as indexer:
            synced = indexer.sync(force=force)
        show()
        return synced


def _summarize(report: SyncReport) -> None:
    stderr().print(
        f"{report.files} files: {report.indexed} indexed, {report.unchanged} unchanged, "
        f"{report.moved} moved, {report.deleted} deleted, {report.failed} failed; "
        f"{report.chunks} chunks written, {report.llm_calls} LLM calls, "
        f"{report.embedded} texts embedded"
        + (
            f", {report.fallbacks} model answers rejected (structural context stored; "
            "`kb --verbose index` names them)"
            if report.fallbacks
            else ""
        )
    )
    for failure in report.failures:
        stderr().print(
            f"  failed: {shown(failure.vault)}/{shown(failure.path)}: {shown(failure.error)}"
        )
    for folder in report.unlisted:
        stderr().print(
            f"  cannot read {shown(folder.vault)}/{shown(folder.path)}: {shown(folder.error)};"
            " the notes indexed under it are kept as they were"
        )


def _exit_code(report: SyncReport | None, enriched: EnrichReport | None) -> None:
    # A folder that could not be read is notes that could not be synced: the same status.
    synced = report is None or not (report.failed or report.unlistable)
    if not synced or (enriched is not None and enriched.failed):
        raise typer.Exit(EXIT_FILES_FAILED)


def _enrichment(parts: Container, *, wait: bool) -> EnrichReport | None:
    """Say what is queued for vectors and LLM context and when it should be done; with
    `wait`, see it done (here, or by the running workers) and report what failed."""

    from kb.services import indexing

    queue = parts.store.queue
    # The vaults its drain claims notes of: waiting on any other's would never end.
    vaults = parts.indexing.claimed_vaults()
    backlog = indexing.backlog(queue, parts.store.workers, vaults)
    if backlog is None:
        return None
    for line in _queue_lines(backlog.queues, backlog.workers):
        stderr().print(line)
    if not wait:
        if not backlog.workers:
            stderr().print(
                "  they are searchable by their words now; `kb index --wait`, `kb worker` or"
                " `kb daemon` embeds them and writes their LLM context"
            )
        return None
    with _progress() as progress:
        task = progress.add_task("embedding, enriching", total=backlog.queues.items, stats="")

        def show(report: EnrichReport, left: indexing.Queues) -> None:
            # Notes queued meanwhile (a daemon indexing edits) join the total.
            done = report.done + report.vectored
            total = max(progress.tasks[task].total or 0, done + left.items)
            eta = f" · ETA {duration(left.eta_seconds)}" if left.eta_seconds else ""
            stats = (
                f"vectors {left.vectors.items} · context {left.context.items} · "
                f"LLM calls {report.llm_calls} · failing {left.failing}{eta}"
            )
            progress.update(task, total=total, completed=total - left.items, stats=stats)

        stop = threading.Event()
        with interruptible(stop):
            enriched = indexing.finish(
                queue, parts.store.workers, parts.drain, show, vaults, stop=stop
            )
    report, left = enriched.report, enriched.left
    if enriched.stopped:
        # The threads have finished the notes in hand; the rest stay queued.
        queued = [
            f"{n} notes still queued for {what}"
            for n, what in (
                (left.vectors.items, "their vectors"),
                (left.context.items, "their LLM context"),
            )
            if n
        ]
        stderr().print(f"interrupted: {', '.join(queued) or 'no note left queued'}")
        raise typer.Exit(interrupted_status(signal.SIGINT))
    if report.vectored or report.done:
        stderr().print(
            f"embedded {report.vectored} notes and enriched {report.done} here: "
            f"{report.llm_calls} LLM calls, {report.embedded} texts embedded"
            + (f", {report.fallbacks} model answers rejected" if report.fallbacks else "")
        )
    stderr().print(
        f"{left.items} notes still queued, {left.failing} failing"
        if left.items
        else "every note has its vectors and its LLM context"
    )
    for f in [*left.vectors.failures, *left.context.failures]:
        stderr().print(
            f"  failing: {shown(f.vault)}/{shown(f.path)}: {shown(f.error)} ({f.attempts} attempts)"
        )
    return report


def _queue_lines(queues: Queues, workers: int) -> list[str]:
    held = f" by {workers} worker{'s' if workers != 1 else ''}" if workers else ""
    lines = []
    for name, what, status in (
        ("vectors", "their vectors", queues.vectors),
        ("enrichment", "their LLM context", queues.context),
    ):
        if not status.items:
            continue
        rate = (
            f", {status.rate * 60:.1f} notes/min, ETA {duration(status.eta_seconds)}"
            if status.rate and status.eta_seconds
            else ""
        )
        lines.append(
            f"{name}: {status.items} notes queued for {what}, "
            f"{status.in_progress} in progress{held}, {status.failing} failing{rate}"
        )
    return lines


Wait = Annotated[
    bool,
    typer.Option(
        "--wait",
        help="Then wait until every note has its vectors and its LLM context (doing it here "
        "when no worker is running).",
    ),
]


def index(ctx: typer.Context, wait: Wait = False) -> None:
    """Sync every configured vault into the index (adds, updates, removes).

    Notes are searchable by their words when it returns; their vectors, then their LLM
    context, are written by workers (`kb worker`, `kb daemon`) or, with --wait, before it
    returns.
    """
    with session(ctx) as parts:
        report = _run_sync(parts, force=False)
        _summarize(report)
        enriched = _enrichment(parts, wait=wait)
    _exit_code(report, enriched)


def reindex(
    ctx: typer.Context,
    embeddings_only: Annotated[
        bool,
        typer.Option(
            "--embeddings-only", help="Keep summaries; only re-embed the stored full_context."
        ),
    ] = False,
    wait: Wait = False,
) -> None:
    """Redo everything, ignoring every cache (or only the embeddings)."""
    with session(ctx) as parts:
        if embeddings_only:
            with parts.indexer() as indexer:
                indexer.space.reembed_all()
            stderr().print(
                f"every vector dropped: re-embedding with {parts.config.llm.embed_model}"
            )
            _exit_code(None, _enrichment(parts, wait=wait))
            return
        report = _run_sync(parts, force=True)
        _summarize(report)
        enriched = _enrichment(parts, wait=wait)
    _exit_code(report, enriched)


def verify_command(
    ctx: typer.Context,
    as_json: AsJson = False,
) -> None:
    """Check that the index equals the vaults: exit 0 if so, else list the differences (exit 4)."""
    from kb.indexing.verify import KINDS, verify

    with session(ctx) as parts:
        report = verify(parts.config, parts.store.documents, parts.store.vaults.held)
    if as_json:
        data = {
            "in_sync": report.in_sync,
            "notes": report.notes,
            "rows": report.rows,
            "differences": [asdict(d) for d in report.differences],
        }
        stdout().file.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        for d in report.differences:
            where = f"{d.vault}/{d.path}" if d.path else d.vault
            detail = f"  ({d.detail})" if d.detail else ""
            stdout().print(f"{d.kind:<10} {shown(where)}{shown(detail)}")
        verdict = "in sync" if report.in_sync else f"{len(report.differences)} differences"
        stderr().print(f"{report.notes} notes on disk, {report.rows} rows in the index: {verdict}")
        if not report.in_sync:
            kinds = sorted({d.kind for d in report.differences})
            stderr().print("; ".join(f"{k}: {KINDS[k]}" for k in kinds))
    if not report.in_sync:
        raise typer.Exit(EXIT_OUT_OF_SYNC)


def forget_command(
    ctx: typer.Context,
    vault: Annotated[str, typer.Argument(help="The vault's name, as `kb status` lists it.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first.")] = False,
) -> None:
    """Remove a vault this config does not name from the index, with its notes (their model
    outputs and vectors are kept: content enriched once is never sent to a model again).
    A vault a running daemon or worker holds is refused."""
    from kb.names import composed

    with session(ctx) as parts:
        # Typed as macOS writes names (NFD) or not, a name is the stored one.
        stored = {composed(v.name): v for v in parts.store.vaults.stored()}
        found = stored.get(composed(vault))
        vault = found.name if found else vault
        mine = {composed(v.name): v.folder for v in parts.config.vaults}
        # A vault of this config's name synced from another folder is another vault: it may
        # go, as the sync that refused to take it says (kb.vault.sync_plan.vault_refusal).
        if composed(vault) in mine and (
            found is None or found.folder in (None, mine[composed(vault)])
        ):
            raise KbError(
                f"vault {vault!r} is in this config: remove it from the config first, or"
                " `kb reindex` to build it again"
            )
        if found is None:
            known = ", ".join(sorted(v.name for v in stored.values())) or "none"
            raise KbError(f"the index holds no vault {vault!r} (it holds: {known})")
        for d in parts.store.daemons.listed():
            if d.alive and vault in d.vaults:
                raise KbError(
                    f"vault {vault!r} is watched by daemon {d.id} (pid {d.pid} on {d.host}):"
                    f" stop it first (Ctrl-C where it runs, or `kill {d.pid}` on {d.host})"
                )
        for w in parts.store.workers.listed():
            if w.alive and vault in w.vaults:
                raise KbError(
                    f"vault {vault!r} is built by worker {w.id} (pid {w.pid} on {w.host}):"
                    f" stop it first (Ctrl-C where it runs, or `kill {w.pid}` on {w.host})"
                )
        notes = found.notes
        if not yes:
            if not sys.stdin.isatty():
                raise KbError(
                    f"forgetting vault {vault!r} removes its {notes} notes: add --yes to confirm"
                )
            typer.confirm(f"Remove vault {vault!r} and its {notes} notes?", abort=True)
        gone = parts.store.vaults.forget(vault)
    stderr().print(
        f"forgot vault {shown(vault)}: {gone} notes removed, their model outputs and vectors kept"
    )
