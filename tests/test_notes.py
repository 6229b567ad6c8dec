"""Notes on disk: the scan's order, which a full sync walks beside the index's rows."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kb.vault.notes import scan_vault
from support.configs import make_config

# Characters that sort around the slash ("-" and "." before it, "0" and letters after),
# and beyond ASCII, in one and in two UTF-16 units.
NAME = st.text("-. 0aAé😀", max_size=4)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(NAME, min_size=1, max_size=3), min_size=1, max_size=12))
def test_a_vault_is_scanned_in_code_point_order_of_its_paths(paths: list[list[str]]) -> None:
    """The order of `ORDER BY path COLLATE "C"`: "a.md" < "a/b.md" < "a0.md"."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        written = set()
        for parts in paths:
            # Names start alike (dot-files are skipped); a name is a folder or a note.
            folders = [f"x{p}" for p in parts[:-1]]
            target = root.joinpath(*folders, f"x{parts[-1]}.md")
            if any(root.joinpath(*folders[: i + 1]).is_file() for i in range(len(folders))):
                continue
            if target.is_dir():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("# note\n")
            written.add(target.relative_to(root).as_posix())
        scanned = [n.path for n in scan_vault(make_config(root).vaults[0])]
        assert scanned == sorted(written)
