"""Structured log lines for `kb daemon`: one event per line, as logfmt key=value pairs.

    ts=2024-05-06T09:12:03.120Z level=info src=kb.daemon msg=indexed vault=notes path="a b.md"

journald, `docker compose logs` and grep read them as they are; log tools parse them.
Fields go in `extra={"fields": {...}}`; see `event()`.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from kb.redact import redact
from kb.terminal import printable


def event(logger: logging.Logger, msg: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log one event with its fields."""
    logger.log(level, msg, extra={"fields": fields})


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        at = dt.datetime.fromtimestamp(record.created, dt.UTC)
        fields: dict[str, Any] = {
            "ts": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "src": record.name,
            "msg": record.getMessage(),
        }
        fields.update(getattr(record, "fields", {}))
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            fields["error"] = f"{type(exc).__name__}: {exc}"
        # A log line may quote a database URL or a model server's error: no secret in it.
        return redact(" ".join(f"{key}={_value(value)}" for key, value in fields.items()))


def _value(value: Any) -> str:
    if isinstance(value, float):
        value = f"{value:.3f}".rstrip("0").rstrip(".")
    text = "" if value is None else str(value)
    # A note's path or an error may hold terminal control characters: shown as escapes.
    text = printable(text.replace("\n", " ").replace("\r", " "))
    if text and not any(c in text for c in ' "=\\') and text.isprintable():
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
