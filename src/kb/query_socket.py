"""`kb query` answered by a running daemon, over a Unix socket.

A `kb query` on its own spends most of its second loading Python libraries (the command
line's, the database driver's, NumPy) before it sends one statement. A daemon has them
loaded, and its pool connected: the `kb` launcher hands it the command line, the daemon
runs it through the same command-line code with its own parts, and the launcher prints
what came back. Whenever that cannot be done exactly as the command would do it alone (no
daemon for this configuration, another configuration, a usage error, a dead daemon), the
launcher runs the command itself; forwarding only ever saves time.

The protocol is one JSON line each way. Request: `argv`, `identity` (see
`locations.config_identity`), the launcher's `columns`, and the colours its stdout and stderr
show (`out_color`, `err_color`).
Reply: `exit`, `out`, `err`, or `refused` (the reason) when the launcher should run the
command itself. Only the user who runs the daemon can connect: the socket is in a folder
only they can enter, and the daemon checks the peer's uid.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import socketserver
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from kb.locations import config_identity, private_dir, socket_dir

log = logging.getLogger(__name__)

ColorSystem = Literal["standard", "256", "truecolor"]
COLOR_SYSTEMS: tuple[ColorSystem | None, ...] = (None, *get_args(ColorSystem))

# The global option that may come before a forwarded `query`. `--verbose` may not: its log
# lines are this process's to print.
_CONFIG = {"--config", "-c"}
MAX_REQUEST = 1 << 20
CONNECT_TIMEOUT = 0.5
# How long the launcher waits for an answer before running the query itself: long enough
# for a re-ranked query on a slow model server.
REPLY_TIMEOUT = 600.0


@dataclass(frozen=True)
class Request:
    argv: tuple[str, ...]
    identity: str
    columns: int
    out_color: ColorSystem | None  # None: not a terminal, or one without colours
    err_color: ColorSystem | None


@dataclass(frozen=True)
class Reply:
    exit: int
    out: str
    err: str


# What the daemon does with a request: run the command line, or refuse (None).
Runner = Callable[[Request], Reply | None]


def query_config(argv: Sequence[str]) -> tuple[bool, Path | None]:
    """Whether `argv` is a `kb query` the daemon may run, and the `--config` it names.

    Only `--config` may come before `query`, and help is always printed by the launcher
    itself.
    """
    config: Path | None = None
    args = iter(argv)
    for arg in args:
        if arg in _CONFIG:
            value = next(args, None)
            if value is None:
                return False, None
            config = Path(value)
        elif arg.startswith("--config="):
            config = Path(arg.removeprefix("--config="))
        else:
            forwardable = arg == "query" and "--help" not in argv
            return forwardable, config
    return False, None


def socket_path(identity: str, env: Mapping[str, str]) -> Path:
    return socket_dir(env) / f"{identity[:24]}.sock"


def _color(env: Mapping[str, str], terminal: bool) -> ColorSystem | None:
    """The colours a stream of the launcher shows, by the conventions Rich itself follows."""
    if env.get("NO_COLOR") or not (terminal or env.get("FORCE_COLOR")):
        return None
    term = env.get("TERM", "")
    if term in ("dumb", "unknown"):
        return None
    if env.get("COLORTERM", "").lower() in ("truecolor", "24bit"):
        return "truecolor"
    return "standard" if term in ("", "linux") else "256"


def ask_daemon(argv: Sequence[str], env: Mapping[str, str]) -> Reply | None:
    """The daemon's run of this command line, or None when the launcher must run it."""
    forwardable, config = query_config(argv)
    if not forwardable:
        return None
    identity = config_identity(config, env)
    path = socket_path(identity, env)
    if not path.exists() or not private_dir(path.parent, create=False):
        return None
    request = Request(
        argv=tuple(argv),
        identity=identity,
        columns=shutil.get_terminal_size().columns,
        out_color=_color(env, sys.stdout.isatty()),
        err_color=_color(env, sys.stderr.isatty()),
    )
    try:
        payload = json.dumps(request.__dict__, ensure_ascii=False).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(CONNECT_TIMEOUT)
            conn.connect(os.fsencode(path))
            conn.settimeout(REPLY_TIMEOUT)
            conn.sendall(payload + b"\n")
            conn.shutdown(socket.SHUT_WR)
            answer = json.loads(_read_all(conn))
        if "refused" in answer:
            return None
        return Reply(exit=int(answer["exit"]), out=str(answer["out"]), err=str(answer["err"]))
    except (OSError, UnicodeError, ValueError, KeyError, TypeError):
        # No daemon after all, or one that died or garbled its answer: run it here.
        return None


def _read_all(conn: socket.socket) -> bytes:
    parts = []
    while chunk := conn.recv(1 << 16):
        parts.append(chunk)
    return b"".join(parts)


def parse_request(data: bytes) -> Request:
    """A request as the daemon checks it: any field of the wrong type is a ValueError."""
    raw = json.loads(data)
    argv, columns = raw["argv"], raw["columns"]
    colors = raw["out_color"], raw["err_color"]
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise ValueError("argv must be a list of strings")
    if not (isinstance(columns, int) and 10 <= columns <= 10_000):
        raise ValueError("columns out of range")
    if any(c not in COLOR_SYSTEMS for c in colors):
        raise ValueError("unknown color system")
    return Request(
        argv=tuple(argv),
        identity=str(raw["identity"]),
        columns=columns,
        out_color=colors[0],
        err_color=colors[1],
    )


def _peer_uid(conn: socket.socket) -> int | None:
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    identity: str
    runner: Runner


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(5.0)
        answer: dict[str, object]
        try:
            if _peer_uid(conn) not in (None, os.getuid()):
                return
            data = _read_limited(conn)
            request = parse_request(data)
            answer = self._answer(request)
        except (OSError, UnicodeError, ValueError, KeyError, TypeError) as exc:
            answer = {"refused": f"bad request: {exc}"}
        with suppress(OSError):
            conn.settimeout(REPLY_TIMEOUT)
            conn.sendall(json.dumps(answer, ensure_ascii=False).encode("utf-8", "replace"))

    def _answer(self, request: Request) -> dict[str, object]:
        if request.identity != self.server.identity:
            return {"refused": "another configuration"}
        if not query_config(request.argv)[0]:
            return {"refused": "not a query"}
        reply = self.server.runner(request)
        if reply is None:
            return {"refused": "the launcher runs this one itself"}
        log.debug("answered a query for a launcher (exit %d)", reply.exit)
        return reply.__dict__


def _read_limited(conn: socket.socket) -> bytes:
    data = b""
    while len(data) <= MAX_REQUEST and (chunk := conn.recv(1 << 16)):
        data += chunk
        if data.endswith(b"\n"):
            break
    if len(data) > MAX_REQUEST:
        raise ValueError("request too large")
    return data


@contextmanager
def serving(identity: str, env: Mapping[str, str], runner: Runner) -> Iterator[Path | None]:
    """Answer `kb query` for this configuration while the block runs; yields the socket,
    or None when there is none to take (its folder is not private, or another live daemon
    of the same configuration answers already)."""
    path = socket_path(identity, env)
    if not private_dir(path.parent, create=True):
        log.warning("not answering queries: %s is not a private folder", path.parent)
        yield None
        return
    if _answers(path):
        yield None
        return
    with suppress(FileNotFoundError):
        path.unlink()  # left by a daemon that died
    try:
        server = _Server(os.fsdecode(path), _Handler)
    except OSError as exc:
        log.warning("not answering queries on %s: %s", path, exc)
        yield None
        return
    server.identity, server.runner = identity, runner
    thread = threading.Thread(target=server.serve_forever, name="kb-queries", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        with suppress(FileNotFoundError):
            path.unlink()


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(CONNECT_TIMEOUT)
        try:
            conn.connect(os.fsencode(path))
        except OSError:
            return False
    return True
