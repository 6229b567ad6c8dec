"""Shared fixtures: a real PostgreSQL (embedded, or KB_TEST_DATABASE_URL), a fresh
database per test, example vaults, and kb wired to the counting fake provider."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp.types import CallToolResult, TextContent
from psycopg import sql
from psycopg.conninfo import make_conninfo

from kb.config import Config, parse_config
from kb.container import Container, open_store
from kb.llm.fake import FakeChat, FakeEmbedder
from kb.models.base import Embedder
from kb.note_writing.events import SyncReport
from kb.results import SearchResult
from kb.search.hybrid import run
from kb.search.plan import SearchPlan
from kb.store import SearchHit, Store
from kb.store.schema import migrate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_VAULT = ROOT / "examples" / "vault"
OWNER = "Alex Doe"
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


# The file and chunk summaries (`context.writes = ["summaries"]`): a setting, no longer the
# default, and what the tests of their prompts, batches, rewrites and fallbacks read.
SUMMARIES: dict[str, Any] = {"writes": ["summaries"], "passages": "none"}


def summaries_config(vault_path: Path, **sections: Any) -> Config:
    """make_config at the summaries' setting (SUMMARIES), with `sections` over it."""
    context = {**SUMMARIES, **sections.pop("context", {})}
    return make_config(vault_path, context=context, **sections)


def make_config(vault_path: Path, **sections: Any) -> Config:
    raw: dict[str, Any] = {
        "owner_name": OWNER,
        "vaults": [{"name": "v", "path": str(vault_path), "personal": ["Alex/**"]}],
        "llm": {
            "provider": "fake",
            "chat_model": "fake-chat",
            "embed_model": "hash-256",
            "concurrency": 2,
        },
    }
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    return parse_config(raw, base_dir=vault_path.parent, env={})


class Kb(Container):
    """kb's parts on a test database, with the counting fake provider."""

    # Tests read the fakes' counters and swap in fakes that fail on cue, all FakeChat and
    # FakeEmbedder kinds: declared so, the counters type-check where tests read them. A test
    # that puts a real client in their place does it through a plain Container.
    chat: FakeChat
    embedder: FakeEmbedder

    def __init__(self, store: Store, config: Config) -> None:
        super().__init__(
            config,
            store,
            chat=FakeChat("fake-chat"),
            embedder=FakeEmbedder(config.llm.embed_model),
        )

    def sync(self, **options: Any) -> SyncReport:
        """A sync, then every queued note enriched, as `kb index --wait` does: what the
        index holds afterwards is what a sync with the LLM inline would have written."""
        report = super().sync(**options)
        enriched = self.drain()
        report.llm_calls += enriched.llm_calls
        report.fallbacks += enriched.fallbacks
        report.embedded += enriched.embedded
        return report

    def reset_counts(self) -> None:
        self.chat.calls.clear()
        self.embedder.calls = 0
        self.embedder.texts = 0


def kb_command(config: Path, *args: str) -> list[str]:
    """The command line of a whole `kb` process on a config file."""
    return [sys.executable, "-m", "kb", "--config", str(config), *args]


def run_kb(config: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A whole `kb` process on a config file, run to its end, its output captured."""
    return subprocess.run(
        kb_command(config, *args), capture_output=True, text=True, env=dict(env), timeout=300
    )


def search_store(store: Store, embedder: Embedder, plan: SearchPlan) -> SearchResult:
    """A search of a test's store (`kb.search.hybrid.run`, given the repositories it reads)."""
    return run(
        embedder, plan, candidates=store.candidates, vectors=store.vectors, queue=store.queue
    )


def rows(store: Store, query: str, *params: object) -> list[dict[str, Any]]:
    """Rows of a test's own SQL (statements written as literals, as kb's are)."""
    with store.pool.connection() as conn:
        return conn.execute(query, params).fetchall()


def stored_chunks(store: Store, path: str) -> list[dict[str, Any]]:
    """A note's chunk rows, in order."""
    return rows(
        store,
        "SELECT c.* FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE d.path = %s ORDER BY position",
        path,
    )


def tool_text(result: CallToolResult) -> str:
    """The text of a tool's answer: kb's tools answer in text."""
    content = result.content[0]
    assert isinstance(content, TextContent)
    return content.text


def similarity(hit: SearchHit) -> float:
    """A hit's cosine similarity, which every search that embedded the query gives."""
    assert hit.similarity is not None
    return hit.similarity


def file_summaries(chat: FakeChat) -> int:
    """Calls that wrote a file summary: alone, or with the chunk summaries of a short note."""
    return chat.calls["file_summary"] + chat.calls["note_summary"]


@pytest.fixture
def kb(store: Store, vault: Path) -> Kb:
    return Kb(store, make_config(vault))


@pytest.fixture
def summaries_kb(store: Store, vault: Path) -> Kb:
    """kb at the summaries' setting (SUMMARIES)."""
    return Kb(store, summaries_config(vault))


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's models from the environment: the offline fakes."""
    for name, value in {
        "KB_PROVIDER": "fake",
        "KB_CHAT_MODEL": "fake-chat",
        "KB_EMBED_MODEL": "hash-256",
    }.items():
        monkeypatch.setenv(name, value)
