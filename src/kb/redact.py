"""Credentials removed from anything kb prints or logs.

A database URL or DSN may carry a password (`postgresql://kb:secret@host/db`,
`?password=secret`, `host=db password=secret`), and errors from the database client
or a model server may quote them. Every line kb shows passes through `redact`.
"""

from __future__ import annotations

import re

HIDDEN = "***"

# The key names that hold a secret, in a URL query or a key=value DSN.
_SECRET_KEYS = r"(?:password|passwd|pwd|sslpassword|api[_-]?key|apikey|token|secret)"
# scheme://user:password@host: the password runs to the last "@" before the path.
_URL_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#@\s:]*:)[^\s/?#]*(?=@)")
# ?password=…, &password=… in a URL.
_URL_PARAM = re.compile(rf"(?P<head>[?&]{_SECRET_KEYS}=)[^&#\s]*", re.IGNORECASE)
# password=… or password = '…' in a libpq key=value DSN (quoted values may hold spaces).
_DSN_PAIR = re.compile(
    rf"(?P<head>(?<![\w?&]){_SECRET_KEYS}\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s'&]+)",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """`text` with every password, key or token in a URL or DSN replaced by ***."""
    text = _URL_USERINFO.sub(lambda m: m.group("head") + HIDDEN, text)
    text = _URL_PARAM.sub(lambda m: m.group("head") + HIDDEN, text)
    return _DSN_PAIR.sub(lambda m: m.group("head") + HIDDEN, text)
