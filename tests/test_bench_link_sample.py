"""bench/link_sample.py: which written links qualify for a related-notes set."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_link_sample", ROOT / "bench/link_sample.py")
assert _spec and _spec.loader
link_sample = importlib.util.module_from_spec(_spec)
sys.modules["bench_link_sample"] = link_sample
_spec.loader.exec_module(link_sample)


def test_a_link_qualifies_once_written_once_to_another_note(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / "sub").mkdir(parents=True)
    for name in ("B", "C", "D", "E", "sub/F"):
        (vault / f"{name}.md").write_text("a note\n", encoding="utf-8")
    (vault / "A.md").write_text(
        "---\nrelated: [[E]]\n---\n"  # front matter: not the body's link
        "See [[B]] and [[C|the C note]].\n"
        "Then [[D]], and [[D#Part|D again]]: a pair written twice.\n"
        "`[[E]]` is syntax, and so is\n```\n[[E]]\n```\n"
        "[[sub/F]] by its path, [[A]] itself, [[Missing]].\n"
        "![[C]] embeds C: the pair A to C is written twice.\n",
        encoding="utf-8",
    )
    (vault / "B.md").write_text("[[A]] [[C]]\n", encoding="utf-8")  # under 3 targets
    out = tmp_path / "set"
    assert link_sample.main([str(vault), str(out), "--sample", "1"]) == 0
    links = [json.loads(line) for line in (out / "links.jsonl").read_text().splitlines()]
    assert [(k["source"], k["target"], k["line"]) for k in links] == [
        ("A.md", "B.md", 4),
        ("A.md", "sub/F.md", 10),
    ]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["dropped_pair_not_unique"] == 3  # both links to D, the one to C
    assert stats["dropped_source_has_lt3_targets"] == 2
    assert stats["wikilinks_self"] == stats["wikilinks_unresolved"] == 1
    (row,) = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    assert row["link_text"] in {"[[B]]", "[[sub/F]]"}
    assert (out / "vault").resolve() == vault.resolve()
