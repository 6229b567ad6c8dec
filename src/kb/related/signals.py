"""Each candidate note as a row of numbers for the ranker (kb.related.scorer). Pure.

The features are meant to carry from one vault to another: flags, ranks among the source's
candidates and scores relative to the best of them, rather than raw counts a bigger or more
densely linked vault would inflate. FEATURES_VERSION names this list: a ranker file fitted
on another is never applied to these rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kb.related.evidence import Evidence
from kb.store.nearby import RelatedNote

FEATURES_VERSION = 3

FEATURES: tuple[str, ...] = (
    "links_here",  # it links to the source
    "mentioned",  # the source's text names it
    "mention_words",  # words in that name, up to 4, over 4
    "mention_count",  # how often, up to 4, over 4
    "mention_early",  # 1 less where the text first names it, as a share of the text
    "mention_share",  # 1 / how many candidates the text names
    "mention_rarity",  # how rare the name's rarest word is in the vault
    "mention_by_links",  # the name is said on a line that holds a link
    "mentions_source",  # its text names the source
    "adamic_adar",  # over the best candidate's
    "graph_rank",  # 1 / its place by Adamic-Adar
    "shared_targets",  # share of the source's links it links to as well
    "shared_sources",  # share of the notes linking to the source that link to it too
    "through",  # a note the source links to links to it
    "near",  # one of its chunks is among the nearest of a source chunk's
    "vector_hits",  # share of the source's chunks probed it has a chunk among the nearest of
    "similarity",  # its best chunk's cosine similarity to a source chunk
    "similarity_gap",  # that less the best candidate's
    "similarity_rank",  # 1 / its place by it
    "mean_similarity",  # of the two notes' mean vectors
    "mean_gap",  # that less the best candidate's
    "mean_rank",  # 1 / its place by it
    "shared_tags",  # Jaccard of their tags
    "same_folder",
    "same_writer",
    "days_near",  # 1 / (1 + days apart) when both give themselves a day
    "popularity",  # notes linking to it, log-scaled against a hundred
)


@dataclass(frozen=True)
class Source:
    """What the features read of the source."""

    note: RelatedNote
    out_links: int  # notes it links to
    in_links: int  # notes linking to it
    chunks: int  # chunks its candidates in meaning were looked for from


def _folder(path: str) -> str:
    return path.rpartition("/")[0]


def _places(values: Sequence[float]) -> list[float]:
    """1 / each value's place, best first (0 for a value of 0: no place)."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    places = [0.0] * len(values)
    for place, i in enumerate(order, 1):
        if values[i] > 0:
            places[i] = 1 / place
    return places


def rows(source: Source, candidates: Sequence[Evidence]) -> list[list[float]]:
    """One row of FEATURES for each candidate, in their order."""
    aa = [c.neighbour.adamic_adar if c.neighbour else 0.0 for c in candidates]
    best = [c.similarity.best if c.similarity else 0.0 for c in candidates]
    mean = [c.similarity.mean if c.similarity else 0.0 for c in candidates]
    top_aa = max(aa, default=0.0) or 1.0
    top_best, top_mean = max(best, default=0.0), max(mean, default=0.0)
    graph_places, best_places, mean_places = _places(aa), _places(best), _places(mean)
    named = sum(c.mention is not None for c in candidates)
    tags = {t.casefold() for t in source.note.tags}
    out: list[list[float]] = []
    for i, c in enumerate(candidates):
        n, note = c.neighbour, c.note
        theirs = {t.casefold() for t in note.tags}
        days = (
            abs((note.day - source.note.day).days)
            if note.day is not None and source.note.day is not None
            else None
        )
        out.append(
            [
                float(bool(n and n.links_here)),
                float(c.mention is not None),
                min(len(c.mention.split()), 4) / 4 if c.mention else 0.0,
                min(c.mention_count, 4) / 4,
                1 - c.mention_at,
                1 / named if c.mention else 0.0,
                c.mention_rarity,
                float(c.mention_by_links),
                float(c.mentions_source),
                aa[i] / top_aa,
                graph_places[i],
                n.shared_targets / source.out_links if n and source.out_links else 0.0,
                n.shared_sources / source.in_links if n and source.in_links else 0.0,
                float(bool(n and n.through)),
                float(c.near is not None),
                c.near.hits / source.chunks if c.near and source.chunks else 0.0,
                best[i],
                best[i] - top_best if c.similarity else -1.0,
                best_places[i],
                mean[i],
                mean[i] - top_mean if c.similarity else -1.0,
                mean_places[i],
                len(tags & theirs) / len(tags | theirs) if tags and theirs else 0.0,
                float(_folder(note.path) == _folder(source.note.path)),
                float(_same_writer(source.note, note)),
                1 / (1 + days) if days is not None else 0.0,
                min(1.0, math.log1p(note.inbound) / math.log(100)),
            ]
        )
    return out


def writer(note: RelatedNote, owner: str | None = None) -> str | None:
    """Who writes a note: the owner in their folders, else the writer the model named."""
    return owner if note.personal and owner else note.writer


def _same_writer(a: RelatedNote, b: RelatedNote) -> bool:
    if a.personal and b.personal:
        return True
    return a.writer is not None and a.writer.casefold() == (b.writer or "").casefold()
