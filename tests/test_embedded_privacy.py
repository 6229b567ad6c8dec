"""The embedded PostgreSQL keeps kb's data private: no TCP listener, a socket only inside
its own data directory, and no folder above it opened to other users, even as root."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import psycopg
import pytest

from kb.db import embedded_url, migrate
from kb.errors import DatabaseError


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


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
    # Stopped when the test session exits, as kb's own processes do.
    url = embedded_url(data_dir)
    pgdata = data_dir / "pgdata"
    # Every folder above the data keeps its mode (as root, pgserver had opened them).
    assert {p: _mode(p) for p in watched} == watched
    assert _mode(data_dir) == 0o700
    assert _mode(pgdata) & 0o077 == 0
    with psycopg.connect(url) as conn:
        listen = conn.execute("SHOW listen_addresses").fetchone()
        sockets = conn.execute("SHOW unix_socket_directories").fetchone()
    assert listen == ("",), "no TCP listener"
    assert sockets is not None and Path(sockets[0]).resolve() == pgdata.resolve()
    # A new backend still loads pgvector from pgserver's installation.
    assert migrate(url)
