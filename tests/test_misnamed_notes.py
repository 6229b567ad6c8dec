"""A note whose file name is not UTF-8 is listed wherever failed notes are: `kb index`,
`kb status` and `kb verify`, for full and scoped syncs, until it is renamed or deleted."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kb.indexing.verify import verify
from kb.store import Store
from kb.vault.notes import MISNAMED, Scope
from support.cli import run_cli
from support.configs import make_config, write_config
from support.fake_kb import Kb

SHOWN = "caf\\xe9.md"


def _misnamed_vault(tmp_path: Path) -> tuple[Path, bytes]:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "good.md").write_text("# Good\n\nA note about kites.\n")
    name = os.fsencode(vault) + b"/caf\xe9.md"
    with open(name, "wb") as f:
        f.write(b"# Cafe\n\nA note about coffee.\n")
    return vault, name


def test_listed_by_index_status_and_verify(tmp_path: Path, db_url: str) -> None:
    vault, _ = _misnamed_vault(tmp_path)
    cfg = write_config(tmp_path / "kb.toml", vault, name="example")
    indexed = run_cli(cfg, db_url, "index")
    assert indexed.returncode == 3
    assert f"failed: example/{SHOWN}: {MISNAMED}" in indexed.stderr
    status = json.loads(run_cli(cfg, db_url, "status", "--json").stdout)
    assert [(f["path"], f["error"]) for f in status["failures"]] == [(SHOWN, MISNAMED)]
    assert SHOWN in run_cli(cfg, db_url, "status").stdout
    checked = run_cli(cfg, db_url, "verify", "--json")
    assert checked.returncode == 4
    diffs = json.loads(checked.stdout)["differences"]
    assert [(d["path"], d["kind"]) for d in diffs] == [(SHOWN, "failed")]


def test_scoped_sync_records_and_clears_it(store: Store, tmp_path: Path) -> None:
    vault, name = _misnamed_vault(tmp_path)
    kb_ = Kb(store, make_config(vault))
    config = kb_.config.vaults[0]
    rel = os.fsdecode(name)[len(os.fspath(vault)) + 1 :]
    with kb_.indexer() as indexer:
        report = indexer.sync_scope(config, Scope(frozenset({rel, "good.md"})))
        assert [f.path for f in report.failures] == [SHOWN]
        assert store.documents.failures("v") == {SHOWN: MISNAMED}
        assert [d.path for d in verify(kb_.config, store.documents).differences] == [SHOWN]
        # Renamed: the failure goes, the note is indexed under its new name.
        os.rename(name, vault / "cafe.md")
        indexer.sync_scope(config, Scope(frozenset({rel, "cafe.md"})))
    assert store.documents.failures("v") == {}
    assert set(store.documents.states("v")) == {"good.md", "cafe.md"}
    assert verify(kb_.config, store.documents).in_sync


def test_full_sync_forgets_it_once_deleted(store: Store, tmp_path: Path) -> None:
    vault, name = _misnamed_vault(tmp_path)
    kb_ = Kb(store, make_config(vault))
    assert [f.path for f in kb_.sync().failures] == [SHOWN]
    os.unlink(name)
    assert kb_.sync().failed == 0 and store.documents.failures("v") == {}
    assert verify(kb_.config, store.documents).in_sync
