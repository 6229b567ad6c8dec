"""The database failing under kb: killed mid-index and restarted, a connection terminated
in the middle of a note's transaction, the same during a re-embed from the command line.
Each ends in one clear error at most, and the next run converges with nothing lost."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import psycopg
import pytest

from kb.container import open_store
from kb.errors import KbError
from kb.indexing.verify import verify
from kb.llm.fake import FakeEmbedder
from support.cli import run_cli
from support.configs import make_config, write_config
from support.fake_kb import Kb

# A trigger that makes the backend running it terminate itself, as pg_terminate_backend
# from another session would: the transaction in flight is lost with its connection.
TERMINATE = """
CREATE FUNCTION terminate_me() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.position = 2 THEN
        PERFORM pg_terminate_backend(pg_backend_pid());
        PERFORM pg_sleep(5);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER terminate_me BEFORE {event} ON chunks
    FOR EACH ROW EXECUTE FUNCTION terminate_me();
"""


CLEAN = {"duplicate_documents": 0, "orphan_chunks": 0, "broken_chunk_lists": 0}


def test_connection_terminated_mid_transaction(kb: Kb) -> None:
    kb.sync()
    before = {p: s.content_hash for p, s in kb.store.documents.states("v").items()}
    note = kb.config.vaults[0].path / "Projects" / "Home Server.md"
    note.write_text(note.read_text() + "\n\n## Added\n\nA new section.\n")
    with kb.store.pool.connection() as conn:
        conn.execute(TERMINATE.format(event="INSERT"))
    with pytest.raises(KbError, match="lost the database connection"):
        kb.sync()
    # The note's old version is whole: its transaction was lost, not half-applied.
    assert {p: s.content_hash for p, s in kb.store.documents.states("v").items()} == before
    assert kb.store.documents.row_problems() == CLEAN
    with kb.store.pool.connection() as conn:
        conn.execute("DROP TRIGGER terminate_me ON chunks")
    kb.sync()
    assert verify(kb.config, kb.store.documents).in_sync
    assert kb.store.documents.row_problems() == CLEAN


def _indexed_then_cut_at(tmp_path: Path, vault: Path, db_url: str, event: str) -> Path:
    """The vault indexed through the command line, its config returned; from now on the
    server ends the connection of the next statement that writes chunks by `event`."""
    cfg = write_config(tmp_path / "kb.toml", vault, name="example")
    assert run_cli(cfg, db_url, "index").returncode == 0
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(TERMINATE.format(event=event))
    return cfg


def test_reembed_with_the_connection_cut_is_one_line(
    tmp_path: Path, vault: Path, db_url: str
) -> None:
    cfg = _indexed_then_cut_at(tmp_path, vault, db_url, "UPDATE")
    result = run_cli(cfg, db_url, "reindex", "--embeddings-only")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: database error:"), lines


def test_the_server_gone_in_the_middle_of_a_copy_is_one_line(
    tmp_path: Path, vault: Path, db_url: str
) -> None:
    cfg = _indexed_then_cut_at(tmp_path, vault, db_url, "INSERT")
    # A note's chunks go in by one COPY: one long enough that kb is still sending rows when
    # the server goes (as when a full disk stops it mid-write).
    sections = "".join(
        f"## Part {i}\n\n" + f"Words of part {i}. " * 60 + "\n\n" for i in range(300)
    )
    (vault / "Long.md").write_text("# Long\n\n" + sections)
    result = run_cli(cfg, db_url, "index")
    assert result.returncode == 1
    *progress, said = result.stderr.strip().splitlines()
    assert all(line.startswith("indexing ") for line in progress), result.stderr
    assert said.startswith("error: lost the database connection: "), result.stderr


class OwnServer:
    """A PostgreSQL of this test's own, to crash and start again."""

    def __init__(self, pgdata: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            self.server = pgserver.get_server(pgdata, cleanup_mode="delete")
        self.pgdata = pgdata
        self.url = self.server.get_uri()

    def _pg_ctl(self, *args: str) -> None:
        # Made when pgserver is imported, one function per PostgreSQL program: no stub has it.
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

        pg_ctl(list(args), pgdata=self.pgdata, user=self.server.system_user, timeout=60)

    def crash(self) -> None:
        """Stop at once, without a shutdown checkpoint: the next start recovers from WAL."""
        self._pg_ctl("-m", "immediate", "stop")

    def start(self) -> None:
        log = str(self.pgdata / "log")
        self._pg_ctl("-w", "-o", '-h ""', "-o", f"-k {self.pgdata}", "-l", log, "start")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._pg_ctl("-m", "fast", "stop")


@pytest.fixture
def own_server() -> Iterator[OwnServer]:
    tmp = Path(tempfile.mkdtemp(prefix="kb-fault-pg-"))
    server = OwnServer(tmp / "pgdata")
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


class CrashesTheDatabase(FakeEmbedder):
    """Crashes the database server at one embedding call, and starts it again a moment
    later, while the indexer carries on."""

    def __init__(self, server: OwnServer, at_call: int) -> None:
        super().__init__("hash-256")
        self.server = server
        self.at_call = at_call
        self.restarted = threading.Event()
        self._firing = threading.Lock()
        self._fired = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = super().embed(texts)
        # Embedding calls run side by side: exactly one of them crashes the server.
        with self._firing:
            fire = not self._fired and self.calls >= self.at_call
            self._fired = self._fired or fire
        if fire:
            self.server.crash()
            threading.Thread(target=self._restart, daemon=True).start()
        return vectors

    def _restart(self) -> None:
        # A server that has just crashed may hold its socket or shared memory a moment
        # longer on a busy machine: its start is tried again until it takes.
        for _ in range(30):
            time.sleep(1.0)
            try:
                self.server.start()
            except subprocess.CalledProcessError:
                continue
            self.restarted.set()
            return


def test_database_crashed_mid_index_and_restarted(own_server: OwnServer, vault: Path) -> None:
    url = own_server.url
    with open_store(url) as store:
        kb_ = Kb(store, make_config(vault))
        kb_.embedder = CrashesTheDatabase(own_server, at_call=6)
        # The run in flight may fail with one error, or ride out the restart.
        with contextlib.suppress(KbError, psycopg.Error):
            kb_.sync()
        assert kb_.embedder.restarted.wait(60)
    with open_store(url) as store:
        kb_ = Kb(store, make_config(vault))
        kb_.sync()
        report = verify(kb_.config, store.documents)
        assert report.in_sync, report.differences
        assert report.rows == report.notes and store.documents.row_problems() == CLEAN
