"""Obsidian's syntax as a person reads it, for what is embedded and searched as text: a link
is its shown text (`[[target|shown]]`) or its target's name (`[[Folder/Target]]`), an
embedded image is nothing, and block ids (`^id`) and comments (`%%…%%`) are left out.

The raw content a search returns stays byte for byte; only the searched texts are read
this way. Code is left as it is: a `[[` in a code block is code. Pure functions.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

# A table cell escapes the pipe: `[[target\|shown]]`.
_LINK = re.compile(r"(!?)\[\[([^\]\n]+?)\]\]")
_SHOWN = re.compile(r"\\?\|")
_COMMENT = re.compile(r"%%.*?%%", re.DOTALL)
_BLOCK_ID = re.compile(r"[ \t]+\^[A-Za-z0-9-]+[ \t]*$", re.MULTILINE)
_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)
_NOTE_SUFFIXES = ("", ".md", ".markdown")


def readable(text: str) -> str:
    """`text` with links, comments and block ids as a reader sees them, code untouched."""
    if "[[" not in text and "%%" not in text and "^" not in text:
        return text
    parts = code_split(text)
    return "".join(part if code else _prose(part) for part, code in parts)


def _prose(text: str) -> str:
    text = _COMMENT.sub("", text)
    text = _BLOCK_ID.sub("", text)
    return _LINK.sub(_link_text, text)


def _link_text(match: re.Match[str]) -> str:
    embed, inner = match.group(1), match.group(2)
    target, *shown = _SHOWN.split(inner, maxsplit=1)
    path, _, anchor = target.partition("#")
    name = PurePosixPath(path.strip()).name
    suffix = PurePosixPath(name).suffix.lower()
    if embed and suffix not in _NOTE_SUFFIXES:
        return ""  # an image or a file: its size or caption ("|100") is not prose
    if shown and not embed:
        return shown[0].strip()
    name = name[: -len(suffix)] if suffix in _NOTE_SUFFIXES[1:] else name
    heading = anchor.strip() if anchor and not anchor.startswith("^") else ""
    return " ".join(part for part in (name, heading) if part)


def code_split(text: str) -> list[tuple[str, bool]]:
    """`text` cut into runs of prose and of fenced code (True), in order; an unclosed
    fence runs to the end, as Markdown reads it."""
    parts: list[tuple[str, bool]] = []
    at = 0
    while (opening := _FENCE.search(text, at)) is not None:
        fence = opening.group(1)
        closing = re.compile(rf"^[ \t]*{re.escape(fence)}[`~]*[ \t]*$", re.MULTILINE)
        line_end = text.find("\n", opening.end())
        close = closing.search(text, line_end + 1) if line_end >= 0 else None
        end = close.end() if close else len(text)
        parts.append((text[at : opening.start()], False))
        parts.append((text[opening.start() : end], True))
        at = end
    parts.append((text[at:], False))
    return parts
