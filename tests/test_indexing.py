"""The pipeline against a real PostgreSQL, counting every call to the fake provider."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from kb.config import SearchMode
from kb.context import LAYOUT_VERSION, full_context, header_line
from kb.errors import Interrupted, LLMError, LockLost
from kb.indexing.verify import verify
from kb.llm.fake import FakeChat, FakeEmbedder
from kb.note_writing.building import BuildMode
from kb.prompting.outputs import needs_rewrite
from kb.search.plan import SearchPlan
from kb.store import SearchFilter, Store
from kb.vault.notes import Scope
from kb.vault.wikitext import readable
from support.configs import OWNER, make_config, summaries_config
from support.fake_kb import Kb, file_summaries
from support.reading import rows, search_store, similarity, stored_chunks

LONG_NOTE = "Projects/Home Server.md"


def _doc(store: Store, path: str) -> dict[str, Any]:
    [doc] = rows(store, "SELECT * FROM documents WHERE path = %s", path)
    return doc


def _stored(store: Store, path: str) -> bool:
    return bool(rows(store, "SELECT 1 FROM documents WHERE path = %s", path))


def _laid_out(chunk: dict, file_summary: str) -> str:
    """full_context as the layout promises it: header path, the chunk (its links read as a
    person reads them), then its summaries."""
    text = readable(chunk["rewrite"] or chunk["content"])
    parts = (header_line(tuple(chunk["header_path"])), text, chunk["summary"], file_summary)
    return "\n\n".join(parts)


def _edit_paragraph(vault: Path, path: str, which: str) -> None:
    """Change one word of one paragraph: the first, the last, or one in the middle."""
    file = vault / path
    lines = file.read_text().split("\n")
    title = lines.index(next(line for line in lines if line.startswith("# ")))
    prose = [i for i, line in enumerate(lines) if i > title and " the " in line]
    index = {"first": prose[0], "last": prose[-1], "middle": prose[len(prose) // 2]}[which]
    lines[index] = lines[index].replace(" the ", " the EDITED" + " zebra" * 9 + " ", 1)
    assert "EDITED" in lines[index]
    file.write_text("\n".join(lines))


def test_full_context_puts_the_chunk_first_and_leaves_out_empty_parts() -> None:
    laid_out = full_context("File.", "Chunk.", "# A > ## B", "## B\n\nbody")
    assert laid_out == "# A > ## B\n\n## B\n\nbody\n\nChunk.\n\nFile."
    assert full_context("", "", "", "body") == "body"


class DyingEmbedder(FakeEmbedder):
    """An embedding server that answers `answers` requests, then is gone."""

    def __init__(self, name: str, answers: int) -> None:
        super().__init__(name)
        self.answers = answers

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.calls >= self.answers:
            raise LLMError("embedding server gone")
        return super().embed(texts)


def test_a_dead_embedder_loses_no_note(kb: Kb) -> None:
    """The embedder dying between the speeds: every note is stored and found by its words
    all the same; the notes it could not embed stay queued, with its error, and are
    embedded once it answers again."""
    kb.embedder = DyingEmbedder(kb.config.llm.embed_model, answers=2)
    with pytest.raises(LLMError):
        kb.sync()
    assert len(kb.store.documents.states("v")) == 15
    assert set(kb.store.documents.row_problems().values()) == {0}
    waiting = kb.store.queue.status(speed="embed")
    assert waiting.items > 0 and waiting.failing > 0
    assert waiting.failures[0].error == "embedding server gone"
    found = search_store(kb.store, kb.embedder, SearchPlan("miso ramen", top_k=3, mode="text"))
    assert found.hits and "ramen" in found.hits[0].content.lower()
    assert verify(kb.config, kb.store.documents).in_sync  # queued, not lost

    kb.embedder = FakeEmbedder(kb.config.llm.embed_model)
    rows(kb.store, "UPDATE embedding_queue SET not_before = now() RETURNING 1")  # back-off over
    assert kb.sync().indexed == 0
    assert kb.store.queue.status(speed="embed").items == 0
    assert not rows(kb.store, "SELECT 1 FROM chunks WHERE embedding IS NULL")
    hits = search_store(
        kb.store, kb.embedder, SearchPlan("miso ramen", top_k=3, mode="vector")
    ).hits
    assert hits and "ramen" in hits[0].content.lower()


@pytest.mark.parametrize("stop", [Interrupted, LockLost])
def test_a_stop_writes_the_notes_done_unless_the_lock_is_lost(kb: Kb, stop: type) -> None:
    """A stop (a daemon shutting down) in the middle of a group of notes writes the notes
    of the group done before it; a writer that lost its lock writes none of them: another
    writer may own the index now."""
    calls = 0

    def checkpoint() -> None:
        nonlocal calls
        calls += 1
        # One call as the plan is carried out, then one per note as it is indexed, in two
        # groups at once: the stop comes once each group has a note done.
        if calls >= 4:
            raise stop("stop")

    with kb.indexer(checkpoint=checkpoint) as ix, pytest.raises(stop):
        ix.sync()
    written = kb.store.documents.states("v")
    if stop is LockLost:
        assert written == {}
        return
    assert 0 < len(written) < 15
    assert set(kb.store.documents.row_problems().values()) == {0}
    assert kb.sync().indexed == 15 - len(written)


def test_index_example_vault(summaries_kb: Kb) -> None:
    kb = summaries_kb
    report = kb.sync()
    assert report.failed == 0
    assert report.indexed == 15  # every .md outside .trash/ and .obsidian/
    assert file_summaries(kb.chat) == 14  # the empty note needs none
    paths = set(kb.store.documents.states("v"))
    assert ".trash/Deleted idea.md" not in paths
    assert "Projects/Board.canvas" not in paths
    assert _stored(kb.store, "Inbox/Untitled.md")
    assert stored_chunks(kb.store, "Inbox/Untitled.md") == []
    doc = _doc(kb.store, LONG_NOTE)
    assert doc["summary"]
    for chunk in stored_chunks(kb.store, LONG_NOTE):
        assert chunk["embedding"] is not None and chunk["embed_model"] == "hash-256"
        assert chunk["summary"] and chunk["full_context"] == _laid_out(chunk, doc["summary"])


def test_unchanged_vault_makes_no_calls(kb: Kb) -> None:
    kb.sync()
    kb.reset_counts()
    report = kb.sync()
    assert kb.chat.total_calls == 0 and kb.embedder.calls == 0
    assert report.unchanged == 15 and report.indexed == 0


def test_awkward_names_pair_with_their_rows(store: Store, tmp_path: Path) -> None:
    """A full sync walks the index's rows beside the scan, both in path order: names that
    sort around the slash, or beyond ASCII, must meet their rows, or an unchanged note
    would look deleted and new at once."""
    names = ["a.md", "a/b.md", "a-b.md", "a0.md", "A.md", "a b.md", "a.b/c.md", "é.md"]
    names += ["e/😀.md", "z.md", "ü/a.md", "ü.md"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"# {name}\n\nA note called {name}.\n")
    kb = Kb(store, make_config(tmp_path))
    assert kb.sync().indexed == len(names)
    (tmp_path / "a0.md").unlink()
    os.utime(tmp_path / "a/b.md", ns=(1, 1))
    report = kb.sync()
    assert (report.indexed, report.deleted, report.moved) == (0, 1, 0)
    assert report.unchanged == len(names) - 1
    assert set(kb.store.documents.states("v")) == set(names) - {"a0.md"}


def test_touch_without_change_makes_no_calls(kb: Kb, vault: Path) -> None:
    kb.sync()
    kb.reset_counts()
    os.utime(vault / LONG_NOTE, None)
    report = kb.sync()
    assert kb.chat.total_calls == 0 and kb.embedder.calls == 0
    assert report.indexed == 0


def test_index_example_vault_at_the_default(kb: Kb) -> None:
    report = kb.sync()
    assert report.failed == 0 and report.indexed == 15
    chunks = rows(kb.store, "SELECT count(*) AS n FROM chunks")[0]["n"]
    # Each chunk's questions once, and the writer of each note outside the owner's folders.
    assert dict(kb.chat.calls) == {"voice": 10, "questions": chunks}
    assert report.llm_calls == 10 + chunks
    kinds = rows(kb.store, "SELECT DISTINCT kind FROM passages ORDER BY kind")
    assert [k["kind"] for k in kinds] == ["paragraph", "question"]
    assert kb.sync().llm_calls == 0


def test_middle_edit_costs_one_chunks_questions(kb: Kb, vault: Path) -> None:
    kb.sync()
    kb.reset_counts()
    _edit_paragraph(vault, LONG_NOTE, "middle")
    kb.sync()
    assert dict(kb.chat.calls) == {"questions": 1}


def test_an_edit_of_the_opening_asks_again_for_the_writer_and_one_chunks_questions(
    kb: Kb, vault: Path
) -> None:
    kb.sync()
    before = {c["content"]: c["questions"] for c in stored_chunks(kb.store, LONG_NOTE)}
    kb.reset_counts()
    _edit_paragraph(vault, LONG_NOTE, "first")
    report = kb.sync()
    # The voice's key holds the note's opening; until the model names the writer again, the
    # other chunks' questions are kept under the writer the note was stored with.
    assert dict(kb.chat.calls) == {"voice": 1, "questions": 1} and report.queued == 1
    after = stored_chunks(kb.store, LONG_NOTE)
    assert sum(c["content"] not in before for c in after) == 1
    assert all(c["questions"] == before[c["content"]] for c in after if c["content"] in before)


def test_middle_edit_costs_one_chunk_summary(summaries_kb: Kb, vault: Path) -> None:
    kb = summaries_kb
    kb.sync()
    before = stored_chunks(kb.store, LONG_NOTE)
    file_summary = _doc(kb.store, LONG_NOTE)["summary"]
    kb.reset_counts()
    _edit_paragraph(vault, LONG_NOTE, "middle")
    kb.sync()
    assert dict(kb.chat.calls) == {"chunk_summary": 1}
    # The edited chunk is embedded twice: searchable at once with structural context, then
    # with its new summary. The others keep their context, and so their vectors.
    assert kb.embedder.texts == 2
    after = stored_chunks(kb.store, LONG_NOTE)
    assert len(after) == len(before)
    changed = [a for a, b in zip(after, before, strict=True) if a["content"] != b["content"]]
    assert len(changed) == 1 and "EDITED" in changed[0]["content"]
    assert _doc(kb.store, LONG_NOTE)["summary"] == file_summary


@pytest.mark.parametrize("which", ["first", "last"])
def test_edge_edit_redoes_file_summary_only(summaries_kb: Kb, vault: Path, which: str) -> None:
    kb = summaries_kb
    kb.sync()
    before = stored_chunks(kb.store, LONG_NOTE)
    kb.reset_counts()
    _edit_paragraph(vault, LONG_NOTE, which)
    kb.sync()
    assert dict(kb.chat.calls) == {"file_summary": 1, "chunk_summary": 1}
    assert "zebra" in _doc(kb.store, LONG_NOTE)["summary"]
    after = stored_chunks(kb.store, LONG_NOTE)
    # Every chunk carries the file summary, so every chunk is re-embedded (cheap) twice:
    # with a structural stand-in for it at once, then with the new summary ...
    assert kb.embedder.texts == 2 * len(after)
    # ... but the untouched chunks keep their summaries.
    kept = [a for a, b in zip(after, before, strict=True) if a["content"] == b["content"]]
    assert len(kept) == len(after) - 1
    assert all(
        a["summary"] == b["summary"]
        for a, b in zip(after, before, strict=True)
        if a["content"] == b["content"]
    )


def test_rename_and_move_make_no_calls(kb: Kb, vault: Path) -> None:
    kb.sync()
    ids = [c["id"] for c in stored_chunks(kb.store, LONG_NOTE)]
    kb.reset_counts()
    (vault / "Archive").mkdir()
    os.rename(vault / LONG_NOTE, vault / "Archive/Homelab.md")
    os.rename(vault / "Reference", vault / "Ref")
    report = kb.sync()
    assert kb.chat.total_calls == 0 and kb.embedder.calls == 0
    assert report.moved == 4 and report.deleted == 0
    assert [c["id"] for c in stored_chunks(kb.store, "Archive/Homelab.md")] == ids
    assert not _stored(kb.store, LONG_NOTE)
    hits = search_store(kb.store, kb.embedder, SearchPlan("restic offsite backups", top_k=20)).hits
    assert not any(h.path == LONG_NOTE for h in hits)


def test_copy_reuses_context_and_vectors(kb: Kb, vault: Path) -> None:
    kb.sync()
    kb.reset_counts()
    shutil.copy(vault / LONG_NOTE, vault / "Projects/Home Server copy.md")
    report = kb.sync()
    assert report.indexed == 1
    # Its writer is asked for again (a path can name one); its questions are found again
    # under the same writer.
    assert dict(kb.chat.calls) == {"voice": 1} and kb.embedder.calls == 0


def test_delete_removes_rows_and_results(kb: Kb, vault: Path) -> None:
    kb.sync()
    (vault / LONG_NOTE).unlink()
    shutil.rmtree(vault / "Reference")
    report = kb.sync()
    assert report.deleted == 4
    assert not _stored(kb.store, LONG_NOTE)
    [orphans] = rows(
        kb.store,
        "SELECT count(*) AS n FROM chunks c LEFT JOIN documents d ON d.id = c.document_id"
        " WHERE d.id IS NULL",
    )
    assert orphans["n"] == 0
    hits = search_store(
        kb.store, kb.embedder, SearchPlan("home server restic backups", top_k=50)
    ).hits
    assert not {h.path for h in hits} & {LONG_NOTE, "Reference/Postgres Cheatsheet.md"}


def test_embedding_model_change_reembeds_without_summaries(kb: Kb, vault: Path) -> None:
    kb.sync()
    chunks = sum(len(stored_chunks(kb.store, p)) for p in kb.store.documents.states("v"))
    other = Kb(kb.store, make_config(vault, llm={"embed_model": "hash-64"}))
    report = other.sync()
    assert other.chat.total_calls == 0
    # Every stored full_context and passage, plus a size probe.
    assert other.embedder.texts == chunks + kb.store.passages.count() + 1
    assert report.indexed == 0
    assert kb.store.vectors.space() == ("hash-64", 64)
    with kb.store.pool.connection() as conn:
        models = conn.execute(
            "SELECT DISTINCT embed_model, vector_dims(embedding) AS d FROM chunks"
        ).fetchall()
    assert models == [{"embed_model": "hash-64", "d": 64}]
    hits = search_store(
        kb.store, other.embedder, SearchPlan("miso ramen recipe", top_k=3, mode="vector")
    ).hits
    assert hits and hits[0].path.endswith("Weeknight Miso Ramen.md")
    with pytest.raises(Exception, match="run `kb index`"):
        search_store(kb.store, kb.embedder, SearchPlan("miso ramen", top_k=3))


def test_reindex_forces_everything_or_only_embeddings(kb: Kb) -> None:
    first = kb.sync()
    calls = kb.chat.total_calls
    kb.reset_counts()
    forced = kb.sync(force=True)
    assert forced.indexed == first.indexed and kb.chat.total_calls == calls
    kb.reset_counts()
    with kb.indexer() as indexer:
        indexer.space.reembed_all()
    assert kb.embedder.texts == 0  # left to the embedding queue
    assert kb.store.queue.status(speed="embed").items == first.indexed - 1  # one note is empty
    kb.drain()
    assert kb.chat.total_calls == 0
    texts = rows(
        kb.store,
        "SELECT context_hash AS h FROM chunks UNION SELECT text_hash FROM passages",
    )
    assert kb.embedder.texts == len(texts)  # each text once
    assert not rows(kb.store, "SELECT 1 FROM chunks WHERE embedding IS NULL")


def test_personal_notes_are_rewritten_about_the_owner(summaries_kb: Kb) -> None:
    kb = summaries_kb
    kb.sync()
    journal = stored_chunks(kb.store, "Alex/Journal/2024-04-12.md")
    assert journal and all(c["rewrite"] is not None for c in journal)
    first_person = [c for c in journal if " I " in f" {c['content']} "]
    assert first_person, "the example journal is written in the first person"
    for chunk in first_person:
        rewrite = chunk["rewrite"]
        assert OWNER in rewrite and " I " not in f" {rewrite} "
        searched = chunk["full_context"]
        assert readable(rewrite) in searched and readable(chunk["content"]) not in searched
        assert OWNER in chunk["summary"]
        assert " I " in f" {chunk['content']} "  # the raw chunk is what is stored and returned
    clipping = stored_chunks(kb.store, "Clippings/How I Climbed Mount Fuji in One Night.md")
    assert all(c["rewrite"] is None and OWNER not in c["full_context"] for c in clipping)
    # Only chunks where the writer speaks of themself are sent for a rewrite.
    personal = [
        c
        for p in kb.store.documents.states("v")
        if p.startswith("Alex/")
        for c in stored_chunks(kb.store, p)
    ]
    assert kb.chat.calls["rewrite"] == sum(needs_rewrite(c["content"]) for c in personal)
    assert 0 < kb.chat.calls["rewrite"] < len(personal)


def test_first_person_query_prefers_the_owners_notes(kb: Kb) -> None:
    """The owner's name lifts the owner's journal, which names its writer, above where the
    same question without the name puts it. (Whether it also comes before the saved clipping
    that says "I climbed" depends on the embedder: the real-model test checks that.)"""
    kb.sync()
    question = "when did I climb a mountain"
    mine = "Alex/Journal/2024-04-12.md"

    def rank(owner: str | None, mode: SearchMode) -> int:
        hits = search_store(
            kb.store, kb.embedder, SearchPlan(question, owner=owner, top_k=30, mode=mode)
        ).hits
        paths = [h.path for h in hits]
        return paths.index(mine) if mine in paths else len(paths)

    assert rank(OWNER, "text") < rank(None, "text")
    assert rank(OWNER, "hybrid") < min(rank(None, "hybrid"), 5)


def test_the_owners_name_is_for_full_text_search_only(kb: Kb) -> None:
    """The embedder reads a first-person question as asked: the name would pull it toward
    every note that names the owner. Full-text search reads it with the name."""
    kb.sync()
    question = "when did I climb a mountain"
    embedded: list[str] = []

    class Recording(FakeEmbedder):
        def embed_query(self, text: str) -> list[float]:
            embedded.append(text)
            return super().embed_query(text)

    def text_scores(owner: str | None) -> list[float]:
        embedder = Recording(kb.embedder.name)
        hits = search_store(
            kb.store, embedder, SearchPlan(question, owner=owner, top_k=30, mode="hybrid")
        ).hits
        return [h.text_score or 0.0 for h in hits]

    assert text_scores(OWNER) != text_scores(None)
    assert embedded == [question, question]


def test_bad_notes_are_skipped_and_recorded(kb: Kb, vault: Path) -> None:
    (vault / "latin1.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (vault / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (vault / "broken yaml.md").write_text("---\ntags: [a, b\ntitle: x\n---\n# Kept\n\nBody kept.\n")
    report = kb.sync()
    assert report.failed == 2 and report.indexed == 16
    failures = {f.path: f.error for f in kb.store.state.status().failures}
    assert "not valid UTF-8" in failures["latin1.md"]
    assert "NUL" in failures["binary.md"]
    kept = stored_chunks(kb.store, "broken yaml.md")
    assert [c["content"] for c in kept] == ["# Kept\n\nBody kept."]
    assert "not valid YAML" in _doc(kb.store, "broken yaml.md")["metadata"]["warnings"][0]
    (vault / "latin1.md").write_text("café au lait")
    kb.sync()
    assert "latin1.md" not in {f.path for f in kb.store.state.status().failures}


def test_failed_save_leaves_the_old_version_whole(kb: Kb, vault: Path) -> None:
    kb.sync()
    before = stored_chunks(kb.store, LONG_NOTE)
    _edit_paragraph(vault, LONG_NOTE, "middle")
    # A full disk makes the insert fail half-way through the file.
    with kb.store.pool.connection() as conn:
        conn.execute(
            "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF NEW.position = 2 THEN RAISE EXCEPTION 'could not extend file'"
            " USING ERRCODE = 'disk_full'; END IF; RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER disk_full BEFORE INSERT ON chunks"
            " FOR EACH ROW EXECUTE FUNCTION disk_full()"
        )
    with kb.indexer() as indexer, pytest.raises(psycopg.errors.DiskFull):
        config = kb.config.vaults[0]
        data = (vault / LONG_NOTE).read_bytes()
        mode = BuildMode(ask=not indexer.enrich, embed=False)  # as a sync builds it
        _, rows = indexer.preparer.prepare(
            config, LONG_NOTE, data, size=len(data), mtime_ns=0, mode=mode
        )
        kb.store.documents.save([rows])
    after = stored_chunks(kb.store, LONG_NOTE)
    assert [c["content"] for c in after] == [c["content"] for c in before]


def test_query_filters_and_threshold(kb: Kb) -> None:
    kb.sync()
    hits = search_store(
        kb.store,
        kb.embedder,
        SearchPlan("postgres migration", top_k=5, filters=SearchFilter(path_prefix="Alex/")),
    ).hits
    assert hits and all(h.path.startswith("Alex/") for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    best = max(similarity(h) for h in hits)
    strict = search_store(
        kb.store,
        kb.embedder,
        SearchPlan("postgres migration", top_k=5, threshold=best, mode="vector"),
    ).hits
    assert len(strict) >= 1 and all(similarity(h) >= best for h in strict)
    assert (
        search_store(
            kb.store,
            kb.embedder,
            SearchPlan("postgres", top_k=5, filters=SearchFilter(path_prefix="Nope/")),
        ).hits
        == []
    )


def test_a_removed_vault_stays_until_it_is_forgotten(kb: Kb, tmp_path: Path) -> None:
    kb.sync()
    kept = set(kb.store.documents.states("v"))
    other = tmp_path / "other"
    other.mkdir()
    (other / "note.md").write_text("# Other\n\nSomething else entirely.\n")
    Kb(kb.store, make_config(other, vaults=[{"name": "w", "path": str(other)}])).sync()
    assert set(kb.store.documents.states("v")) == kept
    assert set(kb.store.documents.states("w")) == {"note.md"}
    assert kb.store.vaults.forget("v") == len(kept)
    assert kb.store.documents.states("v") == {}


def test_llm_calls_never_exceed_the_concurrency_limit(store: Store, vault: Path) -> None:
    import threading
    import time

    class SlowChat(FakeChat):
        def __init__(self) -> None:
            super().__init__("fake-chat")
            self.in_flight = self.peak = 0
            self.guard = threading.Lock()

        def complete(self, prompt):  # type: ignore[no-untyped-def]
            with self.guard:
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
            time.sleep(0.01)
            with self.guard:
                self.in_flight -= 1
            return super().complete(prompt)

    kb = Kb(store, make_config(vault, llm={"concurrency": 3}))
    kb.chat = SlowChat()
    kb.sync()
    assert kb.chat.peak == 3


def test_structure_and_none_levels_ask_no_model(store: Store, vault: Path) -> None:
    structure = Kb(store, make_config(vault, context={"summaries": "structure"}))
    report = structure.sync()
    assert report.indexed == 15 and structure.chat.total_calls == 0
    chunks = stored_chunks(store, LONG_NOTE)
    title = _doc(store, LONG_NOTE)
    assert title["summary"].startswith('Note "Home Server" (also "homelab", "NAS", "box") in')
    for chunk in chunks:
        headers = " > ".join(h.lstrip("#").strip() for h in chunk["header_path"])
        assert chunk["summary"] == f'Part of the note "Home Server", section "{headers}".'
        assert chunk["rewrite"] is None
        assert chunk["full_context"] == _laid_out(chunk, title["summary"])

    # Switching level rebuilds every note's context on the next sync, still with no model.
    bare = Kb(store, make_config(vault, context={"summaries": "none"}))
    report = bare.sync()
    assert report.indexed == 15 and bare.chat.total_calls == 0
    chunks = stored_chunks(store, LONG_NOTE)
    assert all(c["full_context"] == readable(c["content"]) for c in chunks)
    assert bare.sync().indexed == 0  # and only once

    llm = Kb(store, summaries_config(vault))
    llm.sync()
    assert llm.chat.calls["file_summary"] + llm.chat.calls["note_summary"] == 14
    summary = _doc(store, LONG_NOTE)["summary"]
    assert all(c["full_context"] == _laid_out(c, summary) for c in stored_chunks(store, LONG_NOTE))


def test_new_context_layout_rebuilds_without_model_calls(kb: Kb) -> None:
    kb.sync()
    before = [c["full_context"] for c in stored_chunks(kb.store, LONG_NOTE)]
    # As an index built before the current layout would have it.
    with kb.store.pool.connection() as conn:
        conn.execute("UPDATE documents SET context_build = 'llm/1'")
        conn.execute(
            "UPDATE chunks SET full_context = 'old: ' || full_context, context_hash = md5(content)"
        )
    kb.reset_counts()
    report = kb.sync()
    assert report.indexed == 15 and kb.chat.total_calls == 0
    assert kb.embedder.texts == sum(
        len(stored_chunks(kb.store, p)) for p in kb.store.documents.states("v")
    )
    assert [c["full_context"] for c in stored_chunks(kb.store, LONG_NOTE)] == before
    builds = {d.context_build for d in kb.store.documents.states("v").values()}
    with kb.indexer() as indexer:
        expected = {indexer.context.build_id(personal) for personal in (False, True)}
        assert builds == expected and all(LAYOUT_VERSION in b for b in builds)
    assert kb.sync().indexed == 0  # and only once


def test_a_new_chunk_size_cuts_stored_notes_again(kb: Kb, vault: Path) -> None:
    kb.sync()
    before = stored_chunks(kb.store, LONG_NOTE)
    smaller = Kb(kb.store, make_config(vault, chunking={"max_chars": 400}))
    report = smaller.sync()
    after = stored_chunks(kb.store, LONG_NOTE)
    assert report.indexed == 15
    assert len(after) > len(before)
    assert all(len(c["content"]) <= 400 for c in after if "\n" in c["content"])
    assert smaller.chat.total_calls > 0  # the new chunks' summaries
    assert smaller.sync().indexed == 0  # and only once


def test_scoped_sync_rebuilds_a_note_built_another_way(kb: Kb, vault: Path) -> None:
    kb.sync()
    with kb.store.pool.connection() as conn:
        conn.execute("UPDATE documents SET context_build = 'llm/1' WHERE path = %s", (LONG_NOTE,))
    kb.reset_counts()
    # What the daemon runs for the files its watcher names: unchanged bytes, stale context.
    with kb.indexer() as indexer:
        report = indexer.sync_scope(kb.config.vaults[0], Scope(files=frozenset({LONG_NOTE})))
    assert report.indexed == 1 and kb.chat.total_calls == 0
    with kb.indexer() as indexer:
        stored = kb.store.documents.states("v")[LONG_NOTE].context_build
        assert stored == indexer.context.build_id(False)


def test_unknown_summaries_level_is_a_config_error(vault: Path) -> None:
    with pytest.raises(Exception, match=r"context\.summaries"):
        make_config(vault, context={"summaries": "some"})


def test_chat_usage_is_counted(kb: Kb) -> None:
    kb.sync()
    usage = kb.chat.usage
    assert usage.calls == kb.chat.total_calls > 0
    assert usage.prompt_tokens > usage.output_tokens > 0
