"""The web page's HTTP server, run in a thread so the same process can also watch the vaults
(`kb daemon --serve`) or simply wait to be stopped (`kb serve`)."""

from __future__ import annotations

import errno
import socket
import threading
import time

import uvicorn
from starlette.types import ASGIApp

from kb.errors import KbError

# How long a start may take before kb says the address cannot be served.
_START_TIMEOUT = 30.0
# How long a stop waits for the requests in hand. A search answers in far less; one that waits
# on a model server (a re-ranker that answers a byte at a time, an answer being written) is cut
# off rather than holding the stop for as long as the server likes: the page writes nothing.
STOP_GRACE = 2


class WebServer:
    """uvicorn serving one app on one address, in a thread of its own."""

    def __init__(self, app: ASGIApp, *, host: str, port: int) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=STOP_GRACE,
        )
        self.server = uvicorn.Server(config)
        self.host, self.port = host, port
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> None:
        """Serve; a KbError saying why when the address cannot be listened on."""
        # Bound here, not by uvicorn, which logs the reason and exits its thread: the error's
        # own reason is the line the user reads.
        sockets = self._listen()
        self._thread = threading.Thread(
            target=self.server.run, args=(sockets,), name="kb-web", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise KbError(f"cannot serve on {self.host}:{self.port}: the server did not start")
            time.sleep(0.05)

    def _listen(self) -> list[socket.socket]:
        """A bound socket for each address the host names, as asyncio's own server makes them
        ("localhost": IPv4 and IPv6)."""
        sockets: list[socket.socket] = []
        try:
            found = socket.getaddrinfo(
                self.host or None, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            for family, kind, proto, _, address in dict.fromkeys(found):
                sock = socket.socket(family, kind, proto)
                sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
        except OSError as exc:
            for sock in sockets:
                sock.close()
            raise KbError(cannot_listen(self.host, self.port, exc)) from None
        return sockets

    def stop(self) -> None:
        """Stop taking requests and give those in hand STOP_GRACE seconds to finish; a request
        still at work after it is left to its thread (a daemon thread, not waited for)."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=STOP_GRACE + 5)


def cannot_listen(host: str, port: int, error: OSError) -> str:
    """The one line for an address that cannot be listened on, by what the system said."""
    where = f"cannot serve on {host}:{port}"
    if isinstance(error, socket.gaierror):
        return f"{where}: no such address (choose another with --host)"
    if error.errno == errno.EACCES and port < 1024:
        return (
            f"{where}: permission denied (ports below 1024 need the administrator's rights; "
            "choose another with --port)"
        )
    if error.errno == errno.EADDRINUSE:
        return f"{where}: the address is in use (choose another with --port)"
    if error.errno == errno.EADDRNOTAVAIL:
        return f"{where}: the address is not this machine's (choose another with --host)"
    return f"{where}: {error.strerror or error} (choose another with --host or --port)"
