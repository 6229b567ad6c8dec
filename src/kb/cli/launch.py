"""The `kb` command: a `kb query` or `kb related` that a running daemon can answer goes to
it, and its results are shown here as the command shows them (see kb.daemon.query_socket);
everything else, and any command the daemon does not answer, runs here."""

from __future__ import annotations

import os
import sys

from kb.daemon.query_socket import Failed, Listed, Reply, Served, ask_daemon
from kb.errors import EXIT_ERROR
from kb.results import hits_json


def main() -> None:
    reply = ask_daemon(sys.argv[1:], os.environ)
    if reply is None:
        from kb.cli.app import app

        app(prog_name="kb")
        return
    try:
        _show(reply)
        sys.stdout.flush()
    except BrokenPipeError:
        # `kb query … | head`: the reader has all it wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if isinstance(reply, Failed):
        sys.exit(EXIT_ERROR)


def _show(reply: Reply) -> None:
    if isinstance(reply, Served) and reply.as_json and not reply.found.warnings:
        # What a script reads, written without loading the terminal library (the most
        # of what is left of a query's time).
        sys.stdout.write(hits_json(reply.found))
        return
    if isinstance(reply, Listed) and reply.as_json:
        from kb.cli.related_view import related_json

        sys.stdout.write(related_json(reply.related_notes))
        return
    from kb.cli.render import consoles, print_error, print_results

    out, err = consoles()
    if isinstance(reply, Failed):
        print_error(err, reply.error)
    elif isinstance(reply, Listed):
        from kb.cli.related_view import print_related

        print_related(out, reply.related_notes, explain=reply.explain)
    else:
        print_results(out, err, reply.found, as_json=reply.as_json, explain=reply.explain)
