"""`kb daemon` and `kb worker`: the commands that run until stopped, logging in logfmt."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kb.cli.query import forwarded
from kb.cli.related import forwarded as forwarded_related
from kb.cli.serve import AllowHosts, ServeHost, ServePort, web_server
from kb.cli.shared import Options, exit_now, fail, stop_on_signals
from kb.config import MAX_ENRICH_CONCURRENCY, Config, load_config
from kb.errors import DatabaseError, KbError
from kb.logfmt import LogfmtFormatter, event

if TYPE_CHECKING:
    from kb.container import Container


def daemon(
    ctx: typer.Context,
    serve: Annotated[
        bool, typer.Option("--serve", help="Also serve the web page, as `kb serve` does.")
    ] = False,
    host: ServeHost = "127.0.0.1",
    port: ServePort = 8766,
    allow_host: AllowHosts = None,
) -> None:
    """Watch the vaults and keep the index equal to them (foreground; logs to stderr).

    SIGTERM or SIGINT finishes the file in hand (or abandons it after daemon.shutdown_grace
    seconds; its transaction is rolled back) and exits. A second signal exits at once.
    """
    from kb.daemon.query_socket import serving
    from kb.locations import config_identity

    log, stop = _service(ctx, "kb.daemon")
    options: Options = ctx.obj
    identity = config_identity(options.config, os.environ)
    config = _service_config(ctx)
    parts = _connect_until_stopped(config, stop, log)
    if parts is None:
        return
    runner = parts.daemon(stop=stop)
    web = None
    if serve:
        try:
            web, token = web_server(parts, host, port, tuple(allow_host or ()))
        except KbError as exc:
            parts.close()
            raise fail(str(exc)) from None
        # The URL alone: the log is kept and read by others; the token is the user's own.
        required: dict[str, Any] = {"token": "required"} if token else {}
        event(log, "serving the web page", url=web.url, **required)
    with serving(
        identity,
        os.environ,
        forwarded(parts),
        read=config.environment,
        related=forwarded_related(parts),
    ) as path:
        if path is not None:
            event(log, "answering queries", socket=str(path))
        runner.run()
    if web is not None:
        web.stop()
    if runner.abandoned:
        # A worker thread is still waiting on the LLM; Postgres rolls its transaction back.
        exit_now(0)
    parts.close()


def worker_command(
    ctx: typer.Context,
    until_empty: Annotated[
        bool,
        typer.Option("--until-empty", help="Exit once no queued note is left to claim."),
    ] = False,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-n",
            min=1,
            max=MAX_ENRICH_CONCURRENCY,
            help="Notes enriched at once (default enrich.concurrency).",
        ),
    ] = None,
) -> None:
    """Write the LLM context of queued notes (foreground; logs to stderr).

    Any number of workers, on any machines, may drain one database's queue; each needs the
    database and its model servers, not the vault. SIGTERM or SIGINT finishes the notes in
    hand and exits; a second signal exits at once (another worker takes them over).
    """
    log, stop = _service(ctx, "kb.worker")
    parts = _connect_until_stopped(_service_config(ctx), stop, log)
    if parts is None:
        return
    event(log, "worker started", concurrency=concurrency or parts.config.enrich.concurrency)
    runner = parts.worker(stop=stop, until_empty=until_empty, concurrency=concurrency)
    runner.run()
    event(log, "worker stopped")
    parts.close()


def _service(ctx: typer.Context, name: str) -> tuple[logging.Logger, threading.Event]:
    """A long-running command's logging (logfmt on stderr) and its stop event, set by the
    first SIGTERM or SIGINT; a second one exits at once."""
    options: Options = ctx.obj
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    logging.basicConfig(
        level=logging.DEBUG if options.verbose else logging.INFO,
        handlers=[handler],
        force=True,
    )
    for noisy in ("httpx", "pgserver", "openai", "watchdog"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # The pool warns at each failed reconnection while the database is away (about sixteen
    # lines for a killed embedded server): the daemon's and the worker's own lines say it.
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    log = logging.getLogger(name)
    stop = threading.Event()

    def stopping(signum: signal.Signals) -> None:
        event(log, "stopping", signal=signum.name)
        stop.set()

    stop_on_signals(stopping)
    return log, stop


def _service_config(ctx: typer.Context) -> Config:
    options: Options = ctx.obj
    try:
        return load_config(options.config)
    except KbError as exc:
        raise fail(str(exc)) from None


def _connect_until_stopped(
    config: Config, stop: threading.Event, log: logging.Logger
) -> Container | None:
    """Open kb's parts, waiting for the database as long as it takes (or until stopped)."""
    from kb.container import Container

    delay = 1.0
    while not stop.is_set():
        try:
            return Container.open(config)
        except DatabaseError as exc:
            event(
                log, "database unreachable: retrying", logging.ERROR, error=str(exc), retry_in=delay
            )
            stop.wait(delay)
            delay = min(delay * 2, 30.0)
    return None
