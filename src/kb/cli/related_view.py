"""Related notes on a terminal, as `kb related` prints them: from the object `--json` prints,
in the `kb` process that found them or in the launcher a daemon answered (see
kb.daemon.query_socket), so that both print the same."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from kb.terminal import printable


def related_json(found: dict[str, Any]) -> str:
    """`kb related --json`'s output."""
    return json.dumps(found, ensure_ascii=False, indent=2) + "\n"


def print_related(out: Console, found: dict[str, Any], *, explain: bool) -> None:
    lines = found["lines"]
    where = f":{lines[0]}-{lines[1]}" if lines else ""
    out.print(
        f"related to {printable(found['vault'])}/{printable(found['path'])}{where}", markup=False
    )
    if not found["related"]:
        out.print("  no related notes", markup=False)
    for n, hit in enumerate(found["related"], 1):
        out.print(f"{n:>3}. {printable(hit['path'])}  {hit['score']:.2f}", markup=False)
        if hit["why"]:
            out.print(f"     {printable('; '.join(hit['why']))}", markup=False)
        if explain:
            lifts = hit.get("lifts", {})
            shown = ", ".join(f"{k} {v:+.2f}" for k, v in lifts.items() if abs(v) >= 0.005)
            out.print(f"     {shown}", markup=False)
    for label, key in (("links to", "links_to"), ("linked from", "linked_from")):
        names = sorted({r.get("path") or r["target"] for r in found[key]})
        out.print(f"{label}: {printable(', '.join(names)) or '-'}", markup=False)
    if found["unresolved"]:
        missing = ", ".join(sorted({r["target"] for r in found["unresolved"]}))
        out.print(f"unresolved: {printable(missing)}", markup=False)
