"""Related notes as link prediction: does `kb related` give back the links a person wrote?

The protocol of a related-notes dataset's README (../shared/eval/related-obsidian-help:
rows of `{"source", "target", "link_text", "line"}` over a vault): the vault is copied, and
in each source every sampled `link_text` on its line is replaced by the text Obsidian shows
for it (the alias after `|`, else the note's name, "Note > Heading" for a heading), so the
link is gone and its words stay. The copy is indexed once with the real local stack
(MiniLM, the structure level: no chat model), and each source is asked for its related
notes with the notes it still links to left out (`kb related SOURCE --unlinked`). Each
removed target is scored: hits@5, hits@10 and MRR@10 over the rows.

Three rankings of the same copy:

- kb: every candidate of a source as a row of kb.related.signals, ordered by a hundred
  shallow trees (LightGBM's lambdarank) fitted out of fold (five folds grouped by source: no
  source's rows are scored by a model that saw them), by a logistic regression fitted the
  same way for comparison, and by the ranker file kb ships as it stands;
- links only: a note that links back first, then Adamic-Adar over the remaining links;
- search only: `kb query` with the source's title and opening 400 characters, 60 hits
  folded into notes, the same notes left out.

`--save FILE` fits the trees on every row and writes kb's ranker file with the record
of what it was fitted on and its out-of-fold figures. The index is kept in `--data-dir`
(`--fresh` builds the copy and its index again); `--rows FILE` writes every candidate row.

    .venv/bin/python bench/related.py [--dataset DIR] [--save src/kb/related/ranker.json]

Models: a MiniLM server of `scripts/test-models` is started for the run unless
KB_EMBED_HOST names one already running.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))

import lightgbm as lgb  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GroupKFold  # noqa: E402

from kb import db  # noqa: E402
from kb.config import Config, parse_config  # noqa: E402
from kb.container import Container, open_store  # noqa: E402
from kb.related import scorer  # noqa: E402
from kb.related.signals import FEATURES, FEATURES_VERSION  # noqa: E402
from kb.services.searching import SearchRequest  # noqa: E402
from kb.vault.wikitext import readable  # noqa: E402
from ranker import lightgbm_trees  # noqa: E402
from searchable import embedding_server  # noqa: E402

DEFAULT_DATASET = ROOT.parent / "shared/eval/related-obsidian-help"
VAULT = "vault"
SEARCH_HITS = 60
OPENING = 400
FOLDS = 5


@dataclass(frozen=True)
class Row:
    source: str
    target: str
    link_text: str
    line: int


def read_rows(dataset: Path) -> list[Row]:
    with (dataset / "queries.jsonl").open(encoding="utf-8") as f:
        return [Row(**json.loads(line)) for line in f if line.strip()]


def vault_of(dataset: Path) -> Path:
    """The dataset's vault: `vault/` beside its rows, else the README's `../NAME/vault`."""
    if (dataset / "vault").is_dir():
        return dataset / "vault"
    return dataset.parent / dataset.name.removeprefix("related-") / "vault"


_WIKILINK = re.compile(r"^!?\[\[(?P<target>[^\]|]*?)(?:\\?\|(?P<alias>[^\]]*))?\]\]$")


def shown(link_text: str) -> str:
    """The text Obsidian shows for a wikilink: its alias, else its note's name, with a
    heading as "Note > Heading"."""
    m = _WIKILINK.match(link_text)
    if m is None:
        raise ValueError(f"not a wikilink: {link_text!r}")
    if m["alias"]:
        return m["alias"]
    target, _, anchor = m["target"].partition("#")
    name = target.rsplit("/", 1)[-1].removesuffix(".md")
    return f"{name} > {anchor.lstrip('^')}" if anchor and name else name or anchor


def copy_without_links(vault: Path, rows: Sequence[Row], copy: Path) -> None:
    """The vault copied to `copy`, each row's link replaced on its line by its shown text."""
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(vault, copy)
    by_file: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_file[row.source].append(row)
    for source, removed in by_file.items():
        path = copy / source
        lines = path.read_text(encoding="utf-8").split("\n")
        for row in removed:
            text = lines[row.line - 1]
            if row.link_text not in text:
                raise ValueError(f"{source}:{row.line} does not hold {row.link_text!r}")
            lines[row.line - 1] = text.replace(row.link_text, shown(row.link_text), 1)
        path.write_text("\n".join(lines), encoding="utf-8")


def config_for(copy: Path, data_dir: Path) -> Config:
    raw = {
        "owner_name": "Bench Owner",
        "data_dir": str(data_dir),
        "vaults": [{"name": VAULT, "path": str(copy)}],
        # The structure level: each chunk with its note's title, folder and header path.
        # No paragraph vectors: related notes read the chunks' own vectors alone.
        "context": {"summaries": "structure", "writes": ["summaries"], "passages": "none"},
        "enrich": {"enabled": False},
    }
    return parse_config(raw, base_dir=Path.cwd(), env=dict(os.environ))


def indexed(parts: Container, marker: Path) -> None:
    """The copy indexed, its vectors written; once (the marker says it was)."""
    if marker.exists():
        return
    parts.sync()
    parts.worker(until_empty=True, fail_fast=True, speeds=("embed",)).run()
    status = parts.store.state.status()
    assert status.embedded == status.chunks, "every chunk must have its vector"
    marker.write_text(json.dumps({"chunks": status.chunks}), encoding="utf-8")


@dataclass
class Scores:
    hits5: float
    hits10: float
    mrr10: float

    def line(self, name: str) -> str:
        return f"| {name} | {self.hits5:.3f} | {self.hits10:.3f} | {self.mrr10:.3f} |"


def scored(rows: Sequence[Row], rankings: dict[str, list[str]]) -> Scores:
    """hits@5, hits@10 and MRR@10 of each row's target in its source's ranking."""
    h5 = h10 = mrr = 0.0
    for row in rows:
        ranking = rankings.get(row.source, [])
        place = ranking.index(row.target) + 1 if row.target in ranking else None
        if place is not None and place <= 10:
            h10 += 1
            mrr += 1 / place
            h5 += place <= 5
    n = len(rows) or 1
    return Scores(h5 / n, h10 / n, mrr / n)


def candidate_rows(parts: Container, sources: Sequence[str]) -> dict[str, Any]:
    """Each source's candidates (unlinked) as paths and rows of features, and how long
    each source took."""
    service = parts.related_service()
    out: dict[str, Any] = {}
    for source in sources:
        started = time.perf_counter()
        found = service.candidates(VAULT, source, unlinked=True)
        seconds = time.perf_counter() - started
        out[source] = {
            "paths": [e.note.path for e in found.evidence],
            "rows": found.rows,
            "seconds": seconds,
        }
    return out


# A few shallow trees: the ranker must carry to vaults it never saw.
TREES: dict[str, Any] = {
    "n_estimators": 100,
    "max_depth": 3,
    "num_leaves": 7,
    "learning_rate": 0.05,
}


def fit(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> lgb.LGBMRanker:
    """LightGBM's lambdarank over each source's candidates."""
    order = np.argsort(groups, kind="stable")
    _, counts = np.unique(groups[order], return_counts=True)
    model = lgb.LGBMRanker(objective="lambdarank", verbose=-1, min_child_samples=20, **TREES)
    model.fit(x[order], y[order], group=counts)
    return model


def fit_linear(x: np.ndarray, y: np.ndarray) -> LogisticRegression:
    """A logistic regression, for comparison (balanced: a source has one or a few targets
    among dozens of candidates)."""
    return LogisticRegression(C=1.0, max_iter=3000, class_weight="balanced").fit(x, y)


def design(
    candidates: dict[str, Any], rows: Sequence[Row], sources: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """The candidates of `sources` as one matrix, their labels (a removed target of the
    source) and groups (the source)."""
    targets: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        targets[row.source].add(row.target)
    xs: list[list[float]] = []
    ys: list[int] = []
    groups: list[int] = []
    keys: list[tuple[str, str]] = []
    for g, source in enumerate(sources):
        c = candidates[source]
        for path, features in zip(c["paths"], c["rows"], strict=True):
            xs.append(features)
            ys.append(int(path in targets[source]))
            groups.append(g)
            keys.append((source, path))
    return np.array(xs, dtype=float), np.array(ys), np.array(groups), keys


def rankings_of(keys: Sequence[tuple[str, str]], scores: Sequence[float]) -> dict[str, list[str]]:
    by_source: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for (source, path), score in zip(keys, scores, strict=True):
        by_source[source].append((-score, path))
    return {s: [p for _, p in sorted(c)] for s, c in by_source.items()}


def out_of_fold(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    keys: Sequence[tuple[str, str]],
    *,
    linear: bool = False,
) -> dict[str, list[str]]:
    """Each source's candidates ordered by a model fitted on the other folds' sources."""
    scores = np.zeros(len(y))
    for train, test in GroupKFold(n_splits=FOLDS).split(x, y, groups):
        if linear:
            scores[test] = fit_linear(x[train], y[train]).decision_function(x[test])
        else:
            scores[test] = fit(x[train], y[train], groups[train]).predict(x[test])
    return rankings_of(keys, list(scores))


def links_only(parts: Container, sources: Sequence[str]) -> dict[str, list[str]]:
    """A note that links back first, then Adamic-Adar over the remaining links (undirected),
    the notes the source links to and itself left out."""
    edges = parts.store.links.edges((VAULT,))
    with parts.store.pool.connection() as conn:
        paths = {r["id"]: r["path"] for r in conn.execute("SELECT id, path FROM documents")}
    ids = {p: i for i, p in paths.items()}
    out_of: dict[int, set[int]] = defaultdict(set)
    into: dict[int, set[int]] = defaultdict(set)
    for s, t in edges:
        out_of[s].add(t)
        into[t].add(s)
    around = {n: out_of[n] | into[n] for n in paths}
    rankings: dict[str, list[str]] = {}
    for source in sources:
        s = ids[source]
        left_out = out_of[s] | {s}
        scores: dict[int, tuple[int, float]] = {}
        for via in around[s]:
            for n in around[via]:
                if n not in left_out:
                    back, aa = scores.get(n, (0, 0.0))
                    scores[n] = (back, aa + 1 / math.log(max(2, len(around[via]))))
        for n in into[s] - left_out:
            scores[n] = (1, scores.get(n, (0, 0.0))[1])
        order = sorted(scores, key=lambda n: (-scores[n][0], -scores[n][1], paths[n]))
        rankings[source] = [paths[n] for n in order]
    return rankings


def search_only(parts: Container, copy: Path, sources: Sequence[str]) -> dict[str, list[str]]:
    """`kb query` with each source's title and opening, its hits folded into notes in their
    order, the source and the notes it links to left out."""
    service = parts.search_service()
    links = parts.store.links
    rankings: dict[str, list[str]] = {}
    for source in sources:
        note = parts.store.related.note(VAULT, source)
        assert note is not None
        linked = {r.path for r in links.out_links(note.id)}
        body = (copy / source).read_text(encoding="utf-8")
        if body.startswith("---\n") and "\n---" in body[4:]:
            body = body[4:].split("\n---", 1)[1]
        text = f"{Path(source).stem}\n{readable(body.strip())[:OPENING]}"
        hits = service.search(SearchRequest(text, top_k=SEARCH_HITS)).hits
        order: list[str] = []
        for hit in hits:
            if hit.path != source and hit.path not in linked and hit.path not in order:
                order.append(hit.path)
        rankings[source] = order
    return rankings


def kb_commit() -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--data-dir", type=Path, default=Path.home() / ".cache/kb/bench/related")
    parser.add_argument("--fresh", action="store_true", help="copy and index again")
    parser.add_argument("--save", type=Path, help="write the fitted ranker file here")
    parser.add_argument("--no-search", action="store_true", help="skip the search baseline")
    parser.add_argument("--rows", type=Path, help="write every candidate's row and label here")
    args = parser.parse_args(argv)

    # A run stopped with SIGTERM stops the server it started too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows = read_rows(args.dataset)
    sources = sorted({r.source for r in rows})
    data_dir = args.data_dir / args.dataset.name
    copy = data_dir / "copy"
    marker = data_dir / "indexed.json"
    if args.fresh and data_dir.exists():
        shutil.rmtree(data_dir)
    if not marker.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        copy_without_links(vault_of(args.dataset), rows, copy)
    url = os.environ.get("KB_BENCH_DATABASE_URL") or db.embedded_url(data_dir)
    with embedding_server(None), open_store(url) as store:
        # Read after the server is started: the models come from the environment.
        parts = Container(config_for(copy, data_dir), store)
        started = time.perf_counter()
        indexed(parts, marker)
        print(f"indexed in {time.perf_counter() - started:.0f} s", flush=True)
        candidates = candidate_rows(parts, sources)
        x, y, groups, keys = design(candidates, rows, sources)
        if args.rows:
            kept = {"features": list(FEATURES), "keys": keys, "x": x.tolist(), "y": y.tolist()}
            args.rows.write_text(json.dumps(kept), encoding="utf-8")
        found = {(s, p) for s, p in keys}
        reachable = sum((r.source, r.target) in found for r in rows)
        seconds = sorted(c["seconds"] for c in candidates.values())
        print(
            f"{len(rows)} rows, {len(sources)} sources, {len(y)} candidates"
            f" ({len(y) / len(sources):.0f} a source), {reachable} targets among them;"
            f" p50 {seconds[len(seconds) // 2] * 1000:.0f} ms,"
            f" p95 {seconds[int(len(seconds) * 0.95)] * 1000:.0f} ms a source",
            flush=True,
        )
        shipped = scorer.load(scorer.DEFAULT_MODEL)
        figures = {
            "kb, out of fold": scored(rows, out_of_fold(x, y, groups, keys)),
            "kb, a logistic regression, out of fold": scored(
                rows, out_of_fold(x, y, groups, keys, linear=True)
            ),
            f"kb, the shipped file ({shipped.name}; in-sample if fitted here)": scored(
                rows, rankings_of(keys, [shipped.score(list(r)) for r in x])
            ),
            "links only": scored(rows, links_only(parts, sources)),
        }
        if not args.no_search:
            figures["search only"] = scored(rows, search_only(parts, copy, sources))
    print("| ranking | hits@5 | hits@10 | MRR@10 |\n|---|---|---|---|")
    for name, s in figures.items():
        print(s.line(name))
    if args.save:
        model = fit(x, y, groups)
        oof = figures["kb, out of fold"]
        data = {
            "format": scorer.FORMAT,
            "name": f"lightgbm-{args.dataset.name}",
            "features_version": FEATURES_VERSION,
            "features": list(FEATURES),
            "trees": lightgbm_trees(model.booster_),
            "record": {
                "model": {"objective": "lambdarank", **TREES},
                "fitted_on": [args.dataset.name],
                "rows": len(rows),
                "sources": len(sources),
                "candidates": len(y),
                "level": "structure",
                "embed_model": os.environ.get("KB_EMBED_MODEL", ""),
                "kb_commit": kb_commit(),
                "out_of_fold": {"hits@5": oof.hits5, "hits@10": oof.hits10, "mrr@10": oof.mrr10},
                "folds": f"{FOLDS}, grouped by source",
            },
        }
        args.save.write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {args.save}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
