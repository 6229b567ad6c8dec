"""What comes back from the chat model: cleaning, failure detection, honest fallbacks.

Small local models fail in a few typical ways: they echo the input (or the worked
example), refuse, answer with nothing, or repeat themselves until the token cap. Each
output is cleaned, then checked; a failed output is replaced by structural context
(the note's title and the chunk's header path) that is true, if plain, and the caller
records that it fell back so a later run with a better model redoes only those.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kb.models.base import Prompt

_CHATTER = re.compile(
    r"^\s*(?:(?:sure|certainly|of course|okay|ok)\b[^\n.:!]*[.:!]\s*)?"
    r"(?:here(?:'s| is| are)\b[^\n:]*:\s*)?"
    r"(?:(?:\*\*)?(?:summary|answer|rewritten text|the same text in the third person|"
    r"summary of the whole note|what this part is about)(?:\*\*)?\s*:(?:\*\*)?\s*)?",
    re.IGNORECASE,
)
_TAGS = re.compile(
    r"</?(?:note|chunk|chunk_headers|file_summary|text|chunk_summary|part)(?: \d+)?>"
)
_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n```$", re.DOTALL)
_REFUSAL = re.compile(
    r"^(?:i'?m sorry|i am sorry|sorry\b|i apologi[sz]e|i cannot|i can'?t|i'?m unable|"
    r"i am unable|as an ai\b|unfortunately\b)|\bplease provide\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")
_FIRST_PERSON = re.compile(r"\b(?:I'm|I've|I'd|I'll|I|me|my|mine|myself)\b")
# The writer speaking of themself alone, in any case but "I" (a lone lowercase "i" is
# mostly "i.e." or a list marker). "We", "us" and "our" alone do not call for a rewrite:
# documentation says "we recommend", and a journal's "we" already names the others.
_SELF_REFERENCE = re.compile(r"\b(?:I|(?i:me|my|mine|myself))\b|\b(?i:i)(?:'m|'ve|'d|'ll)\b")
# Spans where a first-person word is not the writer speaking: quotes, code, links.
_NOT_NARRATION = re.compile(r"`[^`\n]*`|```.*?```|\"[^\"\n]*\"|“[^”\n]*”|\[\[[^\]]*\]\]", re.S)
# Numbers, wikilink targets (an alias may be rewritten) and Markdown link URLs.
_FACT = re.compile(r"\d+|(?<=\[\[)[^\]|#]+|(?<=\]\()[^)]+")
_CHECKBOX = re.compile(r"^\s*[-*+] \[(.)\]", re.M)
_RUN = re.compile(r"(\S.{0,19}?)\1{5,}", re.S)

MIN_SUMMARY_CHARS = 12


@dataclass(frozen=True)
class Output:
    """One stored model output; `fallback` when it is structural context in place of a
    rejected answer."""

    text: str
    fallback: bool = False


def clean_summary(text: str, *, max_chars: int) -> str:
    """One paragraph of prose: no chatter, no tags, bounded, cut at a sentence end."""
    text = _TAGS.sub(" ", _CHATTER.sub("", text.strip(), count=1))
    text = " ".join(text.split()).strip(" \"'")
    if len(text) > max_chars:
        cut = text[:max_chars]
        end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
        text = cut[: end + 1] if end > max_chars // 3 else cut[:-1].rsplit(" ", 1)[0] + "…"
    return text


def clean_rewrite(text: str) -> str:
    """The rewritten chunk: no chatter, no wrapping fence or tags, Markdown kept."""
    text = _CHATTER.sub("", text.strip(), count=1).strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    return _TAGS.sub("", text).strip()


def summary_problem(
    text: str,
    prompt: Prompt,
    *,
    source: str | None = None,
    file_summary: str | None = None,
    others: Iterable[str] = (),
) -> str | None:
    """Why a cleaned summary is unusable ("empty", "refusal", ...), or None if it is fine.

    `source` is the text summarised when the prompt holds more than that (one part of
    several), `file_summary` the note's summary when the same answer wrote it, and `others`
    the summaries of the other parts it wrote.
    """
    if len(text) < MIN_SUMMARY_CHARS or not re.search(r"[^\W\d_]{3}", text):
        return "empty"
    if _REFUSAL.search(text):
        return "refusal"
    if _repetitive(text):
        return "repetition"
    if text in others:
        return "same as another part"
    source = source or prompt.inputs.get("content") or prompt.inputs.get("excerpt") or prompt.user
    if _copied(text, [source]) or _squeezed(text).lower() in _squeezed(source).lower():
        return "echo of the note"
    if _copied(text, [file_summary or prompt.inputs.get("file_summary", "")]):
        return "echo of the file summary"
    if _copied(text, [prompt.system, *(answer for _, answer in prompt.examples)], share=0.5):
        return "echo of the instructions"
    return None


def rewrite_problem(text: str, source: str, owner: str) -> str | None:
    """Why a cleaned third-person rewrite is unusable, or None if it is fine."""
    if not text.strip():
        return "empty"
    if _REFUSAL.search(text) and not _REFUSAL.search(source):
        return "refusal"
    if not 0.6 <= len(text) / max(1, len(source)) <= 2.5:
        return "length changed"
    if _repetitive(text) and not _repetitive(source):
        return "repetition"
    if first_person_words(text):
        return "first person left"
    if first_person_words(source) and owner.split()[0].lower() not in text.lower():
        return "owner not named"
    if not all(fact in text for fact in _FACT.findall(source)):
        return "facts lost"
    if _CHECKBOX.findall(text) != _CHECKBOX.findall(source):
        return "facts changed"
    return None


def needs_rewrite(text: str) -> bool:
    """Whether the writer speaks of themself in the first person singular ("I", "my"), outside
    quotes, code and links; other chunks are kept as they are."""
    return bool(_SELF_REFERENCE.search(_NOT_NARRATION.sub(" ", text)))


# One line of a several-part answer: "Part 2: …", "**Part 2:**", "2. …", "[2] …".
_PART_LINE = re.compile(
    r"^\W*(?:part\s*(\d{1,3})\b[\s\]).:*\-\u2013\u2014]*"  # "Part 2", then any separator
    r"|(\d{1,3})\s*(?:[\]).:*\-\u2013\u2014]\s*)+)"  # or a bare number with one
    r"(.*)$",
    re.IGNORECASE,
)
_NOTE_LINE = re.compile(r"^\W*(?:the\s+)?(?:whole\s+)?(?:note|summary)\b[^:\n]{0,30}:\**\s*", re.I)


def split_parts(text: str, count: int) -> tuple[str, dict[int, str]]:
    """A several-part answer as (the note's summary, {part number: its summary}), raw.

    Read line by line and forgivingly: a line that starts with a part number (1 to `count`)
    opens that part, any other line continues the one before; what comes before the first
    part is the note's summary, from its "Note:" label on if it has one. A part written
    twice keeps its first line; a part not written is missing from the result.
    """
    note: list[str] = []
    parts: dict[int, list[str]] = {}
    current = note
    for line in text.strip().splitlines():
        if not line.strip():
            continue
        match = _PART_LINE.match(line)
        number = int(match.group(1) or match.group(2)) if match else 0
        if match and 1 <= number <= count:
            # A part written again is read into a list that is then dropped.
            current = [] if number in parts else parts.setdefault(number, [])
            current.append(match.group(3))
        elif current is note and (label := _NOTE_LINE.match(line)):
            # "Note:" starts the note's summary: whatever came before it was preamble.
            note[:] = [line[label.end() :]]
        else:
            current.append(line)
    return " ".join(note).strip(), {n: " ".join(p).strip() for n, p in parts.items()}


def first_person_words(text: str) -> list[str]:
    """The writer's first-person words, outside quotes, code and links."""
    return _FIRST_PERSON.findall(_NOT_NARRATION.sub(" ", text))


def structural_file_summary(
    title: str,
    folder: str,
    sections: Iterable[str],
    owner: str | None,
    aliases: Sequence[str] = (),
) -> str:
    """What can be said of a note without a model: its title (and the other names its
    `aliases` give it, searched as the title is), folder and sections."""
    names = ", ".join(f'"{a}"' for a in aliases)
    also = f" (also {names})" if aliases else ""
    text = f'Note "{title}"{also}' + (f" in {folder}" if folder else "") + "."
    shown = list(dict.fromkeys(sections))[:8]
    if shown:
        text += " Sections: " + ", ".join(shown) + "."
    if owner:
        text += f" Written by {owner} in the first person."
    return text


def structural_chunk_summary(title: str, header_path: str) -> str:
    where = f', section "{header_path}"' if header_path else ""
    return f'Part of the note "{title}"{where}.'


def owned_text(content: str, owner: str) -> str:
    """A personal chunk whose rewrite failed: the original, attributed to its writer."""
    return f"{owner} wrote (in the first person):\n{content}"


def _squeezed(text: str) -> str:
    return " ".join(text.split())


def _shingles(text: str, n: int = 4) -> set[tuple[str, ...]]:
    words = [w.lower() for w in _WORD.findall(text)]
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _copied(text: str, sources: Iterable[str], *, share: float = 0.6) -> bool:
    """Most of the output's 4-word runs appear verbatim in one of the sources."""
    mine = _shingles(text)
    if len(mine) < 5:
        return False
    return any(len(mine & _shingles(source)) >= share * len(mine) for source in sources)


def _repetitive(text: str) -> bool:
    """A runaway loop: a short unit over and over, or few distinct 3-word runs."""
    if _RUN.search(text):
        return True
    words = [w.lower() for w in _WORD.findall(text)]
    if len(words) < 24:
        return False
    trigrams = [tuple(words[i : i + 3]) for i in range(len(words) - 2)]
    return len(set(trigrams)) < 0.6 * len(trigrams)


_RELEVANCE = re.compile(r"^\W*(\d{1,2})(?:\s*/\s*10)?\b")


def parse_relevance(text: str) -> int | None:
    """A re-ranking answer as a score from 0 to 10, or None when it is not one."""
    match = _RELEVANCE.match(text.strip())
    if match is None:
        return None
    score = int(match.group(1))
    return score if score <= 10 else None
