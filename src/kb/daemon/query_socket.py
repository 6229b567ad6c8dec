"""`kb query` and `kb related` answered by a running daemon, over a Unix socket.

A `kb query` on its own spends most of its second loading Python libraries (the command
line's, the database driver's, NumPy) before it sends one statement. A daemon has them
loaded, and its pool connected: the `kb` launcher hands it the command line, the daemon
reads it with the command's own options and runs the search service, and the launcher
shows the results it gets back as the command would (kb.cli.render). Whenever that cannot be
done exactly as the command would do it alone (no daemon for this configuration, another
configuration, a usage error, the database failing, a dead daemon), the launcher runs the
command itself; forwarding only ever saves time.

The protocol is one JSON object each way. Request: `argv`, `identity` (see
`locations.config_identity`) and `environment`, the launcher's, which the daemon compares on
the variables its configuration read besides kb's own (`Config.environment`: OLLAMA_HOST).
Reply: the results (`hits`, `mode_used`, `warnings`, and how to show them: `json`,
`explain`); for `kb related`, `related_notes` (the object `kb related --json` prints) with
`json` and `explain`; or `error`, the one line the command stops with; or
`refused` (the reason) when the launcher should run the command itself. Only the user who
runs the daemon can connect: the socket is in a folder only they can enter, and the daemon
checks the peer's uid.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import socketserver
import struct
import threading
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from kb.locations import config_identity, private_dir, socket_dir
from kb.results import SEARCH_MODES, SearchHit, SearchMode, SearchResult

log = logging.getLogger("kb.query_socket")

# The commands a daemon may answer.
FORWARDED = ("query", "related")
# The global option that may come before a forwarded command. `--verbose` may not: its log
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
    environment: dict[str, str]


@dataclass(frozen=True)
class QueryLine:
    """A command line a daemon may answer: the config file it names, and the command's own
    arguments (what follows `query` or `related`)."""

    config: Path | None
    args: tuple[str, ...]
    command: str = "query"


@dataclass(frozen=True)
class Served:
    """A query the daemon ran: what it found, and how the command line asked to see it."""

    found: SearchResult
    as_json: bool
    explain: bool


@dataclass(frozen=True)
class Listed:
    """The related notes the daemon found (`kb related --json`'s object, which the command
    prints from in either form), and how the command line asked to see them."""

    related_notes: dict[str, Any]
    as_json: bool
    explain: bool


@dataclass(frozen=True)
class Failed:
    """A query stopped by an error: the one line the command prints before it exits 1."""

    error: str


Reply = Served | Listed | Failed
# What the daemon does with a command's own arguments: run it, or refuse (None) when the
# launcher must run it itself.
Runner = Callable[[tuple[str, ...]], Reply | None]


def query_line(argv: Sequence[str]) -> QueryLine | None:
    """`argv` as a `kb query` or `kb related` the daemon may run, or None.

    Only `--config` may come before the command, and help is always printed by the launcher
    itself.
    """
    config: Path | None = None
    args = iter(enumerate(argv))
    for i, arg in args:
        if arg in _CONFIG:
            value = next(args, None)
            if value is None:
                return None
            config = Path(value[1])
        elif arg.startswith("--config="):
            config = Path(arg.removeprefix("--config="))
        elif arg in FORWARDED and "--help" not in argv:
            return QueryLine(config, tuple(argv[i + 1 :]), arg)
        else:
            return None
    return None


def socket_path(identity: str, env: Mapping[str, str]) -> Path:
    return socket_dir(env) / f"{identity[:24]}.sock"


def ask_daemon(argv: Sequence[str], env: Mapping[str, str]) -> Reply | None:
    """The daemon's answer to this command line, or None when the launcher must run it."""
    line = query_line(argv)
    if line is None:
        return None
    identity = config_identity(line.config, env)
    path = socket_path(identity, env)
    if not path.exists() or not private_dir(path.parent, create=False):
        return None
    request = Request(argv=tuple(argv), identity=identity, environment=dict(env))
    try:
        payload = json.dumps(asdict(request), ensure_ascii=False).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(CONNECT_TIMEOUT)
            conn.connect(os.fsencode(path))
            conn.settimeout(REPLY_TIMEOUT)
            conn.sendall(payload + b"\n")
            conn.shutdown(socket.SHUT_WR)
            return decode_reply(json.loads(_read_all(conn)))
    except (OSError, UnicodeError, ValueError, KeyError, TypeError):
        # No daemon after all, or one that died, refused, or garbled its answer (one of
        # another version of kb, say): run it here.
        return None


def encode_reply(reply: Reply) -> dict[str, object]:
    if isinstance(reply, Failed):
        return {"error": reply.error}
    if isinstance(reply, Listed):
        return {
            "related_notes": reply.related_notes,
            "json": reply.as_json,
            "explain": reply.explain,
        }
    return {
        "hits": [asdict(hit) for hit in reply.found.hits],
        "mode_used": reply.found.mode_used,
        "warnings": list(reply.found.warnings),
        "json": reply.as_json,
        "explain": reply.explain,
    }


def decode_reply(answer: object) -> Reply:
    """A daemon's answer as the launcher checks it: anything but a reply, every field of the
    type it must have, is a ValueError (a refusal too: the launcher runs the command)."""
    if not isinstance(answer, dict) or "refused" in answer:
        raise ValueError("no reply")
    if "error" in answer:
        return Failed(_typed(answer["error"], str))
    if "related_notes" in answer:
        return Listed(
            _related(answer["related_notes"]),
            as_json=_typed(answer["json"], bool),
            explain=_typed(answer["explain"], bool),
        )
    hits = _typed(answer["hits"], list[dict[str, Any]])
    return Served(
        SearchResult(
            [_hit(hit) for hit in hits],
            _mode(answer["mode_used"]),
            tuple(_typed(answer["warnings"], list[str])),
        ),
        as_json=_typed(answer["json"], bool),
        explain=_typed(answer["explain"], bool),
    )


_HIT_TYPES = get_type_hints(SearchHit)


def _mode(value: object) -> SearchMode:
    for mode in SEARCH_MODES:
        if value == mode:
            return mode
    raise ValueError(f"{value!r:.40} is not a search mode")


def _hit(raw: dict[str, Any]) -> SearchHit:
    if set(raw) != {f.name for f in fields(SearchHit)}:
        raise ValueError("not a search hit")
    for name, value in raw.items():
        _typed(value, _HIT_TYPES[name])
    return SearchHit(**raw)


# What the launcher reads of `related_notes` to print it (kb.cli.related_view), by its type.
_RELATED: dict[str, Any] = {
    "vault": str,
    "path": str,
    "lines": list[int] | None,
    "related": list[dict[str, Any]],
}
_RELATED_HIT: dict[str, Any] = {"path": str, "score": float, "why": list[str]}
_LINKS = ("links_to", "linked_from", "unresolved")


def _related(raw: Any) -> dict[str, Any]:
    """`related_notes` if the launcher can print it as the command would, else a
    ValueError."""
    _typed(raw, dict[str, Any])
    for name, hint in _RELATED.items():
        _typed(raw[name], hint)
    for hit in raw["related"]:
        for name, hint in _RELATED_HIT.items():
            _typed(hit[name], hint)
        _typed(hit.get("lifts", {}), dict[str, float])
        if not all(_fits(v, float) for v in hit.get("lifts", {}).values()):
            raise ValueError("not a lift")
    for name in _LINKS:
        for row in _typed(raw[name], list[dict[str, Any]]):
            _typed(row["target"], str)
            _typed(row.get("path"), str | None)
    return dict(raw)


def _typed(value: Any, hint: Any) -> Any:
    """`value`, if it is of the JSON-able type `hint` (str, int, float, bool, None, unions
    and lists of them, dicts with str keys); else a ValueError."""
    if not _fits(value, hint):
        raise ValueError(f"{value!r:.40} is not a {hint}")
    return value


def _fits(value: Any, hint: Any) -> bool:
    origin, args = get_origin(hint), get_args(hint)
    if isinstance(hint, types.UnionType):
        return any(_fits(value, h) for h in args)
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if hint is type(None):
        return value is None
    if hint in (int, float) and isinstance(value, bool):
        return False
    return isinstance(value, (int, float) if hint is float else hint)


def _read_all(conn: socket.socket) -> bytes:
    parts = []
    while chunk := conn.recv(1 << 16):
        parts.append(chunk)
    return b"".join(parts)


def parse_request(data: bytes) -> Request:
    """A request as the daemon checks it: any field of the wrong type is a ValueError."""
    raw = json.loads(data)
    argv, identity, environment = raw["argv"], raw["identity"], raw["environment"]
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise ValueError("argv must be a list of strings")
    if not isinstance(identity, str):
        raise ValueError("identity must be a string")
    if not isinstance(environment, dict) or not all(
        isinstance(value, str) for value in environment.values()
    ):
        raise ValueError("environment must map names to strings")
    return Request(argv=tuple(argv), identity=identity, environment=environment)


def _peer_uid(conn: socket.socket) -> int | None:
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    identity: str
    read: tuple[tuple[str, str], ...]  # the daemon's Config.environment
    runners: dict[str, Runner]  # by command


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
        if request.identity != self.server.identity or any(
            request.environment.get(name, "") != value for name, value in self.server.read
        ):
            return {"refused": "another configuration"}
        line = query_line(request.argv)
        runner = self.server.runners.get(line.command) if line else None
        if line is None or runner is None:
            return {"refused": "not a query"}
        reply = runner(line.args)
        if reply is None:
            return {"refused": "the launcher runs this one itself"}
        if isinstance(reply, Failed):
            what = "an error"
        elif isinstance(reply, Listed):
            what = f"{len(reply.related_notes['related'])} related notes"
        else:
            what = f"{len(reply.found.hits)} hits"
        log.debug("answered a %s for a launcher (%s)", line.command, what)
        return encode_reply(reply)


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
def serving(
    identity: str,
    env: Mapping[str, str],
    runner: Runner,
    *,
    read: tuple[tuple[str, str], ...] = (),
    related: Runner | None = None,
) -> Iterator[Path | None]:
    """Answer `kb query` (`runner`), and `kb related` when given `related`, for this
    configuration (`read`: its Config.environment) while the block runs; yields the socket,
    or None when there is none to take (its folder is not private, or another live daemon of
    the same configuration answers already)."""
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
    server.identity, server.read = identity, read
    server.runners = {"query": runner} | ({"related": related} if related else {})
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
