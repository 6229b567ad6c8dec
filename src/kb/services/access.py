"""Who may reach kb over HTTP (`kb mcp --http`, `kb serve`): the same rules for both.

On a loopback address only this machine's users can connect; anywhere else a token is
required, compared in constant time. A request's Host header must name the server exactly:
a DNS-rebinding name (`localhost:8765.evil.com` as much as `evil.com`) gets nothing.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass

from kb.errors import KbError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_WILDCARDS = ("0.0.0.0", "::", "")


@dataclass(frozen=True)
class Access:
    """What a server allows: the Host names it answers to (None: any, which only a token may
    make safe), the port a Host header must name (None: any), and the token every request
    must carry."""

    hosts: frozenset[str] | None
    token: str | None
    port: int | None = None


def access(
    host: str, token: str | None, allow_hosts: Iterable[str] = (), port: int | None = None
) -> Access:
    """The access rules of a server listening on `host` (and `port`, when it is known)."""
    names = {*LOOPBACK, *(h.lower() for h in allow_hosts)}
    if host in _WILDCARDS:
        # Listening everywhere, the names it is reached by are unknown: the token is what
        # keeps a rebinding page out (its cookie belongs to the real name only).
        return Access(None if token and not allow_hosts else frozenset(names), token, port)
    return Access(frozenset({*names, host.lower()}), token, port)


def serving_token(token: str | None) -> str | None:
    """The token to require: an HTTP header cannot carry surrounding blanks, and a blank token
    is no token."""
    token = token.strip() if token else None
    return token or None


def check_exposure(host: str, token: str | None, variable: str) -> None:
    """A KbError when `host` is reachable from other machines and no token guards it."""
    if host not in LOOPBACK and not token:
        raise KbError(
            f"refusing to serve {host} without a token: set {variable}, or listen on 127.0.0.1"
        )


def token_matches(given: bytes, expected: bytes) -> bool:
    # Constant time: how much of a guess matched must not show in the response time.
    return hmac.compare_digest(given, expected)


# A Host header as browsers send it (RFC 9110 §7.2): a name or a bracketed IPv6 address, then
# an optional port of digits. No list, no space: "localhost:1, evil.com" is no browser's.
_HOST = re.compile(
    r"(?:\[(?P<ip6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9._~-]*))(?::(?P<port>[0-9]{0,5}))?"
)


def host_refusal(host: str, rules: Access) -> tuple[int, str] | None:
    """Why a request with this Host header is refused (status and one line), or None: its
    name must be one the server answers to, and its port, when the rules hold one, that
    port exactly."""
    parts = _host_parts(host)
    if parts is None:
        return 400, "the Host header is not a name and a port"
    name, port = parts
    if rules.hosts is not None and name not in rules.hosts:
        return 403, f"this server does not answer to the name {name!r}"
    if rules.port is not None and port != rules.port:
        return 403, f"this server does not answer on port {port}"
    return None


def _host_parts(host: str) -> tuple[str, int] | None:
    """A Host header's name and port (HTTP's 80 when it names none), or None."""
    found = _HOST.fullmatch(host.strip().lower())
    if found is None:
        return None
    return found["ip6"] or found["name"] or "", int(found["port"] or 80)
