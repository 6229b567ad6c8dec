"""Why a note is related, in words a person reads: the reasons behind the features that
lifted its score most ("links here", "links to 2 of the same notes", "both about pgvector:
'…'", "Nate writes in both", "the day before", "mentions its title: '…'"). Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kb.related.evidence import Evidence
from kb.related.signals import Source, writer

# Which reason each feature speaks to; a feature not named here is no reason a person reads
# (how many notes link to it).
_REASON = {
    "links_here": "backlink",
    "mentioned": "mention",
    "mention_words": "mention",
    "mention_count": "mention",
    "mention_early": "mention",
    "mention_share": "mention",
    "mention_rarity": "mention",
    "mention_by_links": "mention",
    "mentions_source": "mentioned",
    "adamic_adar": "graph",
    "graph_rank": "graph",
    "shared_targets": "graph",
    "shared_sources": "graph",
    "through": "graph",
    "near": "meaning",
    "vector_hits": "meaning",
    "similarity": "meaning",
    "similarity_gap": "meaning",
    "similarity_rank": "meaning",
    "mean_similarity": "meaning",
    "mean_gap": "meaning",
    "mean_rank": "meaning",
    "shared_tags": "tags",
    "same_folder": "folder",
    "same_writer": "writer",
    "days_near": "time",
}

# Reasons said whenever they hold, room permitting.
_FACTS = ("backlink", "mention", "mentioned")

_WORD = re.compile(r"[^\W\d_][\w-]{3,}")
# Words too common to say what two passages are about.
_COMMON = frozenset(
    "about after also been before being both but could does each from have here into just"
    " like more most much must note notes only other over same should some such than that"
    " their them then there these they this those through very what when where which while"
    " will with would your you".split()
)
QUOTE = 80


def reasons(
    lifts: Mapping[str, float],
    source: Source,
    evidence: Evidence,
    *,
    source_text: Mapping[int, str],
    owner: str | None = None,
    most: int = 3,
) -> list[str]:
    """The reasons that lifted the score, strongest first, each said once; `source_text`
    holds the source's chunks by id (for what two passages share)."""
    by_reason: dict[str, float] = {}
    for name, lift in lifts.items():
        if (reason := _REASON.get(name)) is not None:
            by_reason[reason] = by_reason.get(reason, 0.0) + lift
    lifted = [r for r, lift in sorted(by_reason.items(), key=lambda item: -item[1]) if lift > 0]
    said: list[str] = []
    # A link back first, whatever the ranker made of it: the fact a person looks for first;
    # then what lifted the score most, then a mention either way if the ranker leant on
    # other signals.
    for reason in ["backlink", *lifted, *_FACTS]:
        if len(said) == most:
            break
        if (text := _say(reason, source, evidence, source_text, owner)) and text not in said:
            said.append(text)
    return said


def _say(
    reason: str,
    source: Source,
    c: Evidence,
    source_text: Mapping[int, str],
    owner: str | None,
) -> str | None:
    n = c.neighbour
    if reason == "backlink":
        return "links here" if n and n.links_here else None
    if reason == "mention":
        return f"mentions its title: '{c.mention}'" if c.mention else None
    if reason == "mentioned":
        return "mentions this note's title" if c.mentions_source else None
    if reason == "graph" and n:
        return _graph(n.shared_targets, n.shared_sources, n.through)
    if reason == "meaning" and c.near:
        quote = _quote(c.near.chunk_content)
        topic = shared_topic(source_text.get(c.near.source_chunk, ""), c.near.chunk_content)
        return f"both about {topic}: '{quote}'" if topic else f"close in meaning: '{quote}'"
    if reason == "tags":
        shared = sorted(
            {t.casefold() for t in source.note.tags} & {t.casefold() for t in c.note.tags}
        )
        return "both tagged " + ", ".join(f"#{t}" for t in shared[:3]) if shared else None
    if reason == "folder":
        return "in the same folder"
    if reason == "writer":
        who = writer(c.note, owner)
        return f"{who} writes in both" if who else None
    if reason == "time" and c.note.day and source.note.day:
        return days_apart((c.note.day - source.note.day).days)
    return None


def _graph(shared_targets: int, shared_sources: int, through: int) -> str | None:
    if shared_targets:
        return f"links to {_count(shared_targets, 'the same note')}"
    if shared_sources:
        return f"linked from {_count(shared_sources, 'the same note')}"
    if through:
        return "linked from a note this one links to"
    return None


def _count(n: int, what: str) -> str:
    return f"one of {what}s" if n == 1 else f"{n} of {what}s"


def days_apart(days: int) -> str:
    """A day's distance from the source's, as a person says it."""
    if days == 0:
        return "the same day"
    if abs(days) == 1:
        return "the day after" if days > 0 else "the day before"
    return f"{abs(days)} days {'after' if days > 0 else 'before'}"


def shared_topic(a: str, b: str) -> str | None:
    """The longest word two texts share that says what they are about, if any."""
    words = {w.casefold() for w in _WORD.findall(a)} & {w.casefold() for w in _WORD.findall(b)}
    words -= _COMMON
    return max(sorted(words), key=len) if words else None


def _quote(text: str) -> str:
    """The opening of a chunk's first line with words, cut at a word."""
    line = next((s.strip(" #>-*") for s in text.splitlines() if s.strip(" #>-*")), "")
    if len(line) <= QUOTE:
        return line
    return line[:QUOTE].rsplit(" ", 1)[0] + "…"
