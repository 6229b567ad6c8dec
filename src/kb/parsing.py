"""Turn a note's bytes into text, frontmatter metadata and a body.

Everything here is pure: it never touches the file system, so the rules for
broken input (a byte-order mark, NUL bytes, unclosed or invalid frontmatter)
can be tested directly.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from kb.errors import NoteError

_FENCE_OPEN = re.compile(r"^---[ \t]*$")
_FENCE_CLOSE = re.compile(r"^(---|\.\.\.)[ \t]*$")
# Obsidian tags: `#` then at least one non-digit among letters, digits, `_`, `-`, `/`.
_TAG = re.compile(r"(?<![\w#/&(])#([\w/-]*[^\W\d][\w/-]*)", re.UNICODE)
_WIKILINK = re.compile(r"!?\[\[([^\]|#^]+)(?:[#^][^\]|]*)?(?:\|[^\]]*)?\]\]")


@dataclass(frozen=True)
class Note:
    """A decoded note: its body (frontmatter removed) and what the frontmatter said."""

    body: str
    body_start_line: int  # 1-based line of the file where `body` begins
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def decode(data: bytes) -> str:
    """Decode a note's bytes, refusing what is not a text note."""
    if b"\x00" in data:
        raise NoteError("contains NUL bytes (not a text note)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NoteError(f"is not valid UTF-8 (byte {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_note(text: str) -> Note:
    """Split frontmatter from the body; a broken frontmatter never loses the body."""
    lines = text.split("\n")
    if not lines or not _FENCE_OPEN.match(lines[0]):
        return Note(body=text, body_start_line=1, metadata=_body_metadata(text, {}))
    close = next((i for i in range(1, len(lines)) if _FENCE_CLOSE.match(lines[i])), None)
    if close is None:
        # An unclosed fence is more likely a horizontal rule than frontmatter: keep it all.
        return Note(
            body=text,
            body_start_line=1,
            metadata=_body_metadata(text, {}),
            warnings=("frontmatter is not closed; indexed as body text",),
        )
    body = "\n".join(lines[close + 1 :])
    warnings: tuple[str, ...] = ()
    try:
        loaded = yaml.safe_load("\n".join(lines[1:close]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        loaded = None
        warnings = (f"frontmatter is not valid YAML{where}; indexed without it",)
    if loaded is not None and not isinstance(loaded, dict):
        warnings = ("frontmatter is not a mapping; indexed without it",)
        loaded = None
    metadata = _normalize_frontmatter(loaded or {})
    return Note(
        body=body,
        body_start_line=close + 2,
        metadata=_body_metadata(body, metadata),
        warnings=warnings,
    )


def _normalize_frontmatter(raw: dict[Any, Any]) -> dict[str, Any]:
    """Make frontmatter JSON-safe and give tags and aliases one shape: a list of strings."""
    meta: dict[str, Any] = {str(k): _jsonable(v) for k, v in raw.items()}
    for key, singular in (("tags", "tag"), ("aliases", "alias")):
        value = meta.pop(key, None)
        if value is None:
            value = meta.pop(singular, None)
        # A tag has no spaces, so "a b, c" is three tags; an alias may have spaces.
        meta[key] = _string_list(value, r"[,\s]+" if key == "tags" else r",")
    meta["tags"] = [t.lstrip("#") for t in meta["tags"] if t.lstrip("#")]
    return meta


def _string_list(value: Any, separators: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in re.split(separators, value) if part.strip()]
    if isinstance(value, list):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    return [str(value)]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _body_metadata(body: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """Add inline `#tags` and `[[wikilinks]]` found in the body (outside code)."""
    prose = strip_code(body)
    tags = list(metadata.get("tags", []))
    for tag in _TAG.findall(prose):
        if tag not in tags:
            tags.append(tag)
    links: list[str] = []
    for target in _WIKILINK.findall(prose):
        target = target.strip()
        if target and target not in links:
            links.append(target)
    out = dict(metadata)
    out["tags"] = tags
    out.setdefault("aliases", [])
    out["links"] = links
    return out


_FENCED = re.compile(r"^([ \t]*)(`{3,}|~{3,}).*?^\1\2[`~]*[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def strip_code(text: str) -> str:
    """Text with fenced blocks and inline code spans removed, for tag and link scanning."""
    return _INLINE_CODE.sub(" ", _FENCED.sub(" ", text))
