"""The embedded PostgreSQL keeps kb's data private: no TCP listener, a socket only inside
its own data directory, and no folder above it made listable by other users, even as root."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import psycopg
import pytest

from kb.db import embedded_url
from kb.errors import DatabaseError
from kb.store.schema import migrate

TRAVERSE = stat.S_IXGRP | stat.S_IXOTH


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _readable_by_others_mode(mode: int) -> bool:
    return bool(mode & (stat.S_IRGRP | stat.S_IROTH))


def _readable_by_others(path: Path) -> bool:
    return _readable_by_others_mode(_mode(path))


def test_a_data_dir_too_long_for_a_private_socket_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / ("d" * (110 - len(os.fsencode(tmp_path))))
    with pytest.raises(DatabaseError, match="too long for the embedded PostgreSQL's private"):
        embedded_url(data_dir)
    assert not data_dir.exists(), "nothing was started or created"


def test_embedded_server_keeps_its_data_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    home.chmod(0o700)
    watched = {p: _mode(p) for p in [home, *home.parents]}
    data_dir = home / "kb"
    url = embedded_url(data_dir)
    pgdata = data_dir / "pgdata"
    try:
        # As root, pgserver had made every folder above the data readable by all; each gets its
        # mode back, but for the traverse bits the server needs to reach its files.
        for folder, mode in watched.items():
            assert _mode(folder) & ~TRAVERSE == mode & ~TRAVERSE, folder
            assert not _readable_by_others(folder) or _readable_by_others_mode(mode), folder
        assert _mode(data_dir) & ~TRAVERSE == 0o700
        assert _mode(pgdata) & 0o077 == 0
        with psycopg.connect(url) as conn:
            listen = conn.execute("SHOW listen_addresses").fetchone()
            sockets = conn.execute("SHOW unix_socket_directories").fetchone()
        assert listen == ("",), "no TCP listener"
        assert sockets is not None and Path(sockets[0]).resolve() == pgdata.resolve()
        # A new backend still loads pgvector from pgserver's installation, and the server still
        # reaches its own files by their full path (a checkpoint writes global/pg_control).
        assert migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        import pgserver

        pgserver.get_server(pgdata).cleanup()
