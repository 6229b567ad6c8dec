"""Every prompt kb sends, its version, and the cleaning of what comes back.

PROMPT_VERSION is part of every cache key: change any wording here and bump
it, and the next run rewrites the context it affects (and nothing else).

Each chunk prompt starts with the same text for every chunk of a file (the
instructions, then the file summary), so servers that cache prompt prefixes
only evaluate the chunk itself.
"""

from __future__ import annotations

import re

from kb.llm.base import Prompt

PROMPT_VERSION = "2"

# A conservative characters-per-token ratio for English prose and Markdown.
_CHARS_PER_TOKEN = 3
_PROMPT_OVERHEAD_TOKENS = 64
_MIN_CTX = 2048

_FILE_SYSTEM = (
    "You write short summaries of notes for a search index. "
    "Given the beginning and the end of a note, write two or three plain sentences that say "
    "what the whole note is about: its subject, its purpose, and the main people, places, "
    "projects or tools it mentions. Write only the summary: no preamble, no lists, no Markdown."
)
_CHUNK_SYSTEM = (
    "You help a search index understand one part of a note. "
    "Given a summary of the whole note and one part of it, write one or two plain sentences "
    "that say what this part is about and how it fits in the note. "
    "Write only those sentences: no preamble, no lists, no Markdown."
)
_REWRITE_SYSTEM = (
    "You rewrite personal notes in the third person. The text was written by {owner} about "
    "themself. Replace every I, me, my, mine and myself (and we, us, our when they include "
    "the writer) with {owner} or {owner}'s, so that it is abundantly clear the text is about "
    "{owner}. Keep every fact, name, number, date, link and the Markdown formatting. "
    "Write only the rewritten text."
)
_OWNER_NOTE = (
    " The note is {owner}'s own, written in the first person: say plainly that it is about "
    "{owner}, and name {owner} instead of writing 'I', 'the author' or 'the writer'."
)


def file_summary_prompt(
    excerpts: list[str], *, owner: str | None, max_tokens: int, context_window: int
) -> Prompt:
    system = _FILE_SYSTEM + (_OWNER_NOTE.format(owner=owner) if owner else "")
    budget = _input_budget(system, max_tokens, context_window)
    excerpt = _fit("\n\n[…]\n\n".join(excerpts), budget)
    user = f"<note>\n{excerpt}\n</note>\n\nSummary of the whole note:"
    return _prompt(
        "file_summary",
        system,
        user,
        max_tokens,
        context_window,
        {"excerpt": excerpt, "owner": owner or ""},
    )


def chunk_summary_prompt(
    file_summary: str,
    header_path: str,
    content: str,
    *,
    owner: str | None,
    max_tokens: int,
    context_window: int,
) -> Prompt:
    system = _CHUNK_SYSTEM + (_OWNER_NOTE.format(owner=owner) if owner else "")
    budget = _input_budget(system + file_summary + header_path, max_tokens, context_window)
    content = _fit(content, budget)
    user = (
        f"<file_summary>\n{file_summary}\n</file_summary>\n\n"
        f"<chunk_headers>\n{header_path}\n</chunk_headers>\n\n"
        f"<chunk>\n{content}\n</chunk>\n\n"
        "What this part is about:"
    )
    return _prompt(
        "chunk_summary",
        system,
        user,
        max_tokens,
        context_window,
        {
            "file_summary": file_summary,
            "header_path": header_path,
            "content": content,
            "owner": owner or "",
        },
    )


def rewrite_prompt(content: str, *, owner: str, context_window: int) -> Prompt:
    system = _REWRITE_SYSTEM.format(owner=owner)
    # The rewrite is about as long as its input; leave it room to finish.
    max_tokens = min(len(content) // 2 + 64, context_window // 2)
    budget = _input_budget(system, max_tokens, context_window)
    content = _fit(content, budget)
    user = f"<text>\n{content}\n</text>\n\nThe same text in the third person:"
    return _prompt(
        "rewrite", system, user, max_tokens, context_window, {"content": content, "owner": owner}
    )


def _prompt(
    task: str,
    system: str,
    user: str,
    max_tokens: int,
    context_window: int,
    inputs: dict[str, str],
) -> Prompt:
    needed = (len(system) + len(user)) // _CHARS_PER_TOKEN + max_tokens + _PROMPT_OVERHEAD_TOKENS
    num_ctx = min(context_window, max(_MIN_CTX, -(-needed // 1024) * 1024))
    return Prompt(
        task=task, system=system, user=user, max_tokens=max_tokens, num_ctx=num_ctx, inputs=inputs
    )


def _input_budget(fixed_text: str, max_tokens: int, context_window: int) -> int:
    """Characters of variable input that still fit the window with the answer."""
    tokens = context_window - max_tokens - _PROMPT_OVERHEAD_TOKENS - 100
    return max(200, tokens * _CHARS_PER_TOKEN - len(fixed_text))


def _fit(text: str, budget: int) -> str:
    """Shorten text to `budget` characters, visibly, keeping its head and its tail."""
    if len(text) <= budget:
        return text
    half = (budget - 5) // 2
    return f"{text[:half]}\n[…]\n{text[-half:]}"


_CHATTER = re.compile(
    r"^\s*(?:(?:sure|certainly|of course|okay|ok)\b[^\n.:!]*[.:!]\s*)?"
    r"(?:here(?:'s| is| are)\b[^\n:]*:\s*)?"
    r"(?:(?:\*\*)?(?:summary|answer|rewritten text|the same text in the third person|"
    r"what this part is about)(?:\*\*)?\s*:(?:\*\*)?\s*)?",
    re.IGNORECASE,
)
_TAGS = re.compile(r"</?(?:note|chunk|chunk_headers|file_summary|text|chunk_summary)>")
_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n```$", re.DOTALL)


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
