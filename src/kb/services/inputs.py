"""What a request's text may hold, checked where it enters kb (an MCP tool's arguments, the
web page's query string, the note reader every face shares), and the one line that says what
is wrong with it.

Anyone can send anything: a NUL character (PostgreSQL text cannot hold one), a lone
surrogate, a path longer than the system allows, an offset past PostgreSQL's bigint, a
"number" of digits `int()` does not read ("²").
"""

from __future__ import annotations

import os

# What this system takes: 4,096 and 255 bytes on Linux, 1,024 and 255 on macOS.
PATH_BYTES = os.pathconf("/", "PC_PATH_MAX")
NAME_BYTES = os.pathconf("/", "PC_NAME_MAX")
# Past any vault's number of notes, and far inside PostgreSQL's bigint.
MAX_OFFSET = 1_000_000_000


def plain_text(text: str) -> str:
    """`text`, if it holds no NUL character and is valid Unicode; else a ValueError saying so."""
    if "\x00" in text:
        raise ValueError("contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # JSON can escape half of a UTF-16 pair ("\ud800"); no database or file name takes it.
        raise ValueError("contains a lone surrogate, which is not valid Unicode") from None
    return text


def path_text(text: str) -> str:
    """`text`, if it could name a file: no NUL, not longer than a path or a name may be."""
    size = len(plain_text(text).encode("utf-8"))
    if size > PATH_BYTES:
        raise ValueError(f"is {size} bytes long; at most {PATH_BYTES}")
    for name in text.replace("\\", "/").split("/"):
        size = len(name.encode("utf-8"))
        if size > NAME_BYTES:
            raise ValueError(
                f"the name {name[:20]!r}… is {size} bytes long; a name is at most "
                f"{NAME_BYTES} bytes"
            )
    return text


def whole_number(text: str, low: int, high: int) -> int:
    """`text` as a whole number from `low` to `high`, written in ASCII digits alone; else a
    ValueError.

    `str.isdigit()` is true of "²", which `int()` refuses, and `int()` reads "٣", " 3", "+3"
    and "1_0": a number in a request is plain digits, or it is not one.
    """
    # Past any bound kb sets, and short enough that reading it costs nothing.
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise ValueError(f"{text[:20]!r} is not a number from {low} to {high}")
    number = int(text)
    if not low <= number <= high:
        raise ValueError(f"{text[:20]!r} is not a number from {low} to {high}")
    return number
