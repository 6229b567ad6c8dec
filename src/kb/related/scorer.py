"""The related-notes ranker: a hundred shallow trees over kb.related.signals' rows
(LightGBM's ranking objective, fitted by bench/related.py on a vault's own links: a link
held out of a copy of the vault; did its target come back?), shipped as a small versioned
JSON file beside this module with the record of what it was fitted on and what it
measured. The trees are those of the search ranker's file format and are scored by it
(kb.search.ranker: compiled once into plain Python); a file may hold a linear score
instead (`weights` and `intercept`), as the fixed fallback is.

A file fitted on other features than this kb computes (its `features_version` or its list
of names differ) is not applied: one warning line, then FALLBACK, a fixed order that puts
a link back to the source first, then a named mention, the link graph and meaning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from kb.errors import KbError
from kb.related.signals import FEATURES, FEATURES_VERSION
from kb.search import ranker as search_ranker

log = logging.getLogger(__name__)

# The file format this module reads; bench/related.py writes it.
FORMAT = 1
DEFAULT_MODEL = Path(__file__).with_name("ranker.json")


class Scorer(Protocol):
    """What orders candidates: a score a row, and what each feature added to it."""

    @property
    def name(self) -> str: ...

    def score(self, row: Sequence[float]) -> float: ...

    def lifts(self, row: Sequence[float]) -> dict[str, float]: ...


@dataclass(frozen=True)
class Weights:
    """A linear score: each feature's weight, and the intercept."""

    name: str
    weights: tuple[float, ...]
    intercept: float = 0.0
    record: Mapping[str, Any] = field(default_factory=dict)

    def score(self, row: Sequence[float]) -> float:
        return self.intercept + sum(w * x for w, x in zip(self.weights, row, strict=True))

    def lifts(self, row: Sequence[float]) -> dict[str, float]:
        """What each feature added to the row's score."""
        return {n: w * x for n, w, x in zip(FEATURES, self.weights, row, strict=True)}


def _fixed(**weights: float) -> Weights:
    return Weights("fallback", tuple(weights.get(name, 0.0) for name in FEATURES))


# The order used when the shipped file cannot be: hand-set, each signal's weight by how
# strong a sign it is on its own.
FALLBACK = _fixed(
    links_here=3.0,
    mentioned=2.5,
    mentions_source=1.0,
    adamic_adar=1.5,
    shared_targets=1.0,
    shared_sources=1.0,
    similarity=2.0,
    mean_similarity=1.0,
    similarity_rank=1.0,
    shared_tags=0.5,
    days_near=0.5,
)


def parse(data: Mapping[str, Any]) -> Scorer:
    """The ranker of a file's contents; ValueError when it is not one for this kb."""
    if data.get("format") != FORMAT:
        raise ValueError(f"format {data.get('format')!r}, this kb reads {FORMAT}")
    if data.get("features_version") != FEATURES_VERSION or tuple(data["features"]) != FEATURES:
        raise ValueError(
            f"fitted on features version {data.get('features_version')!r},"
            f" this kb computes version {FEATURES_VERSION}"
        )
    if "trees" in data:
        try:
            return search_ranker.parse(data, FEATURES)
        except KbError as exc:
            raise ValueError(str(exc)) from None
    weights = tuple(float(w) for w in data["weights"])
    if len(weights) != len(FEATURES):
        raise ValueError(f"{len(weights)} weights for {len(FEATURES)} features")
    return Weights(str(data["name"]), weights, float(data["intercept"]), data.get("record", {}))


@cache
def load(path: Path = DEFAULT_MODEL) -> Scorer:
    """The ranker in `path`, read once a process; FALLBACK, with one warning, when it cannot
    be read or was fitted on other features."""
    try:
        return parse(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning(
            "related notes: the ranker file %s is not used (%s); a fixed order is", path, exc
        )
        return FALLBACK
