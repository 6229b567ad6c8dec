"""Where kb's own files are: the config file, the data directory, the daemon's sockets.

A leaf module (the standard library and platformdirs only), because the `kb` launcher reads
it before it knows whether it needs anything else.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

import platformdirs


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("kb"))


def find_config_file(explicit: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """`--config`, then `KB_CONFIG`, then the XDG config path."""
    if explicit is not None:
        return explicit
    if value := (os.environ if env is None else env).get("KB_CONFIG"):
        return Path(value)
    return Path(platformdirs.user_config_dir("kb")) / "config.toml"


def config_identity(explicit: Path | None, env: Mapping[str, str]) -> str:
    """What decides the configuration a kb process runs with, as one hash: the config file
    (its absolute path, size and modification time) and kb's own environment variables.

    Two processes with the same identity run the same configuration, so one may answer for
    the other; an edited config file or a different override makes another identity. The
    variables a provider reads (OLLAMA_HOST) are known only once the config is read, so the
    daemon compares those itself (`Config.environment`, kb.daemon.query_socket).
    """
    path = find_config_file(explicit, env).absolute()
    try:
        info = path.stat()
        file: list[object] = [str(path), info.st_size, info.st_mtime_ns, info.st_ino]
    except OSError:
        file = [str(path)]
    overrides = sorted((k, v) for k, v in env.items() if k.startswith("KB_") and k != "KB_CONFIG")
    blob = json.dumps([file, overrides], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()


def socket_dir(env: Mapping[str, str]) -> Path:
    """The private folder of the daemons' query sockets: the user's runtime directory when
    the session has one, else a folder in kb's data directory."""
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "kb"
    return default_data_dir() / "run"


def private_dir(path: Path, *, create: bool) -> bool:
    """Whether `path` is a folder only this user can enter (made so when `create`): a socket
    in any other folder could be another user's, listening for our questions."""
    if create:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return False
    try:
        info = path.lstat()
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and stat.S_IMODE(info.st_mode) & 0o077 == 0
    )
