"""A note's links as data, and where each leads, as Obsidian reads them. Pure.

Extraction: every wikilink (`[[Note]]`, `[[Note|shown]]`, `[[Note#Heading]]`,
`[[Note#^block]]`, `[[folder/Note]]`), embed (`![[Note]]`) and Markdown link to a note
(`[text](Note.md)`, `[text](folder/Note%20name.md)`, `[text](<Note name.md>)`) of a note's
body, with its line and the chunk it sits in. Links in code (fenced blocks, inline code
spans) and in comments (`%%…%%`) are not links, as Obsidian does not follow them. A link to
an attachment (an image, a PDF, a canvas) or to a web address is no link between notes, and
a link to a heading of the same note (`[[#Heading]]`) neither.

Resolution (`resolve`), Obsidian's rules over the vault's indexed notes, case-insensitive
and in one Unicode form:

1. a path from the vault's root (`[[/folder/Note]]` only this way), or relative to the
   linking note's folder when it starts with `./` or `../` (only that way);
2. else the exact path from the root (`[[folder/Note]]`, `[text](folder/Note.md)`), then
   from the linking note's folder;
3. else a note whose path ends with the target (`[[Note]]`, `[[sub/Note]]`): the one in the
   linking note's folder, else the shortest path, else the first in path order;
4. else a note with that alias in its frontmatter (for a target that names no folder), the
   same tie rules.

Nothing else is matched: a link that finds no note is kept, unresolved.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from kb.names import composed
from kb.vault.wikitext import code_split

LinkKind = Literal["wikilink", "embed", "markdown"]

# A table cell escapes the pipe: `[[target\|shown]]`.
# Each begins with its bracket (an embed's "!" is read before it): a pattern that begins with
# a literal is searched for that literal first, several times faster over a note.
_WIKILINK = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
_SHOWN = re.compile(r"\\?\|")
# `[text](target)` or `[text](<target with spaces>)`, an optional title after the target.
_MARKDOWN_LINK = re.compile(
    r"\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*(?:<([^<>\n]+)>|([^()\s]+))(?:\s+\"[^\"\n]*\")?\s*\)"
)
# A code span may run over a line break, not over a blank line (a new paragraph).
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1)[^\n]|\n(?!\n))+?\1")
_COMMENT = re.compile(r"%%.*?%%", re.DOTALL)
_BLANK = re.compile(r"[^\n]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_NOTE_SUFFIXES = (".md", ".markdown")
# Files Obsidian opens that are not notes: a link to one is no link between notes.
_ATTACHMENT_SUFFIXES = frozenset(
    ".png .jpg .jpeg .gif .bmp .svg .webp .avif .ico .tif .tiff .heic "
    ".mp3 .wav .m4a .ogg .flac .3gp .webm .mp4 .ogv .mov .mkv .avi "
    ".pdf .canvas .base .json .csv .txt .zip .html .docx .xlsx .pptx".split()
)


@dataclass(frozen=True)
class Link:
    """One link of a note, as written: what it names, where it sits."""

    kind: LinkKind
    target: str  # the note it names, as written (a Markdown link's URL decoded): "folder/Note"
    anchor: str  # the heading ("Heading") or block ("^block") it points into; "" for none
    display: str  # the text shown for it; "" where Obsidian shows the target's name
    line: int  # 1-based, in the file
    chunk: int | None  # the position of the chunk holding that line; None outside every chunk

    @property
    def key(self) -> str:
        return link_key(self.target)


@dataclass(frozen=True)
class NoteName:
    """A note as links find it: its vault-relative path and its frontmatter aliases."""

    path: str
    aliases: tuple[str, ...] = ()


def fold(text: str) -> str:
    """A name as links compare it: one Unicode form, case left out."""
    return composed(text).casefold()


def _stem(path: str) -> str:
    """A note path or link target without its note suffix."""
    lower = path.lower()
    for suffix in _NOTE_SUFFIXES:
        if lower.endswith(suffix):
            return path[: -len(suffix)]
    return path


def link_key(target: str) -> str:
    """The name a link looks up: its target's last part, folded, with no note suffix."""
    return fold(_stem(posixpath.basename(target.strip())))


def note_keys(note: NoteName) -> set[str]:
    """The names links find a note by: its file name's and its aliases'."""
    return {link_key(note.path), *(fold(a.strip()) for a in note.aliases if a.strip())}


def extract(body: str, *, first_line: int = 1, spans: Sequence[tuple[int, int]] = ()) -> list[Link]:
    """The links between notes in `body` (which begins at line `first_line` of the file), in
    the order they are written; `spans` are the chunks' line spans (1-based, inclusive, in
    the order of their positions) that give each link its chunk."""
    if "[[" not in body and "](" not in body:
        return []
    prose = _prose_only(body)
    # Neither kind spans lines: matched over the whole text, each line counted once.
    found = sorted(
        [(m.start(), m, _wikilink) for m in _WIKILINK.finditer(prose)]
        + [(m.start(), m, _markdown_link) for m in _MARKDOWN_LINK.finditer(prose)],
        key=lambda item: item[0],
    )
    links: list[Link] = []
    line, counted = first_line, 0
    for start, match, read in found:
        line += prose.count("\n", counted, start)
        counted = start
        link = read(match, line, _chunk_of(line, spans))
        if link is not None:
            links.append(link)
    return links


def _prose_only(body: str) -> str:
    """`body` with code and comments blanked out, every line where it was (each pass only
    where its mark is in the text: most notes have no code)."""
    text = body
    if "```" in text or "~~~" in text:
        text = "".join(_BLANK.sub(" ", part) if code else part for part, code in code_split(text))
    if "%%" in text:
        text = _COMMENT.sub(_blank, text)
    if "`" in text:
        text = _INLINE_CODE.sub(_blank, text)
    return text


def _blank(match: re.Match[str]) -> str:
    return _BLANK.sub(" ", match.group(0))


def _wikilink(match: re.Match[str], line: int, chunk: int | None) -> Link | None:
    embed, inner = _embeds(match), match.group(1)
    target, *shown = _SHOWN.split(inner, maxsplit=1)
    path, _, anchor = target.partition("#")
    path = path.strip()
    if not _names_a_note(path):
        return None
    return Link(
        kind="embed" if embed else "wikilink",
        target=path,
        anchor=anchor.strip(),
        display=shown[0].strip() if shown else "",
        line=line,
        chunk=chunk,
    )


def _markdown_link(match: re.Match[str], line: int, chunk: int | None) -> Link | None:
    embed, text = _embeds(match), match.group(1)
    url = match.group(2) or match.group(3)
    if _SCHEME.match(url):
        return None  # a web address, mailto:, obsidian://: no note of this vault
    path, _, anchor = url.partition("#")
    path = unquote(path).strip()
    if not _names_a_note(path):
        return None
    return Link(
        kind="embed" if embed else "markdown",
        target=path,
        anchor=unquote(anchor).strip(),
        display=text.strip(),
        line=line,
        chunk=chunk,
    )


def _embeds(match: re.Match[str]) -> bool:
    return match.start() > 0 and match.string[match.start() - 1] == "!"


def _names_a_note(path: str) -> bool:
    if not path:
        return False  # `[[#Heading]]`: a place in the same note
    suffix = posixpath.splitext(path)[1].lower()
    return suffix not in _ATTACHMENT_SUFFIXES


def _chunk_of(line: int, spans: Sequence[tuple[int, int]]) -> int | None:
    return next((i for i, (start, end) in enumerate(spans) if start <= line <= end), None)


def resolve(target: str, source: str, notes: Iterable[NoteName]) -> str | None:
    """The path of the note a link from note `source` to `target` leads to, among `notes`
    (the vault's notes, or just those whose names or aliases match the target's key), or
    None. The rules are the module's."""
    wanted = target.strip().replace("\\", "/")
    folder = posixpath.dirname(source)
    by_stem: dict[str, list[NoteName]] = {}
    candidates = list(notes)
    for note in candidates:
        by_stem.setdefault(fold(_stem(note.path)), []).append(note)

    def exact(path: str) -> str | None:
        found = by_stem.get(fold(_stem(path)))
        return min(found, key=lambda n: n.path).path if found else None

    if wanted.startswith("/"):
        return exact(wanted.lstrip("/"))
    if wanted.startswith(("./", "../")):
        joined = posixpath.normpath(posixpath.join(folder, wanted))
        return None if joined.startswith("../") or joined == ".." else exact(joined)
    found = exact(wanted) or (exact(posixpath.join(folder, wanted)) if folder else None)
    if found:
        return found
    tail = "/" + fold(_stem(wanted))
    ending = [n for n in candidates if ("/" + fold(_stem(n.path))).endswith(tail)]
    if ending:
        return _nearest(ending, folder)
    if "/" in wanted:
        return None
    name = fold(_stem(wanted))
    named = [n for n in candidates if any(fold(a.strip()) == name for a in n.aliases)]
    return _nearest(named, folder) if named else None


def _nearest(notes: Sequence[NoteName], folder: str) -> str:
    """Of several notes a link may lead to: the one in the linking note's folder, else the
    shortest path, else the first in path order."""
    return min(notes, key=lambda n: (posixpath.dirname(n.path) != folder, len(n.path), n.path)).path
