"""What kb knows of each note related to a source: the candidates of every kind (named in
its text, near in the link graph, near in meaning) joined into one record a note. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from kb.related.mentions import Grams
from kb.store.nearby import Near, Neighbour, RelatedNote, Similarity


@dataclass(frozen=True)
class Evidence:
    """A candidate note and what relates it to the source."""

    note: RelatedNote
    mention: str | None  # the name of it the source's text holds
    mention_count: int  # how often the source's text says it
    mention_at: float  # where it first does, as a share of the text (1.0: never)
    mention_rarity: float  # how rare the name's rarest word is in the vault (0 to 1)
    mention_by_links: bool  # it is said on a line that holds a link
    mentions_source: bool  # its text holds one of the source's names
    neighbour: Neighbour | None
    near: Near | None  # its chunk among the nearest of a source chunk's
    # Its chunks' vectors against the source's: the best pair's cosine similarity, and the
    # similarity of the two notes' mean vectors (None without vectors).
    similarity: Similarity | None


def joined(
    notes: Mapping[int, RelatedNote],
    *,
    mentions: Mapping[int, str],
    grams: Grams,
    link_lines: Grams,
    rarity: Mapping[str, float],
    mentioning: set[int],
    neighbours: Sequence[Neighbour],
    near: Sequence[Near],
    similarities: Mapping[int, Similarity],
) -> list[Evidence]:
    """One record for every candidate `notes` holds, in id order: `grams` are the source
    text's, `link_lines` those of its lines that hold a link, `rarity` each mentioned
    name's."""
    by_neighbour = {n.document_id: n for n in neighbours}
    by_near = {n.document_id: n for n in near}
    return [
        Evidence(
            note=notes[i],
            mention=mentions.get(i),
            mention_count=grams.count(mentions[i]) if i in mentions else 0,
            mention_at=grams.first.get(mentions[i], 1.0) if i in mentions else 1.0,
            mention_rarity=rarity.get(mentions[i], 0.0) if i in mentions else 0.0,
            mention_by_links=i in mentions and link_lines.count(mentions[i]) > 0,
            mentions_source=i in mentioning,
            neighbour=by_neighbour.get(i),
            near=by_near.get(i),
            similarity=similarities.get(i),
        )
        for i in sorted(notes)
    ]


def nearest_of_all(parts: Iterable[Sequence[Near]]) -> list[Near]:
    """The nearest notes of disjoint sets of source chunks, as one read of all of them gives
    them: each note's best chunk of any set, and its hits over every set."""
    best: dict[int, Near] = {}
    for part in parts:
        for near in part:
            seen = best.get(near.document_id)
            if seen is None:
                best[near.document_id] = near
            elif near.similarity > seen.similarity:
                best[near.document_id] = replace(near, hits=near.hits + seen.hits)
            else:
                best[near.document_id] = replace(seen, hits=near.hits + seen.hits)
    return list(best.values())
