"""Text from notes made safe to show on a terminal.

A note is data written by anyone (a saved web page, a synced file): printed raw, its
control characters would reach the terminal as commands (colours, cursor moves, OSC 52
writing the clipboard, a title change), and bidirectional overrides would make the text
read differently from what it is. Human output shows each such character as a visible
escape instead; `--json` output keeps the exact text.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, lone surrogates (an undecodable
# argument or file name), and the bidirectional embeddings, overrides and isolates.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every character that could act on a terminal shown as an escape."""
    return _UNSAFE.sub(_visible, text)
