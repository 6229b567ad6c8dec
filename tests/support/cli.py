"""The `kb` command run as users run it: a whole process on a config file."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def kb_command(config: Path, *args: str) -> list[str]:
    """The command line of a whole `kb` process on a config file."""
    return [sys.executable, "-m", "kb", "--config", str(config), *args]


def run_kb(config: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A whole `kb` process on a config file, run to its end, its output captured."""
    return subprocess.run(
        kb_command(config, *args), capture_output=True, text=True, env=dict(env), timeout=300
    )


def run_cli(config: Path, db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """run_kb in this process's environment on the database at `db_url`, wide enough for
    the tables to keep their lines."""
    return run_kb(config, {**os.environ, "KB_DATABASE_URL": db_url, "COLUMNS": "200"}, *args)
