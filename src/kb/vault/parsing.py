"""Turn a note's bytes into text, frontmatter metadata and a body.

Everything here is pure: it never touches the file system, so the rules for
broken input (a byte-order mark, NUL bytes, unclosed or invalid frontmatter)
can be tested directly.
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
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

# Bounds on the work one note's frontmatter may cost. Real frontmatter is a few lines; past
# these it is an accident or an attack (a YAML alias bomb of a few hundred bytes expands to
# billions of values, and 5,000 nested brackets exhaust the parser's recursion).
MAX_FRONTMATTER_CHARS = 64 * 1024
MAX_FRONTMATTER_DEPTH = 64
MAX_FRONTMATTER_VALUES = 10_000
MAX_METADATA_BYTES = 256 * 1024


class _TooDeep(Exception):
    pass


class _TooLarge(Exception):
    pass


class _FrontmatterLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing nesting deeper than MAX_FRONTMATTER_DEPTH."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        self._depth += 1
        try:
            if self._depth > MAX_FRONTMATTER_DEPTH:
                raise _TooDeep()
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _expanded_values(root: yaml.Node) -> int | None:
    """How many values the node graph holds once every alias is expanded (without expanding
    it), capped just past the limit; None if an alias refers to a node that contains it."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        if children_done:
            open_nodes.discard(id(node))
            total = 1 + sum(sizes[id(c)] for c in children)
            sizes[id(node)] = min(total, MAX_FRONTMATTER_VALUES + 1)
            continue
        if id(node) in open_nodes:
            return None
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def _load_frontmatter(text: str) -> Any:
    """The frontmatter's value; NoteError when it would cost unbounded work to load."""
    loader = _FrontmatterLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        values = _expanded_values(node)
        if values is None:
            raise NoteError("frontmatter refers to itself (a recursive YAML alias)")
        if values > MAX_FRONTMATTER_VALUES:
            raise NoteError(
                f"frontmatter expands to over {MAX_FRONTMATTER_VALUES} values "
                "(YAML aliases); not indexed"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


@dataclass(frozen=True)
class Note:
    """A decoded note: its body (frontmatter removed) and what the frontmatter said."""

    body: str
    body_start_line: int  # 1-based line of the file where `body` begins
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


# Byte-order marks and the encoding each announces (Windows editors save "Unicode" as UTF-16
# with one). UTF-32's come first: UTF-32 LE's begins with UTF-16 LE's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
)


def decode(data: bytes) -> str:
    """Decode a note's bytes (UTF-8, or what a byte-order mark announces), refusing what is
    not a text note."""
    bom, encoding, name = next(
        ((b, e, n) for b, e, n in _BOMS if data.startswith(b)), (b"", "utf-8", "UTF-8")
    )
    # Checked on the bytes where it can be: a binary file is named as one, not as bad UTF-8.
    if encoding == "utf-8" and b"\x00" in data:
        raise NoteError("contains NUL bytes (not a text note)")
    try:
        text = data[len(bom) :].decode(encoding)
    except UnicodeDecodeError as exc:
        raise NoteError(f"is not valid {name} (byte {len(bom) + exc.start})") from None
    if "\x00" in text:
        raise NoteError("contains NUL bytes (not a text note)")
    return one_newline(text)


def one_newline(text: str) -> str:
    """`text` with every line break as "\n" (Windows' "\r\n", old Macs' "\r"): what the
    parser, the chunker and every line span assume."""
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
    frontmatter = "\n".join(lines[1:close])
    try:
        if len(frontmatter) > MAX_FRONTMATTER_CHARS:
            raise _TooLarge()
        loaded = _load_frontmatter(frontmatter)
    except _TooLarge:
        loaded = None
        warnings = (f"frontmatter is over {MAX_FRONTMATTER_CHARS // 1024} KiB; indexed without it",)
    except _TooDeep:
        loaded = None
        warnings = (
            f"frontmatter is nested over {MAX_FRONTMATTER_DEPTH} levels deep; indexed without it",
        )
    except (yaml.YAMLError, ValueError, OverflowError) as exc:
        # ValueError, OverflowError: a well-formed value that is not one (`0000-00-00`).
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        loaded = None
        warnings = (f"frontmatter is not valid YAML{where}; indexed without it",)
    if loaded is not None and not isinstance(loaded, dict):
        warnings = ("frontmatter is not a mapping; indexed without it",)
        loaded = None
    metadata = _normalize_frontmatter(loaded or {})
    size = len(json.dumps(metadata, ensure_ascii=False))
    if size > MAX_METADATA_BYTES:
        raise NoteError(
            f"frontmatter holds {size // 1024} KiB of metadata, over the "
            f"{MAX_METADATA_BYTES // 1024} KiB limit; not indexed"
        )
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
