"""Fusing the vector list and the text list of one query into one ranking.

Pure functions over the two candidate lists; the store finds the candidates, this module
decides their order. Every method gives each chunk a fused score from what the two lists
say of it (its rank, its score, or both); a chunk missing from one list gets nothing from it.

- `rrf`: reciprocal rank fusion, Σ w / (60 + rank) (Cormack et al. 2009). Ranks only: a
  list's tenth candidate counts as much whether it nearly tied the first or was far behind.
- `minmax`: each list's scores scaled to 0..1 between its best and worst candidate, then a
  weighted sum (Weaviate's "relative score fusion"). The worst candidate of each list
  gets 0, however close it was to the best.
- `dbsf`: distribution-based score fusion (Qdrant): each list's scores scaled by mean ± 3
  standard deviations, so an outlier stands out and a flat list stays flat.
- `tm2c2`: a convex combination of scores scaled by their theoretical minimum (cosine -1,
  BM25 0) and the list's best (Bruch et al. 2023, "An Analysis of Fusion Functions for
  Hybrid Retrieval"). A list whose scores are all alike (a weak embedder's crowd of
  middling similarities) cannot outvote a list with one clear winner.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

FusionMethod = Literal["rrf", "minmax", "dbsf", "tm2c2"]
FUSION_METHODS: tuple[FusionMethod, ...] = get_args(FusionMethod)

# Reciprocal rank fusion's constant: rank r in a list is worth 1 / (RRF_K + r).
RRF_K = 60
# The lowest score each list can give: cosine similarity and BM25.
VECTOR_FLOOR = -1.0
TEXT_FLOOR = 0.0


@dataclass(frozen=True)
class Ranked:
    """One candidate of one list: its place (1-based) and the list's own score."""

    id: int
    rank: int
    score: float


@dataclass(frozen=True)
class Fused:
    """One chunk's place in the fused ranking, and what each list said of it."""

    id: int
    score: float
    vector_rank: int | None
    vector_score: float | None
    text_rank: int | None
    text_score: float | None


@dataclass(frozen=True)
class Fusion:
    """How two lists become one; `vector_weight` is the vector list's share (0..1).

    Each default is the best mean recall@5 over docs-rag, personal-dev and the example
    vault, with two embedders (MiniLM and e5), among the fusions whose worst loss against
    the better single list stays within 0.015 on the larger sets; at the model levels
    `minmax` 0.3 ties it (0.882 against 0.881), and `dbsf` orders the first three better
    (docs/retrieval.md, "Choosing the fusion" and "The vector list's share"). Equal-weight
    RRF lost up to 0.25 there: a small embedder's list is weak on conversational notes, and
    by rank alone its guesses count as much as BM25's.
    """

    method: FusionMethod = "dbsf"
    vector_weight: float = 0.3


# kb's default index, where the vector list holds the paragraphs in the voices the chat
# model named and the lines it wrote of each chunk: a list that good earns twice the share
# (chosen over both model levels, voices and statements).
DEFAULT_FUSION = Fusion()
# An index whose vectors hold nothing the chat model gave (the structure level, summaries
# only): a small embedder's list of the chunks' own words is weak on personal notes, and
# BM25 leads (chosen over the structure and raw-chunk levels).
PLAIN_FUSION = Fusion(vector_weight=0.15)


def default_fusion(model_passages: bool) -> Fusion:
    """The fusion for an index whose passages hold the model's voices and lines, or not
    (ContextConfig.names_writers)."""
    return DEFAULT_FUSION if model_passages else PLAIN_FUSION


def fuse(vector: Sequence[Ranked], text: Sequence[Ranked], fusion: Fusion) -> list[Fused]:
    """Every candidate of either list, best fused score first (ties: better single rank)."""
    scale = _SCALES[fusion.method]
    v_part = scale(vector, VECTOR_FLOOR)
    t_part = scale(text, TEXT_FLOOR)
    by_id_v = {c.id: c for c in vector}
    by_id_t = {c.id: c for c in text}
    fused = []
    for cid in dict.fromkeys([*by_id_v, *by_id_t]):
        v, t = by_id_v.get(cid), by_id_t.get(cid)
        score = fusion.vector_weight * v_part.get(cid, 0.0) + (
            1 - fusion.vector_weight
        ) * t_part.get(cid, 0.0)
        fused.append(
            Fused(
                id=cid,
                score=score,
                vector_rank=v.rank if v else None,
                vector_score=v.score if v else None,
                text_rank=t.rank if t else None,
                text_score=t.score if t else None,
            )
        )
    fused.sort(key=lambda f: (-f.score, _best_rank(f), f.id))
    return fused


def single(ranked: Sequence[Ranked], *, vector: bool) -> list[Fused]:
    """One list alone, as `fuse` would report it (the vector or text mode)."""
    return [
        Fused(
            id=c.id,
            score=c.score,
            vector_rank=c.rank if vector else None,
            vector_score=c.score if vector else None,
            text_rank=None if vector else c.rank,
            text_score=None if vector else c.score,
        )
        for c in sorted(ranked, key=lambda c: c.rank)
    ]


def _best_rank(f: Fused) -> int:
    return min(r for r in (f.vector_rank, f.text_rank) if r is not None)


def _rrf(ranked: Sequence[Ranked], floor: float) -> dict[int, float]:
    # Scaled by RRF_K + 1 so that a first place is worth 1, like the score methods' best.
    return {c.id: (RRF_K + 1) / (RRF_K + c.rank) for c in ranked}


def _minmax(ranked: Sequence[Ranked], floor: float) -> dict[int, float]:
    if not ranked:
        return {}
    low, high = min(c.score for c in ranked), max(c.score for c in ranked)
    spread = high - low
    return {c.id: (c.score - low) / spread if spread > 0 else 1.0 for c in ranked}


def _dbsf(ranked: Sequence[Ranked], floor: float) -> dict[int, float]:
    if not ranked:
        return {}
    scores = [c.score for c in ranked]
    mean = statistics.fmean(scores)
    spread = 6 * statistics.pstdev(scores)
    if spread <= 0:
        return {c.id: 1.0 for c in ranked}
    low = mean - spread / 2
    return {c.id: min(1.0, max(0.0, (c.score - low) / spread)) for c in ranked}


def _tm2c2(ranked: Sequence[Ranked], floor: float) -> dict[int, float]:
    if not ranked:
        return {}
    spread = max(c.score for c in ranked) - floor
    return {c.id: (c.score - floor) / spread if spread > 0 else 1.0 for c in ranked}


_SCALES: dict[FusionMethod, Callable[[Sequence[Ranked], float], dict[int, float]]] = {
    "rrf": _rrf,
    "minmax": _minmax,
    "dbsf": _dbsf,
    "tm2c2": _tm2c2,
}
