"""Shared fixtures: a real PostgreSQL (embedded, or KB_TEST_DATABASE_URL), a fresh
database per test, example vaults, kb wired to the counting fake provider, and scripted
model servers. What tests import lives in support/."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from kb.container import open_store
from kb.store import Store
from kb.store.schema import migrate
from support import llm_server
from support.configs import make_config, summaries_config, write_config
from support.fake_kb import Kb
from support.linked_vault import write_linked_vault
from support.llm_server import Stub
from support.paths import EXAMPLE_VAULT

_db_names = itertools.count()


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """One server per test session."""
    if url := os.environ.get("KB_TEST_DATABASE_URL"):
        yield url
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        tmp = Path(tempfile.mkdtemp(prefix="kb-test-pg-"))
        server = pgserver.get_server(tmp / "pgdata", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _database(admin_url: str, name: str, *, template: str | None = None) -> Iterator[str]:
    """Database `name` (a copy of `template`, when given) for as long as the block runs."""
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        create += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(create)
    try:
        yield make_conninfo(admin_url, dbname=name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture(scope="session")
def migrated_template(pg_admin_url: str) -> Iterator[str]:
    """The name of a database migrated once per test session, which each test's database is
    copied from: a copy takes milliseconds, replaying every migration most of a second."""
    name = f"kb_test_{os.getpid()}_template"
    with _database(pg_admin_url, name) as url:
        migrate(url)
        yield name


@pytest.fixture
def db_url(pg_admin_url: str, migrated_template: str) -> Iterator[str]:
    """A new database for one test, its schema up to date, dropped afterwards."""
    name = f"kb_test_{os.getpid()}_{next(_db_names)}"
    with _database(pg_admin_url, name, template=migrated_template) as url:
        yield url


@pytest.fixture
def blank_db_url(pg_admin_url: str) -> Iterator[str]:
    """A new, empty database for one test (no schema: for the tests of migrating one)."""
    with _database(pg_admin_url, f"kb_test_{os.getpid()}_{next(_db_names)}") as url:
        yield url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with open_store(db_url) as s:
        yield s


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A private copy of the example vault, free to edit."""
    target = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, target)
    return target


@pytest.fixture
def kb(store: Store, vault: Path, request: pytest.FixtureRequest) -> Kb:
    """kb on the test's store and vault: make_config's, with the sections of the test's
    `kb_config` marker over it (a module sets it in `pytestmark`)."""
    marker = request.node.get_closest_marker("kb_config")
    return Kb(store, make_config(vault, **(marker.kwargs if marker else {})))


@pytest.fixture
def indexed(kb: Kb) -> Kb:
    """kb with the vault synced, its counters back at zero."""
    kb.sync()
    kb.reset_counts()
    return kb


@pytest.fixture
def summaries_kb(store: Store, vault: Path) -> Kb:
    """kb at the summaries' setting (SUMMARIES)."""
    return Kb(store, summaries_config(vault))


@pytest.fixture
def cfg(tmp_path: Path, vault: Path) -> Path:
    """The config file of a whole `kb` process on the example vault (named "example")."""
    return write_config(tmp_path / "kb.toml", vault, name="example")


@pytest.fixture
def linked_vault(tmp_path: Path) -> Path:
    """The small vault of linked notes (support.linked_vault)."""
    return write_linked_vault(tmp_path / "linked")


@pytest.fixture
def linked_kb(linked_vault: Path, store: Store) -> Kb:
    """kb on the linked vault with structural context only, synced."""
    kb = Kb(store, make_config(linked_vault, context={"summaries": "structure"}))
    kb.sync()
    return kb


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's models from the environment: the offline fakes."""
    for name, value in {
        "KB_PROVIDER": "fake",
        "KB_CHAT_MODEL": "fake-chat",
        "KB_EMBED_MODEL": "hash-256",
    }.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def stub() -> Iterator[Stub]:
    """A scripted model server (support.llm_server)."""
    with llm_server.scripted() as s:
        yield s


@pytest.fixture
def dead_url() -> str:
    """A loopback port with nothing listening on it."""
    return llm_server.dead_url()
