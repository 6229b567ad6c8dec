"""The databases one server holds, for tools that keep several indexes on it (the
benchmarks): one created when missing (or copied from another), one dropped and made empty."""

from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from kb.errors import DatabaseError, first_line


def database_on(url: str, name: str, *, template: str | None = None) -> str:
    """The URL of database `name` on the server at `url`, created if it does not exist (a
    copy of database `template`, when given: no one may be connected to it)."""
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        create += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if exists.fetchone() is None:
                conn.execute(create)
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot create database {name}: {first_line(exc)}") from None
    return make_conninfo(url, dbname=name)


def empty_database(url: str, name: str) -> str:
    """The URL of database `name` on the server at `url`, dropped and created again empty:
    for tools that measure a first index, with nothing cached."""
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(drop)
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot drop database {name}: {first_line(exc)}") from None
    return database_on(url, name)
