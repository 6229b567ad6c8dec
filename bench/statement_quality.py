"""How well the model's statements cover a dataset's reference facts, and how they read.

    .venv/bin/python bench/statement_quality.py ../shared/eval/personal-dev \\
        [--levels statements+paragraphs,reference+paragraphs] [--data-dir ~/.cache/kb/bench]

Reads the statements `bench/retrieval.py` stored at each level (no model call) and compares
them with the dataset's reference facts (`observations.jsonl`, bench.reference):

- statements kept per chunk, and how many are near copies of a line of the chunk (80% of
  their words in one line: a line re-labelled, not a fact restated);
- coverage: the share of reference facts that a statement of their chunk restates (half of
  the fact's content words in one statement);
- attribution: of those, the share whose statement does not name the person the fact is
  about (a fact given to the wrong person, or to no one).

Recall says what the statements buy; these say why, apart from kb's search.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kb import db
from kb.container import open_store
from kb.store import databases
from reference import Fact, FactFinder, load_facts
from retrieval import _database, load_dataset

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "the and for with that this was were has have had his her their they them she him are "
    "is be been being to of in on at by from as it its an a or but not so about into also "
    "which who what when where how after before during says said".split()
)
# A statement restates a fact when it holds half of the fact's content words.
RESTATES = 0.5
# A statement is a near copy when this share of its words is in one line of the chunk.
COPIES = 0.8


def content_words(text: str) -> set[str]:
    return {w.rstrip("s") for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def restates(statement: str, fact: Fact) -> bool:
    wanted = content_words(fact.text)
    return bool(wanted) and len(wanted & content_words(statement)) >= RESTATES * len(wanted)


def near_copy(statement: str, lines: Sequence[str]) -> bool:
    said = _WORD.findall(statement.lower())
    return bool(said) and any(
        sum(w in set(_WORD.findall(line.lower())) for w in said) >= COPIES * len(said)
        for line in lines
    )


@dataclass
class Quality:
    chunks_with_statements: int = 0
    statements: int = 0
    near_copies: int = 0
    facts: int = 0
    covered: int = 0
    misattributed: int = 0

    def summary(self) -> dict[str, float]:
        return {
            **asdict(self),
            "statements_per_chunk": self.statements / max(1, self.chunks_with_statements),
            "near_copy_share": self.near_copies / max(1, self.statements),
            "coverage": self.covered / max(1, self.facts),
            "misattributed_share": self.misattributed / max(1, self.covered),
        }


def judge(folder: Path, level: str, data_dir: Path) -> Quality:
    dataset = load_dataset(folder)
    facts = load_facts(folder)
    server = db.embedded_url(data_dir)
    quality = Quality()
    for vault in dataset.vaults:
        finder = FactFinder(vault.path, vault.prefix, vault.files, facts)
        quality.facts += sum(f.file.startswith(vault.prefix) for f in facts)
        with open_store(
            databases.database_on(server, _database(dataset.name, vault.name, level))
        ) as s:
            written = s.passages.of_kind("statement")
        for chunk in written:
            quality.chunks_with_statements += 1
            quality.statements += len(chunk.texts)
            lines = [line for line in chunk.content.splitlines() if line.strip()]
            quality.near_copies += sum(near_copy(t, lines) for t in chunk.texts)
            for fact in finder.facts_of(chunk.content, chunk.path) or ():
                matching = [t for t in chunk.texts if restates(t, fact)]
                if matching:
                    quality.covered += 1
                    first_name = fact.about.split()[0].lower()
                    named = any(first_name in t.lower() for t in matching)
                    quality.misattributed += not named
    return quality


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="a dataset folder with observations.jsonl")
    parser.add_argument("--levels", default="statements+paragraphs,reference+paragraphs")
    parser.add_argument("--data-dir", type=Path, default=Path.home() / ".cache/kb/bench")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not load_facts(args.dataset):
        parser.error(f"{args.dataset} has no reference facts")
    figures = {
        level: judge(args.dataset, level, args.data_dir).summary()
        for level in args.levels.split(",")
    }
    head = f"{'level':<26}{'chunks':>7}{'stmts':>7}{'/chunk':>7}{'copies':>8}"
    print(head + f"{'facts':>7}{'coverage':>9}{'wrong who':>10}")
    for level, f in figures.items():
        print(
            f"{level:<26}{f['chunks_with_statements']:>7}{f['statements']:>7}"
            f"{f['statements_per_chunk']:>7.1f}{f['near_copy_share']:>8.2f}{f['facts']:>7}"
            f"{f['coverage']:>9.2f}{f['misattributed_share']:>10.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
