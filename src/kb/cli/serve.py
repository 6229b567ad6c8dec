"""`kb mcp` and `kb serve`: kb for AI assistants and for a browser, read-only."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Annotated

import typer

from kb.cli.shared import exit_now, session, stderr, stop_on_signals

if TYPE_CHECKING:
    from kb.container import Container
    from kb.web.server import WebServer


def mcp_command(
    ctx: typer.Context,
    http: Annotated[
        bool,
        typer.Option("--http", help="Serve streamable HTTP instead of stdio."),
    ] = False,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on with --http.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port to listen on with --http.")
    ] = 8765,
) -> None:
    """Serve kb to AI assistants over the Model Context Protocol (read-only).

    stdio by default, as desktop assistants launch it; --http serves streamable HTTP at
    http://HOST:PORT/mcp, requiring `Authorization: Bearer $KB_MCP_TOKEN` when that is set.
    """
    from kb.mcp.tools import build_server, serve

    # Nothing to finish on a stop: no tool writes, and a stopped client wants no answer. (A
    # stdio server could not end otherwise: its reader thread blocks on stdin until exit.)
    # Over HTTP, uvicorn shuts down first, then hands the signal on.
    stop_on_signals(lambda _signum: exit_now(0))
    with session(ctx) as parts:
        serve(
            build_server(parts),
            "http" if http else "stdio",
            host=host,
            port=port,
            token=os.environ.get("KB_MCP_TOKEN") or None,
        )


ServeHost = Annotated[str, typer.Option("--host", help="Address the web page listens on.")]
ServePort = Annotated[
    int, typer.Option("--port", min=1, max=65535, help="Port the web page listens on.")
]
AllowHosts = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        help="Another name the page may be reached by (a DNS name of this machine); repeatable.",
    ),
]


def serve_command(
    ctx: typer.Context,
    host: ServeHost = "127.0.0.1",
    port: ServePort = 8766,
    allow_host: AllowHosts = None,
) -> None:
    """Serve a web page to search, read and ask your notes (read-only).

    Beyond 127.0.0.1 it needs KB_SERVE_TOKEN; the address it prints carries the token.
    """
    stop = threading.Event()
    stop_on_signals(lambda _signum: stop.set())
    with session(ctx) as parts:
        server, token = web_server(parts, host, port, tuple(allow_host or ()))
        # The address to open, for the person who started it in a terminal: with the token.
        address = server.url + (f"?token={token}" if token else "")
        stderr().print(f"kb serve: {address}", markup=False, highlight=False, soft_wrap=True)
        stop.wait()
        server.stop()


def web_server(
    parts: Container, host: str, port: int, allow_hosts: tuple[str, ...]
) -> tuple[WebServer, str | None]:
    """The web page, serving, and the token it asks for (None on loopback without one).
    Nothing is printed here: a service's log (`kb daemon --serve`) must not hold the token."""
    from kb.services.access import check_exposure, serving_token
    from kb.web.routes import web_app
    from kb.web.server import WebServer

    token = serving_token(os.environ.get("KB_SERVE_TOKEN"))
    check_exposure(host, token, "KB_SERVE_TOKEN")
    server = WebServer(
        web_app(parts, host=host, token=token, allow_hosts=allow_hosts), host=host, port=port
    )
    server.start()
    return server, token
