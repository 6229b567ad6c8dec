"""The `kb` command: a `kb query` that a running daemon can answer goes to it (see
kb.query_socket); everything else, and any query it cannot answer, runs here."""

from __future__ import annotations

import os
import sys

from kb.query_socket import ask_daemon


def main() -> None:
    reply = ask_daemon(sys.argv[1:], os.environ)
    if reply is None:
        from kb.cli import app

        app(prog_name="kb")
        return
    try:
        sys.stdout.write(reply.out)
        sys.stdout.flush()
    except BrokenPipeError:
        # `kb query … | head`: the reader has all it wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.stderr.write(reply.err)
    sys.exit(reply.exit)
