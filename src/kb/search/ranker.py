"""The learned ranker: gradient-boosted trees over each candidate's features
(kb.search.features) put the passages kb found into a better order than fusion alone.

The trees are fitted by bench/ranker.py with LightGBM's ranking objective and shipped as a
small versioned JSON file beside this module, with the record of what they were fitted on
and what they measured, and the version of the features' meaning they were fitted on
(kb.search.features.FEATURES_VERSION): trees of another version are not used. They are
evaluated here in plain Python: a few hundred shallow trees over some sixty rows take
milliseconds, where loading LightGBM (or NumPy) would cost a standalone `kb query` more
than the whole search. The trees are compiled once a process into one Python function of
nested comparisons (as m2cgen and treelite turn trees into code): a few times faster than
walking their nodes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from kb.errors import KbError
from kb.fusion import Fused

# The file format this module reads; bench/ranker.py writes it.
FORMAT = 1
DEFAULT_MODEL = Path(__file__).with_name("ranker.json")


@dataclass(frozen=True)
class Tree:
    """One regression tree, its split nodes as parallel tuples (the feature, the threshold,
    the left and right child, the node's mean output) and its leaf values. A child below
    zero is the leaf ~child; a node's mean output is what an explanation measures each
    split's lift against."""

    features: tuple[int, ...]
    thresholds: tuple[float, ...]
    lefts: tuple[int, ...]
    rights: tuple[int, ...]
    means: tuple[float, ...]
    leaves: tuple[float, ...]

    @property
    def mean(self) -> float:
        """The tree's mean output: where every row's path starts."""
        return self.means[0] if self.means else self.leaves[0]

    @cached_property
    def lifts(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """What taking each split node's left and right branch adds: the child's mean
        output (or leaf value) less the node's (worked out at a tree's first explanation)."""

        def output(child: int) -> float:
            return self.leaves[~child] if child < 0 else self.means[child]

        return (
            tuple(output(c) - m for c, m in zip(self.lefts, self.means, strict=True)),
            tuple(output(c) - m for c, m in zip(self.rights, self.means, strict=True)),
        )


@dataclass(frozen=True)
class Schema:
    """What a ranker's rows hold: the features' names, in order, and the version of their
    meaning (for a search's, kb.search.features). Trees fitted on other rows are not used."""

    features: tuple[str, ...]
    version: int


@dataclass(frozen=True)
class Ranker:
    """A fitted ranker: its trees, the features it reads (by name, in order) and the record
    of its fitting."""

    name: str
    features: tuple[str, ...]
    trees: tuple[Tree, ...]
    record: Mapping[str, Any]
    # Set (one line): the file's trees were fitted on rows kb no longer makes, so they are
    # left out and a search says so, in fusion's order: never weights for what a feature
    # meant once.
    unfit: str | None = None
    # The trees as one function of a row: their sum.
    score: Callable[[Sequence[float]], float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "score", compiled(self.trees))

    def scores(self, rows: Sequence[Sequence[float]]) -> list[float]:
        """Each row's score, higher first."""
        return [self.score(row) for row in rows]

    def lifts(self, row: Sequence[float]) -> dict[str, float]:
        """What each feature added to this row's score, summed over the trees' splits on its
        path (each split's change of the mean output): why the row scored as it did."""
        added = [0.0] * len(self.features)
        on_path: set[int] = set()
        for tree in self.trees:
            (left, right), features, thresholds = tree.lifts, tree.features, tree.thresholds
            node = 0 if tree.means else ~0
            while node >= 0:
                feature = features[node]
                on_path.add(feature)
                if row[feature] <= thresholds[node]:
                    added[feature] += left[node]
                    node = tree.lefts[node]
                else:
                    added[feature] += right[node]
                    node = tree.rights[node]
        return {self.features[f]: added[f] for f in sorted(on_path)}


def compiled(trees: Sequence[Tree]) -> Callable[[Sequence[float]], float]:
    """The sum of `trees` as one function of a row, made from their numbers alone (features
    are ints, thresholds and leaves floats: nothing of a file reaches the code but them).
    Each feature a split reads is taken from the row once, into a local: a fifth faster
    than indexing the row at every split."""
    used = sorted({f for tree in trees for f in tree.features})
    lines = ["def score(row):", *(f" x{f:d} = row[{f:d}]" for f in used), " s = 0.0"]

    def walk(tree: Tree, node: int, depth: int) -> None:
        indent = " " * depth
        if node < 0:
            lines.append(f"{indent}s += {_literal(tree.leaves[~node])}")
            return
        lines.append(f"{indent}if x{tree.features[node]:d} <= {_literal(tree.thresholds[node])}:")
        walk(tree, tree.lefts[node], depth + 1)
        lines.append(f"{indent}else:")
        walk(tree, tree.rights[node], depth + 1)

    for tree in trees:
        walk(tree, 0 if tree.means else ~0, 1)
    lines.append(" return s")
    namespace: dict[str, Any] = {"INF": math.inf, "NAN": math.nan}
    exec(compile("\n".join(lines), "<kb ranker>", "exec"), namespace)
    function: Callable[[Sequence[float]], float] = namespace["score"]
    return function


def _literal(value: float) -> str:
    """A float as Python source: repr() round-trips it exactly; infinities and NaN by name."""
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INF" if value > 0 else "-INF"
    return repr(float(value))


@dataclass(frozen=True)
class Judged:
    """The candidates in the ranker's order, each one's score and its place in kb's fused
    order, by chunk id."""

    order: list[Fused]
    scores: dict[int, float]
    fused_rank: dict[int, int]


def order(ranker: Ranker, fused: Sequence[Fused], rows: Sequence[Sequence[float]]) -> Judged:
    """`fused` (kb's order) reordered by the ranker's scores of its `rows`; equal scores
    keep kb's order."""
    scores = ranker.scores(rows)
    places = sorted(range(len(fused)), key=lambda i: (-scores[i], i))
    return Judged(
        order=[fused[i] for i in places],
        scores={f.id: s for f, s in zip(fused, scores, strict=True)},
        fused_rank={f.id: n for n, f in enumerate(fused, 1)},
    )


def reasons(ranker: Ranker, row: Sequence[float], *, most: int = 3) -> list[str]:
    """The features that moved a row's score most, as "name +0.42"."""
    lifts = sorted(ranker.lifts(row).items(), key=lambda item: -abs(item[1]))
    return [f"{name} {lift:+.2f}" for name, lift in lifts[:most] if abs(lift) >= 0.005]


def parse(data: Mapping[str, Any], schema: Schema, source: str = "the ranker file") -> Ranker:
    """A ranker from its file's contents (`source` names it in messages): a KbError when it
    is not one this kb can read (an unknown format); without its trees, `unfit` saying why,
    when it was fitted on other features than `schema`'s or another version of them (or
    records none)."""
    if data.get("format") != FORMAT:
        raise KbError(f"ranker file format {data.get('format')!r}: this kb reads {FORMAT}")
    name, features = str(data["name"]), tuple(data["features"])
    trees = tuple(_tree(nodes, leaves) for nodes, leaves in data["trees"])
    version = data.get("features_version")
    if features != schema.features:
        unfit = "other features than this kb computes"
    elif version is None:
        unfit = "features of no recorded version"
    elif version != schema.version:
        unfit = f"version {version} of its features, where this kb computes {schema.version}"
    else:
        return Ranker(name, features, trees, data.get("record", {}))
    warning = f"{source} was fitted on {unfit}: results in fusion's order until it is fitted again"
    return Ranker(name, features, (), data.get("record", {}), unfit=warning)


def _tree(nodes: Sequence[Sequence[float]], leaves: Sequence[float]) -> Tree:
    """A tree from its file's form: split nodes as [feature, threshold, left, right, mean]."""
    return Tree(
        features=tuple(int(n[0]) for n in nodes),
        thresholds=tuple(float(n[1]) for n in nodes),
        lefts=tuple(int(n[2]) for n in nodes),
        rights=tuple(int(n[3]) for n in nodes),
        means=tuple(float(n[4]) for n in nodes),
        leaves=tuple(float(v) for v in leaves),
    )


def load(path: Path, schema: Schema) -> Ranker:
    """The ranker in `path`, read once a process."""
    # functools.cache types its function's arguments as any hashable: this one keeps them.
    return _read(path, schema)


@cache
def _read(path: Path, schema: Schema) -> Ranker:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KbError(f"cannot read the ranker file {path}: {exc}") from None
    try:
        return parse(data, schema, f"the ranker file {path}")
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise KbError(f"the ranker file {path} is damaged: {exc!r}") from None
