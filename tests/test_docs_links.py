"""The documentation holds together: every relative link leads somewhere, and the README stays
short enough to read in five minutes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_BYTES = 12 * 1024

# [text](target) and [text](target "title"), not images' sources alone; <...> autolinks and
# bare URLs are not relative links.
_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, where a link or a heading means one."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces
    turned into hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in _prose(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    """The relative link targets of a document; a link's text may run over a line break."""
    # Inline code may show link syntax without being a link.
    prose = re.sub(r"`[^`]*`", "", "\n".join(_prose(path.read_text(encoding="utf-8"))))
    return [t for t in _LINK.findall(prose) if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I)]


def test_slug_follows_github() -> None:
    assert slug("Two speeds: searchable now, LLM context later") == (
        "two-speeds-searchable-now-llm-context-later"
    )
    assert slug("Answers (`kb ask`)") == "answers-kb-ask"
    assert slug("Hostile input, faults and security") == "hostile-input-faults-and-security"
    assert slug("`bench/writes.py`: indexing speed and memory") == (
        "benchwritespy-indexing-speed-and-memory"
    )


def test_the_readme_is_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; at most {README_MAX_BYTES}"


@pytest.mark.parametrize("document", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    assert document.is_file(), f"{document.relative_to(ROOT)} is missing"
    broken = []
    for target in links(document):
        file, _, anchor = target.partition("#")
        destination = (document.parent / file).resolve() if file else document
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.name}")
        elif anchor and destination.suffix != ".md":
            broken.append(f"{target}: an anchor into a file that is not Markdown")
    assert not broken, f"{document.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_docs_are_linked_from_the_readme() -> None:
    readme = {Path(t.partition("#")[0]) for t in links(ROOT / "README.md")}
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert page.relative_to(ROOT) in readme, f"the README does not link {page.name}"
