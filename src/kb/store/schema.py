"""The schema brought up to date: the migrations of `migrations/`, each applied once, in
order, under one lock, so processes that start together apply none twice."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import psycopg

from kb.errors import DatabaseError, first_line

log = logging.getLogger(__name__)

# Any constant works; it only has to be the same for every kb process.
_MIGRATION_LOCK = 0x6B62_6D69


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    """The ordered SQL files of `migrations/` (shipped inside the package when installed)."""
    checkout = Path(__file__).parents[3]
    packaged = resources.files("kb") / "migrations"
    # In a source checkout (an editable install), the copy made at install time goes stale
    # as soon as a migration is added: the checkout's own folder wins.
    if (checkout / "pyproject.toml").is_file() and (checkout / "migrations").is_dir():
        folder: Traversable = checkout / "migrations"
    else:
        folder = packaged
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d+)_(\w+)\.sql", entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text()))
    return sorted(found, key=lambda m: m.version)


def migrate(url: str) -> list[int]:
    """Apply pending migrations exactly once; safe when several processes start together."""
    applied_now = []
    try:
        with psycopg.connect(url, autocommit=False) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            for m in migrations():
                if m.version in done:
                    continue
                log.info("applying migration %03d_%s", m.version, m.name)
                conn.execute(m.sql.encode())
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (m.version, m.name),
                )
                applied_now.append(m.version)
            conn.commit()
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"cannot connect to the database: {first_line(exc)}") from None
    except psycopg.Error as exc:
        raise DatabaseError(f"database migration failed: {first_line(exc)}") from None
    return applied_now
