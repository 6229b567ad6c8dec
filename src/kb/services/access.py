"""Who may reach kb over HTTP (`kb mcp --http`, `kb serve`): the same rules for both.

On a loopback address only this machine's users can connect; anywhere else a token is
required, compared in constant time.
"""

from __future__ import annotations

import hmac

from kb.errors import KbError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


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
