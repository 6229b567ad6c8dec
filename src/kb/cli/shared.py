"""What every `kb` command shares: its consoles, its global options, its session with kb's
parts (a KbError anywhere is one line and exit status 1), and how a command that runs until
stopped takes signals."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from kb.cli.render import consoles, print_error
from kb.config import Config, load_config
from kb.errors import EXIT_ERROR, DatabaseError, KbError
from kb.redact import redact
from kb.terminal import printable

if TYPE_CHECKING:
    from kb.container import Container


_OUT, _ERR = consoles()


def stdout() -> Console:
    return _OUT


def stderr() -> Console:
    return _ERR


# `--json`, as the commands that print a report or results take it.
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]

EXIT_FILES_FAILED = 3
EXIT_OUT_OF_SYNC = 4


@dataclass(frozen=True)
class Options:
    """The global options, handed to each command through typer's context."""

    config: Path | None = None
    verbose: bool = False


class SafeLog(logging.Filter):
    """Log messages shown like everything else: no secrets, no terminal control."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = printable(redact(record.getMessage())), None
        return True


def setup_logging(verbose: bool) -> None:
    from rich.logging import RichHandler

    handler = RichHandler(
        console=stderr(), show_time=False, show_path=False, markup=False, rich_tracebacks=False
    )
    handler.addFilter(SafeLog())
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[handler],
        force=True,
    )
    for noisy in ("httpx", "pgserver", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # The pool warns at each failed reconnection, and psycopg of the errors it ignored while
    # cleaning up after the first (a COPY or a rollback on a lost connection): the command's
    # own error says it once.
    logging.getLogger("psycopg").setLevel(logging.ERROR)


def fail(message: str) -> typer.Exit:
    print_error(stderr(), message)
    return typer.Exit(EXIT_ERROR)


@contextmanager
def session(ctx: typer.Context) -> Iterator[Container]:
    """kb's parts for the configured database; a KbError anywhere becomes one line and exit
    code 1."""
    import psycopg

    from kb.container import Container
    from kb.db import disk_full, first_line

    options: Options = ctx.obj
    config: Config | None = None
    try:
        setup_logging(options.verbose)
        config = load_config(options.config)
        with Container.open(config) as parts:
            yield parts
    except (DatabaseError, psycopg.Error) as exc:
        full = disk_full(exc, config.database_url, config.data_dir) if config else None
        if full or isinstance(exc, KbError):
            raise fail(str(full or exc)) from None
        # The database went away mid-command (or refused a statement): one line, no traceback.
        raise fail(f"database error: {first_line(exc)}") from None
    except KbError as exc:
        raise fail(str(exc)) from None


# The signals that stop a command: SIGHUP is the terminal closed, the usual end of a `kb
# serve` run in a terminal window.
STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def stop_on_signals(stopping: Callable[[signal.Signals], None]) -> None:
    """How every command that runs until stopped (mcp, serve, daemon, worker) takes SIGTERM,
    SIGINT and SIGHUP: the first calls `stopping`, which ends the command as a normal exit
    would; a second exits at once. Either way an embedded PostgreSQL this process was the
    last to hold is stopped: an assistant or a service manager stops kb with SIGTERM, a
    closed terminal with SIGHUP."""
    signalled = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if signalled.is_set():
            exit_now(EXIT_ERROR)  # a second signal: the user does not want to wait
        signalled.set()
        stopping(signal.Signals(signum))

    for signum in STOPPING:
        signal.signal(signum, on_signal)


@contextmanager
def interruptible(stop: threading.Event) -> Iterator[None]:
    """While the block runs, a stopping signal sets `stop` instead of raising in the main
    thread: the block stops its threads before the database goes (a KeyboardInterrupt in a
    thread's join would let the block end with them still writing). A second signal exits
    at once with the signal's status."""

    def on_signal(signum: int, _frame: object) -> None:
        if stop.is_set():
            exit_now(interrupted_status(signum))
        stop.set()

    before = {signum: signal.signal(signum, on_signal) for signum in STOPPING}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def interrupted_status(signum: int) -> int:
    """A command's exit status when a signal stopped it, as a shell reports it (130 for
    Ctrl-C)."""
    return 128 + signum


def exit_now(code: int) -> NoReturn:
    """Exit without waiting for threads still at work (their transactions roll back). Exit
    handlers are skipped, so the embedded PostgreSQL is let go of here; what the threads
    say as it goes (a connection closed under them) is no news, and is not shown."""
    from kb.db import release_embedded

    logging.shutdown()
    logging.disable()
    threading.excepthook = lambda _args: None
    release_embedded()
    os._exit(code)
