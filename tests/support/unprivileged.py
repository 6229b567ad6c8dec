"""Running part of a test (or of the fault benchmark) as a user that file permissions
apply to.

Permissions mean nothing to root, and the suite and CI run as root: there, the checks that
need them run as a system user made once for the purpose (USER), in a forked child or as a
real `kb` process, in a folder that user owns. Run as anyone else, they run as that user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

USER = "kbtest"
# The `kb` command of the project's environment: the same interpreter as the tests.
KB = [sys.executable, "-m", "kb"]


@dataclass(frozen=True)
class Account:
    uid: int
    gid: int
    home: str

    @property
    def switches(self) -> bool:
        return self.uid != os.geteuid()


class NoAccount(Exception):
    """Root, and no user can be made to run as."""


def current() -> Account:
    return Account(os.geteuid(), os.getegid(), os.path.expanduser("~"))


def account() -> Account:
    """Who runs the unprivileged parts: this user, or USER (made if missing) under root;
    NoAccount when root cannot make one."""
    if os.geteuid() != 0:
        return current()
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise NoAccount(
                "running as root, and no useradd to make an unprivileged user"
            ) from None
        made = subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            capture_output=True,
            text=True,
        )
        if made.returncode not in (0, 9):  # 9: made meanwhile by another test process
            raise NoAccount(
                f"running as root, and no unprivileged user: {made.stderr.strip()}"
            ) from None
        entry = pwd.getpwnam(USER)
    _reachable(Path(os.path.realpath(sys.executable)))
    return Account(entry.pw_uid, entry.pw_gid, entry.pw_dir)


def _reachable(interpreter: Path) -> None:
    """Let other users reach the interpreter where it lives under a private folder (a
    pyenv under /root): each folder above it gets the traverse bit only, as the embedded
    PostgreSQL does for its data when run as root (see kb.db), so none becomes listable."""
    for folder in interpreter.parents:
        mode = stat.S_IMODE(folder.stat().st_mode)
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)


def workdir(who: Account, prefix: str = "kb-unpriv-") -> Path:
    """A new folder that `who` owns, outside any folder private to root (pytest's tmp_path
    is under one)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if who.switches:
        os.chown(path, who.uid, who.gid)
    return path


def remove(path: Path) -> None:
    """A work folder removed, whatever its owner left unreadable in it."""
    subprocess.run(["chmod", "-R", "u+rwx", str(path)], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def run(
    who: Account, args: list[str], env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """A command run as `who`, its output captured."""
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, **options(who, env)
    )


def start(who: Account, args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A command started as `who`, in the background, its stderr appended to `log`."""
    with log.open("ab") as err:
        return subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            **options(who, env),
        )


def options(who: Account, env: dict[str, str]) -> dict:
    """subprocess options that run a command as `who`, with `env`."""
    chosen: dict = {"env": {**env, "HOME": env.get("HOME", who.home)}}
    if who.switches:
        chosen.update(user=who.uid, group=who.gid, extra_groups=[])
    return chosen


def as_user(who: Account, check: Callable[[], None]) -> None:
    """`check` run as `who` in a forked child; what it raises is an AssertionError here,
    with the child's traceback."""
    if not who.switches:
        check()
        return
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave, never return into pytest
        os.close(read)
        code = 0
        try:
            os.setgroups([])
            os.setgid(who.gid)
            os.setuid(who.uid)
            check()
        except BaseException:
            os.write(write, traceback.format_exc().encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        report = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise AssertionError(f"as uid {who.uid}:\n{report}")
