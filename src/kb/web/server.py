"""The web page's HTTP server, run in a thread so the same process can also watch the vaults
(`kb daemon --serve`) or simply wait to be stopped (`kb serve`)."""

from __future__ import annotations

import threading
import time

import uvicorn
from starlette.types import ASGIApp

from kb.errors import KbError

# How long a start may take before kb says the address cannot be served.
_START_TIMEOUT = 30.0


class WebServer:
    """uvicorn serving one app on one address, in a thread of its own."""

    def __init__(self, app: ASGIApp, *, host: str, port: int) -> None:
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.host, self.port = host, port
        self._thread = threading.Thread(target=self.server.run, name="kb-web", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> None:
        """Serve; a KbError when the address cannot be listened on (taken, not this machine's)."""
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise KbError(
                    f"cannot serve on {self.host}:{self.port}: the address is in use or not "
                    "this machine's (choose another with --host or --port)"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop taking requests and let those in hand finish."""
        self.server.should_exit = True
        self._thread.join(timeout=10)
