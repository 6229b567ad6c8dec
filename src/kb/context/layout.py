"""What a chunk is searched by, laid out from its parts: the texts full-text search reads
and the embedder reads. Pure functions."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kb.models import tokens
from kb.vault.chunking import Chunk
from kb.vault.wikitext import readable

# Bump when full_context's layout changes: every note's context is then rebuilt from cached
# model answers (see ContextBuild.id).
# 5: notes are stored with their own dates.
# 6: links, comments and block ids are read as a person reads them (kb.vault.wikitext); notes
#    are dated by kb.dates.
# 7: full-text search reads a chunk's statements (with_lines; its questions too, which
#    only notes built with questions have).
LAYOUT_VERSION = "7"


def header_line(header_path: Sequence[str]) -> str:
    return " > ".join(header_path)


def full_context(file_summary: str, chunk_summary: str, header_path: str, content: str) -> str:
    """What is searched as text, and embedded as far as it fits: the chunk first, then what
    places it.

    Plain text, in this order, because a small embedder averages over every token it reads
    and reads only the first few hundred: markup tags would be averaged in, and a long chunk
    behind a paragraph of summaries would lose its end. Empty parts are left out. The chunk
    is read as a person reads it: `[[target|shown]]` is its shown text.
    """
    parts = (header_path, readable(content), chunk_summary, file_summary)
    return "\n\n".join(part for part in parts if part)


def summaries_start(header_path: str, content: str) -> int:
    """Where the summaries begin in a full_context of this header path and chunk.

    Full-text search counts the words after it for less than the chunk's own (migration
    013): a summary says, in a few common words, what every chunk of its note is about, and
    at full weight those words outranked the one chunk whose own words answer the question.
    """
    return len(full_context("", "", header_path, content))


def fit(context: str, window: int) -> str:
    """`context` as the embedder reads it: whole if its estimate is within `window` tokens,
    else cut there, so what is stored as embedded is what the model saw. Parts are
    joined in order of importance, so a cut drops the file summary first."""
    return context if tokens.estimate(context) <= window else tokens.cut(context, window)


@dataclass(frozen=True)
class Texts:
    """The texts a chunk is searched by."""

    full_context: str  # everything: what full-text search reads
    # Where the summaries begin in full_context, in characters, when full-text search is to
    # weigh them less than the chunk's own words (see summaries_start); None: it weighs all.
    summaries_at: int | None
    embed_text: str  # what the embedder reads: full_context fitted to its window


def texts(
    file_summary: str,
    chunk_summary: str,
    header_path: str,
    content: str,
    *,
    weigh_summaries: bool,
    window: int,
) -> Texts:
    """The texts a chunk is searched by. With LLM context (`weigh_summaries`), its summaries
    count for less in full-text search, whoever wrote them: the model, or the structural
    stand-ins of a note still waiting for it. The structure level's own summaries (title,
    folder, headings) count in full: measured, weighing them less found nothing more."""
    whole = full_context(file_summary, chunk_summary, header_path, content)
    return Texts(
        whole,
        summaries_start(header_path, content) if weigh_summaries else None,
        fit(whole, window),
    )


def with_lines(
    full_context: str, summaries_at: int | None, lines: Sequence[str]
) -> tuple[str, int | None]:
    """What full-text search reads once a chunk has lines the model wrote (its statements,
    its questions; kb.context.chunk_writes), and where its weighed part begins: everything before,
    then each kind's lines, weighed as summaries are (a model's words, not the note's: they
    add the names and dates a question asks by without outranking the chunk that says it).
    The embedder's text stays the chunk's; each line is a vector of its own."""
    kept = [text for text in lines if text]
    if not kept:
        return full_context, summaries_at
    at = len(full_context) if summaries_at is None else summaries_at
    return "\n\n".join([full_context, *kept]), at


def plain(header: str) -> str:
    return header.lstrip("#").strip()


def plain_headers(header_path: Sequence[str]) -> str:
    return " > ".join(plain(h) for h in header_path)


def sections(chunks: Sequence[Chunk]) -> Iterator[str]:
    """The note's top sections: each chunk's first heading below the title."""
    for chunk in chunks:
        below = [h for h in chunk.header_path if not h.startswith("# ")]
        if below:
            yield plain(below[0])
