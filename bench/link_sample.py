"""A related-notes set from any linked vault: the wikilinks a person wrote, sampled.

The protocol of related-obsidian-help's README, from a vault's path: a link qualifies when
its target is a note of the vault other than its source, its source links to at least 3
other notes, the (source, target) pair is written once, and the link's text appears once
in its file. Links to a name two notes share are left out (which one a reader meant is a
guess). 300 qualifying links are sampled (seed 7), or all of them if fewer.

    .venv/bin/python bench/link_sample.py VAULT OUT_DIR [--sample 300] [--seed 7]

OUT_DIR gets `queries.jsonl` (the sampled rows, `{"source", "target", "link_text",
"line"}`), `links.jsonl` (every qualifying link) and `stats.json` (the counts), and a
`vault` link to VAULT, so `bench/related.py --dataset OUT_DIR` reads the set as it reads
related-obsidian-help. The vault's text stays where it is. On Obsidian's help vault it gives
related-obsidian-help's 668 links in their order and its 300 rows (here in the order of
their sources and lines).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

# `[[target#heading|alias]]`, an embed when `!` comes first; `\|` is the pipe a table holds.
_WIKILINK = re.compile(r"(?P<embed>!?)\[\[(?P<target>[^\]|]*?)(?:\\?\|(?P<alias>[^\]]*))?\]\]")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
# A body shorter than this is a stub: stats.json counts the targets that are.
STUB = 200


@dataclass(frozen=True)
class Link:
    source: str
    target: str
    text: str
    line: int
    column: int


def notes_of(vault: Path) -> list[str]:
    """The vault's notes, paths relative to it; Obsidian's own folder is not a note's."""
    return sorted(
        p.relative_to(vault).as_posix()
        for p in vault.rglob("*.md")
        if not any(part.startswith(".") for part in p.relative_to(vault).parts)
    )


def body_lines(text: str) -> list[tuple[int, str]]:
    """Each line of a note's body with its 1-based number: not its front matter, not a
    fenced code block (a link there is an example, not a link)."""
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() == "---":
                start = i + 1
                break
    out: list[tuple[int, str]] = []
    fenced = False
    for i in range(start, len(lines)):
        if _FENCE.match(lines[i]):
            fenced = not fenced
            continue
        if not fenced:
            out.append((i + 1, lines[i]))
    return out


def build(vault: Path, sample: int, seed: int) -> tuple[list[Link], list[Link], dict[str, object]]:
    """Every qualifying link, the sampled ones (sorted) and the counts."""
    notes = notes_of(vault)
    by_name: dict[str, list[str]] = defaultdict(list)
    by_path = {n.removesuffix(".md").casefold(): n for n in notes}
    for n in notes:
        by_name[Path(n).stem.casefold()].append(n)
    texts = {n: (vault / n).read_text(encoding="utf-8", errors="replace") for n in notes}
    stats: Counter[str] = Counter()
    resolved: list[tuple[Link, bool]] = []  # each link to a note, and whether its name is shared
    embedded: list[tuple[str, str]] = []  # each note a note embeds: a pair written once more

    def resolve(name: str) -> list[str]:
        key = name.removesuffix(".md").casefold()
        if "/" not in name:
            return by_name.get(key, [])
        # A path is relative to the vault, or the end of one.
        found = by_path.get(key) or next(
            (n for k, n in by_path.items() if k.endswith("/" + key)), None
        )
        return [found] if found else []

    for source in notes:
        for number, line in body_lines(texts[source]):
            # A link that starts in an inline code span shows the syntax: not a link.
            code = [c.span() for c in _CODE.finditer(line)]
            for m in _WIKILINK.finditer(line):
                if any(start < m.start() < end for start, end in code):
                    continue
                name = m["target"].partition("#")[0].strip()
                # Obsidian's tiebreak for a shared name: the shortest path.
                targets = sorted(resolve(name), key=lambda t: (t.count("/"), t)) if name else []
                if m["embed"]:
                    stats["embeds"] += 1
                    if targets:
                        embedded.append((source, targets[0]))
                    continue
                stats["wikilinks"] += 1
                stats["wikilinks_with_alias"] += bool(m["alias"])
                stats["wikilinks_with_heading_or_block"] += "#" in m["target"]
                if not name:
                    stats["wikilinks_same_note_heading"] += 1
                    continue
                stats["wikilinks_with_path"] += "/" in name
                if not targets:
                    suffix = Path(name).suffix.lower()
                    attachment = suffix and suffix != ".md"
                    stats["wikilinks_to_attachments" if attachment else "wikilinks_unresolved"] += 1
                    continue
                shared = len(targets) > 1
                stats["wikilinks_resolved_by_tiebreak"] += shared
                stats["wikilinks_resolvable"] += 1
                if targets[0] == source:
                    stats["wikilinks_self"] += 1
                    continue
                resolved.append((Link(source, targets[0], m[0], number, m.start()), shared))
    pairs = Counter([(link.source, link.target) for link, _ in resolved] + embedded)
    targets_of: dict[str, set[str]] = defaultdict(set)
    for link, _ in resolved:
        targets_of[link.source].add(link.target)
    qualifying: list[Link] = []
    for link, shared in resolved:
        if len(targets_of[link.source]) < 3:
            stats["dropped_source_has_lt3_targets"] += 1
        elif pairs[link.source, link.target] > 1:
            stats["dropped_pair_not_unique"] += 1
        elif texts[link.source].count(link.text) > 1:
            stats["dropped_link_text_not_unique_in_file"] += 1
        elif shared:
            stats["dropped_ambiguous_note_name"] += 1
        else:
            qualifying.append(link)
    qualifying.sort(key=lambda k: (k.source, k.line, k.column))
    sampled = sorted(
        random.Random(seed).sample(qualifying, min(sample, len(qualifying))),
        key=lambda k: (k.source, k.line, k.column),
    )
    edges = {(link.source, link.target) for link, _ in resolved}
    linked = {t for _, t in edges} | {s for s, _ in edges}
    bodies = {n: sum(len(line) for _, line in body_lines(texts[n])) for n in notes}
    shared_names = {k: v for k, v in by_name.items() if len(v) > 1}
    sampled_edges = {(k.source, k.target) for k in sampled}
    into = Counter(t for _, t in edges)
    counts: dict[str, object] = {
        "notes": len(notes),
        "notes_total_chars": sum(len(t) for t in texts.values()),
        "ambiguous_note_names": len(shared_names),
        **{k: stats[k] for k in sorted(stats)},
        "notes_with_outgoing_links": len(targets_of),
        "notes_with_ge3_targets": sum(len(t) >= 3 for t in targets_of.values()),
        "orphan_notes": sum(n not in linked for n in notes),
        "distinct_edges": len(edges),
        "qualifying_links": len(qualifying),
        "sampled": len(sampled),
        "sampled_distinct_sources": len({k.source for k in sampled}),
        "sampled_distinct_targets": len({k.target for k in sampled}),
        "sampled_target_empty": sum(bodies[k.target] == 0 for k in sampled),
        "sampled_target_stub_lt200": sum(bodies[k.target] < STUB for k in sampled),
        "qualifying_target_stub_lt200": sum(bodies[k.target] < STUB for k in qualifying),
        "sampled_reciprocal": sum((t, s) in edges for s, t in sampled_edges),
        "sampled_target_indegree_1": sum(into[k.target] == 1 for k in sampled),
        "notes_stub_lt200": sum(b < STUB for b in bodies.values()),
        "median_note_body_chars": statistics.median(bodies.values()) if bodies else 0,
        "ambiguous_note_name_examples": dict(sorted(shared_names.items())[:5]),
    }
    return qualifying, sampled, counts


def write(
    out: Path, vault: Path, qualifying: list[Link], sampled: list[Link], counts: dict[str, object]
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "queries.jsonl").open("w", encoding="utf-8") as f:
        for k in sampled:
            row = {"source": k.source, "target": k.target, "link_text": k.text, "line": k.line}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    with (out / "links.jsonl").open("w", encoding="utf-8") as f:
        for k in qualifying:
            row = {"source": k.source, "target": k.target, "line": k.line, "text": k.text}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / "stats.json").write_text(
        json.dumps(counts, indent=1, ensure_ascii=False), encoding="utf-8"
    )
    link = out / "vault"
    if link.is_symlink() or not link.exists():
        link.unlink(missing_ok=True)
        link.symlink_to(vault.resolve(), target_is_directory=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    qualifying, sampled, counts = build(args.vault, args.sample, args.seed)
    write(args.out, args.vault, qualifying, sampled, counts)
    print(
        f"{counts['notes']} notes, {counts['qualifying_links']} qualifying links,"
        f" {counts['sampled']} sampled from {counts['sampled_distinct_sources']} sources"
        f" to {counts['sampled_distinct_targets']} targets"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
