"""kb's own embedded PostgreSQL as users run it: in a data folder whose name has spaces and
accents (macOS's `~/Library/Application Support/kb`), failing to start or running out of disk
in one line, and stopped by the last kb process to hold it, however that process ends."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
import pytest

from kb.note_writing.bulk import BULK_LOAD_NOTES
from support.cli import kb_command, run_kb
from support.configs import write_config
from support.paths import EXAMPLE_VAULT


def _config(tmp_path: Path, vault: Path, data_dir: Path) -> Path:
    return write_config(
        tmp_path / "kb.toml", vault, name="example", personal=(), data_dir=str(data_dir)
    )


def _env() -> dict[str, str]:
    hidden = ("KB_DATABASE_URL", "KB_DATA_DIR", "KB_CONFIG")
    return {**{k: v for k, v in os.environ.items() if k not in hidden}, "COLUMNS": "200"}


def _kb(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_kb(config, _env(), *args)


def _holders(pgdata: Path) -> list[int]:
    """The processes pgserver lists as holding the server. It rewrites the list in place
    under its own lock, so a read without that lock may find it empty for a moment."""
    try:
        return json.loads((pgdata / ".handle_pids.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return []


def _postmaster(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


def _gone(pid: int, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder with a short path: the server's socket path must fit in 103 bytes."""
    path = Path(tempfile.mkdtemp(prefix="kb-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def data_dir(short_tmp: Path) -> Path:
    """A data folder shaped like macOS's default, with a quote and brackets as well."""
    return short_tmp / "Application Support" / "kb données (l'été)"


@pytest.fixture
def config(tmp_path: Path, data_dir: Path) -> Path:
    return _config(tmp_path, EXAMPLE_VAULT, data_dir)


def test_a_data_dir_with_spaces_and_accents_runs_the_embedded_server(
    config: Path, data_dir: Path
) -> None:
    result = _kb(config, "index")
    assert result.returncode == 0, result.stderr
    assert "15 files: 15 indexed" in result.stderr
    checked = _kb(config, "verify")
    assert checked.returncode == 0 and "in sync" in checked.stderr, checked.stderr
    pgdata = data_dir / "pgdata"
    assert not (pgdata / "postmaster.pid").exists(), "the last kb process stopped it"
    assert _holders(pgdata) == []


def test_a_data_dir_postgresql_cannot_name_is_refused_in_one_line(
    tmp_path: Path, short_tmp: Path
) -> None:
    data_dir = short_tmp / "kb, notes"
    result = _kb(_config(tmp_path, EXAMPLE_VAULT, data_dir), "status")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: the embedded PostgreSQL cannot run in {data_dir / 'pgdata'}: PostgreSQL's "
        "tools cannot pass ',' in a folder name; choose another data_dir"
    ]
    assert not (data_dir / "pgdata").exists()


def test_a_server_that_will_not_start_is_one_line(config: Path, data_dir: Path) -> None:
    assert _kb(config, "status").returncode == 0
    pgdata = data_dir / "pgdata"
    with (pgdata / "postgresql.conf").open("a") as conf:
        conf.write("\nshared_buffers = plenty\n")
    result = _kb(config, "status")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f'configuration file "{pgdata / "postgresql.conf"}" contains errors' in lines[0]
    assert f"(server log: {pgdata / 'log'})" in lines[0]
    assert not (pgdata / "postmaster.pid").exists()


@pytest.fixture
def small_disk(short_tmp: Path) -> Iterator[Path]:
    """A 128 MB file system of its own (a tmpfs: mounting one needs root)."""
    mount = short_tmp / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=128m,mode=0755", "tmpfs", str(mount)],
        capture_output=True,
    )
    if made.returncode != 0:
        pytest.skip("cannot mount a small file system here (needs root)")
    try:
        yield mount
    finally:
        for proc in psutil.process_iter(["name", "cmdline"]):
            if proc.info["name"] == "postgres" and str(mount) in " ".join(
                proc.info["cmdline"] or []
            ):
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        time.sleep(0.5)
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as f:
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


def test_a_full_disk_is_one_line_and_loses_nothing(
    tmp_path: Path, vault: Path, small_disk: Path
) -> None:
    data_dir = small_disk / "kb"
    config = _config(tmp_path, vault, data_dir)
    assert _kb(config, "index").returncode == 0
    # Hold the server while the disk fills, so that the next run's writes fail mid-run.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, pathlib; from kb.db import embedded_url;"
         "embedded_url(pathlib.Path(sys.argv[1])); print('up', flush=True); sys.stdin.read()",
         str(data_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "up\n"
    for i in range(20):
        (vault / f"long {i}.md").write_text(("# Long\n\n" + "Lorem ipsum. " * 4000 + "\n\n") * 4)
    filler = _fill(small_disk)
    failed = _kb(config, "index")
    holder.communicate("", timeout=60)
    assert failed.returncode == 1
    lines = failed.stderr.strip().splitlines()
    full = f"the disk holding {data_dir} is full ("
    assert len(lines) == 1 and lines[0].startswith(f"error: {full}"), lines
    # Nothing holds the server now: starting it on the full disk fails in one line too.
    again = _kb(config, "status")
    assert again.returncode == 1
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and full in lines[0], lines
    filler.unlink()
    done = _kb(config, "index")
    assert done.returncode == 0, done.stderr
    checked = _kb(config, "verify")
    assert checked.returncode == 0 and "35 notes on disk, 35 rows in the index: in sync" in (
        checked.stderr
    ), checked.stdout + checked.stderr


def test_a_full_disk_under_a_database_server_is_one_line(
    tmp_path: Path, vault: Path, db_url: str
) -> None:
    config = _config(tmp_path, vault, tmp_path / "data")
    env = {**_env(), "KB_DATABASE_URL": db_url}
    assert run_kb(config, env, "index").returncode == 0
    with psycopg.connect(db_url, autocommit=True) as conn:
        # What PostgreSQL says when it cannot extend a table's file (SQLSTATE 53100).
        conn.execute(
            "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE"
            " EXCEPTION 'could not extend file: No space left on device' USING ERRCODE ="
            " 'disk_full'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER disk_full BEFORE INSERT ON chunks"
            " FOR EACH ROW EXECUTE FUNCTION disk_full()"
        )
    (vault / "new.md").write_text("# New\n\nA new note.\n")
    failed = run_kb(config, env, "index")
    assert failed.returncode == 1
    *progress, said = failed.stderr.strip().splitlines()
    assert all(line.startswith("indexing ") for line in progress), progress
    assert said == (
        "error: the database server's disk is full: could not extend file: No space left on device"
    )


def test_a_full_disk_while_the_text_index_is_built_is_one_line(tmp_path: Path, db_url: str) -> None:
    vault = tmp_path / "many"
    vault.mkdir()
    for i in range(BULK_LOAD_NOTES):
        (vault / f"note {i}.md").write_text(f"# Note {i}\n\nThe {i}th of many short notes.\n")
    config = _config(tmp_path, vault, tmp_path / "data")
    with psycopg.connect(db_url, autocommit=True) as conn:
        # The build of the postings' B-tree after a bulk load is what finds the disk full.
        conn.execute(
            "CREATE FUNCTION disk_full() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF current_query() LIKE '%text_postings_order%' THEN RAISE EXCEPTION"
            " 'could not extend file: No space left on device' USING ERRCODE = 'disk_full';"
            " END IF; END $$"
        )
        conn.execute(
            "CREATE EVENT TRIGGER disk_full ON ddl_command_end WHEN TAG IN ('CREATE INDEX')"
            " EXECUTE FUNCTION disk_full()"
        )
    failed = run_kb(config, {**_env(), "KB_DATABASE_URL": db_url}, "index")
    assert failed.returncode == 1
    *progress, said = failed.stderr.strip().splitlines()
    assert all(line.startswith("indexing ") for line in progress), progress
    assert said == (
        "error: the database server's disk is full: could not extend file: No space left on device"
    )


def test_a_tmpdir_others_may_write_to_is_one_line(tmp_path: Path, vault: Path) -> None:
    if Path(f"/run/user/{os.getuid()}").is_dir():
        pytest.skip("this machine has a runtime folder: the temporary folder is not used")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by anyone, and not sticky
    env = {**{k: v for k, v in _env().items() if k != "XDG_RUNTIME_DIR"}, "TMPDIR": str(shared)}
    result = run_kb(_config(tmp_path, vault, tmp_path / "data"), env, "index")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: cannot start the embedded PostgreSQL: runtime directory")
    assert "set XDG_RUNTIME_DIR" in lines[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _held_by(proc: subprocess.Popen[Any], pgdata: Path, port: int | None) -> None:
    deadline = time.monotonic() + 60
    while proc.pid not in _holders(pgdata):
        assert proc.poll() is None and time.monotonic() < deadline, "never held the server"
        time.sleep(0.1)
    while port is not None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            break
        assert time.monotonic() < deadline, "never listened"
        time.sleep(0.1)
    time.sleep(0.5)  # well into its run: serving, or waiting for work


@pytest.mark.parametrize(
    ("command", "stop"),
    [
        (["mcp"], signal.SIGTERM),
        (["mcp"], signal.SIGINT),
        (["mcp", "--http"], signal.SIGTERM),
        (["worker"], signal.SIGTERM),
        # The terminal closed.
        (["serve"], signal.SIGHUP),
        (["mcp"], signal.SIGHUP),
        (["worker"], signal.SIGHUP),
        (["daemon"], signal.SIGHUP),
    ],
    ids=[
        "mcp-stdio-term",
        "mcp-stdio-int",
        "mcp-http-term",
        "worker-term",
        "serve-hup",
        "mcp-stdio-hup",
        "worker-hup",
        "daemon-hup",
    ],
)
def test_a_stopped_command_stops_the_embedded_server(
    config: Path, data_dir: Path, command: list[str], stop: signal.Signals
) -> None:
    port = _free_port() if "--http" in command or command == ["serve"] else None
    args = [*command, "--port", str(port)] if port else command
    proc = subprocess.Popen(
        kb_command(config, *args),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(),
    )  # fmt: skip
    pgdata = data_dir / "pgdata"
    try:
        _held_by(proc, pgdata, port)
        postmaster = _postmaster(pgdata)
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert _gone(postmaster), "the embedded PostgreSQL outlived the last kb process"
    assert _holders(pgdata) == [] and not (pgdata / "postmaster.pid").exists()


def test_a_killed_holder_does_not_keep_the_server_running(config: Path, data_dir: Path) -> None:
    pgdata = data_dir / "pgdata"
    proc = subprocess.Popen(
        kb_command(config, "mcp"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
    )  # fmt: skip
    try:
        _held_by(proc, pgdata, None)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    postmaster = _postmaster(pgdata)
    assert _holders(pgdata) == [proc.pid] and not _gone(postmaster, within=1)
    # The next kb process forgets the dead one, and so is the last to hold the server.
    assert _kb(config, "status").returncode == 0
    assert _gone(postmaster)
    assert _holders(pgdata) == []


def _started_again(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "started again" in line]


def _kill_the_server(pgdata: Path) -> int:
    """The embedded PostgreSQL killed outright, as the OOM killer does; its pid."""
    postmaster = _postmaster(pgdata)
    os.kill(postmaster, signal.SIGKILL)
    assert _gone(postmaster)
    return postmaster


def _until(done: Any, what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not done():
        assert time.monotonic() < deadline, f"not {what} after {within:.0f} s"
        time.sleep(0.1)


def test_kb_serve_starts_a_killed_embedded_server_again(
    tmp_path: Path, config: Path, data_dir: Path
) -> None:
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            kb_command(config, "serve", "--port", str(port)),
            stdout=subprocess.DEVNULL, stderr=err, env=_env(),
        )  # fmt: skip
    pgdata = data_dir / "pgdata"
    page = f"http://127.0.0.1:{port}/api/status"
    try:
        _held_by(proc, pgdata, port)
        assert httpx.get(page, timeout=10).status_code == 200
        killed = _kill_the_server(pgdata)
        _until(lambda: _started_again(log), "started again")
        started = time.monotonic()
        assert httpx.get(page, timeout=30).status_code == 200
        assert time.monotonic() - started < 10, "the page took long to answer again"
        assert _postmaster(pgdata) != killed
    except BaseException:
        proc.kill()
        raise
    _stopped_after_one_restart(proc, log, pgdata)


def _stopped_after_one_restart(proc: subprocess.Popen[bytes], log: Path, pgdata: Path) -> None:
    """Stop a kb process that started the killed server again: it exits cleanly, having said
    so once, and the restarted server does not outlive it."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    said = log.read_text()
    assert proc.returncode == 0, said
    assert len(_started_again(log)) == 1 and "Traceback" not in said, said
    assert not (pgdata / "postmaster.pid").exists(), "the restarted server outlived kb"


def test_kb_daemon_starts_a_killed_embedded_server_again(
    tmp_path: Path, vault: Path, short_tmp: Path
) -> None:
    data_dir = short_tmp / "data"
    config = _config(tmp_path, vault, data_dir)
    log = tmp_path / "daemon.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            kb_command(config, "daemon"), stdout=subprocess.DEVNULL, stderr=err, env=_env()
        )
    pgdata = data_dir / "pgdata"
    try:
        _until(lambda: "reconciliation done" in log.read_text(), "reconciled", within=120)
        _kill_the_server(pgdata)
        _until(lambda: _started_again(log), "started again")
        (vault / "Lighthouse.md").write_text("# Lighthouse\n\nThe keeper waved.\n")
        _until(lambda: "path=Lighthouse.md" in log.read_text(), "indexed the new note")
    except BaseException:
        proc.kill()
        raise
    _stopped_after_one_restart(proc, log, pgdata)
    # The pool's retries while the server was away are kb's one line, not one each.
    assert "src=psycopg" not in log.read_text()


def test_a_server_killed_as_kb_exits_is_no_traceback(short_tmp: Path) -> None:
    # The server killed by the time kb stops it at exit, though seen running an instant
    # before (a `kb index` whose B-tree build failed as the server was killed, say).
    script = (
        "import os, signal, sys, time; from pathlib import Path; import psutil;"
        " from pgserver.utils import PostmasterInfo; from kb.db import embedded_url;"
        " data = Path(sys.argv[1]); embedded_url(data);"
        " pid = int((data / 'pgdata/postmaster.pid').read_text().split()[0]);"
        " psutil.Process.is_running = lambda self: True;"
        " PostmasterInfo.is_running = lambda self: True;"
        " os.kill(pid, signal.SIGKILL); time.sleep(1)"
    )
    ended = subprocess.run(
        [sys.executable, "-c", script, str(short_tmp / "data")],
        capture_output=True, text=True, env=_env(), timeout=120,
    )  # fmt: skip
    assert ended.returncode == 0 and "Traceback" not in ended.stderr, ended.stderr


@pytest.mark.parametrize("command", ["status", "index"])
def test_a_data_dir_name_too_long_for_the_file_system_is_one_line(
    tmp_path: Path, short_tmp: Path, command: str
) -> None:
    data_dir = short_tmp / ("d" * 300)
    result = _kb(_config(tmp_path, EXAMPLE_VAULT, data_dir), command)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert f"data_dir {data_dir}" in lines[0], lines


def test_threads_take_pgservers_lock_in_turns() -> None:
    """A keeper thread and an exit both take pgserver's one lock of the process: one waits
    for the other, and neither release fails under the other."""
    import threading

    from kb.embedded import PostgresServer

    lock = PostgresServer._lock
    inside, leave = threading.Event(), threading.Event()
    order: list[str] = []

    def keeper() -> None:
        with lock:
            order.append("keeper in")
            inside.set()
            leave.wait(10)
            order.append("keeper out")

    thread = threading.Thread(target=keeper)
    thread.start()
    assert inside.wait(10)
    timer = threading.Timer(0.2, leave.set)
    timer.start()
    with lock, lock:  # entered twice, as pgserver's start does
        order.append("main in")
    thread.join()
    assert order == ["keeper in", "keeper out", "main in"]
