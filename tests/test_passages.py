"""Passages: every paragraph of a chunk in its writer's voice, a vector each; the vector list
scores a chunk by the best of its own vector and its passages'."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kb.context.passage_texts import (
    Voice,
    chunk_passages,
    paragraphs,
)
from kb.context.voices import voiced
from kb.search.plan import SearchPlan
from kb.store import Store
from support.configs import OWNER, make_config
from support.fake_kb import Kb
from support.reading import rows, search_store

# -- building them (pure) ----------------------------------------------------------------------


def test_a_writer_voice_names_the_writer_for_first_person_words() -> None:
    text = "I met my friend; she helped me. Mine was late, so I went myself."
    assert voiced(text, "Alex Doe") == (
        "Alex Doe met Alex Doe's friend; she helped Alex Doe. Alex Doe's was late, "
        "so Alex Doe went Alex Doe."
    )
    assert voiced("Imagine mint mimes.", "Alex") == "Imagine mint mimes."


def test_paragraphs_keep_fences_whole_and_headings_with_their_text() -> None:
    content = "## Day 1\n\nFirst one.\nstill first.\n\n```sh\na\n\nb\n```\n\n\nLast."
    assert paragraphs(content) == [
        "## Day 1\nFirst one.\nstill first.",
        "```sh\na\n\nb\n```",
        "Last.",
    ]
    assert paragraphs("Text.\n\n## Trailing") == ["Text.\n## Trailing"]


def test_passages_in_a_writer_voice_or_under_the_title() -> None:
    content = "I climbed Takao with Kenji at dawn.\n\nThen my legs hurt all the way home."
    mine = Voice("Alex", True, "12 April 2024")
    assert [p.text for p in chunk_passages(content, mine)] == [
        "Alex, 12 April 2024: Alex climbed Takao with Kenji at dawn.",
        "Alex, 12 April 2024: Then Alex's legs hurt all the way home.",
    ]
    assert [p.position for p in chunk_passages(content, mine)] == [0, 1]
    theirs = Voice("Trip", False, None)
    assert [p.text for p in chunk_passages(content, theirs)] == [
        "Trip: I climbed Takao with Kenji at dawn.",
        "Trip: Then my legs hurt all the way home.",
    ]
    # One paragraph: the chunk's own vector covers it.
    assert chunk_passages("I climbed Takao.", mine) == []
    # Too short to say anything, or said before in the note: no passage of its own.
    seen = {"Then my legs hurt all the way home."}
    content = (
        "Thanks!\n\nI climbed Takao with Kenji at dawn.\n\nThen my legs hurt all the way home."
    )
    said = chunk_passages(content, mine, seen)
    assert [p.text for p in said] == ["Alex, 12 April 2024: Alex climbed Takao with Kenji at dawn."]
    assert "I climbed Takao with Kenji at dawn." in seen


# -- stored, embedded once, searched -----------------------------------------------------------

JOURNAL = "Alex/Journal/2024-03-02.md"
RENAMED = "Alex/Journal/2024-03-02 the climb.md"
DECOY = "Notes/Penguins.md"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    vault = tmp_path / "notes"
    (vault / "Alex/Journal").mkdir(parents=True)
    (vault / "Notes").mkdir()
    (vault / JOURNAL).write_text(
        "---\ndate: 2024-03-02\n---\n"
        "I walked along the river before breakfast.\n\n"
        "I adopted a puppy from the shelter; my sister came along.\n\n"
        "In the evening I cooked soup and read a novel.\n"
    )
    (vault / DECOY).write_text(
        "# Penguins\n\nThe march of the emperor penguins across the ice.\n\n"
        "They huddle together through the long winter.\n"
    )
    return vault


def _kb(store: Store, vault: Path, passages: str = "paragraphs", **llm: str) -> Kb:
    return Kb(
        store,
        make_config(
            vault,
            context={"summaries": "none", "passages": passages},
            llm={"embed_model": "hash-256", **llm},
        ),
    )


def _passages(store: Store, path: str) -> list[dict]:
    return rows(
        store,
        "SELECT p.*, c.position AS chunk_position FROM passages p"
        " JOIN chunks c ON c.id = p.chunk_id JOIN documents d ON d.id = c.document_id"
        " WHERE d.path = %s ORDER BY c.position, p.position",
        path,
    )


def test_passages_are_stored_embedded_and_voiced(store: Store, notes: Path) -> None:
    kb = _kb(store, notes)
    report = kb.sync()
    stored = _passages(store, JOURNAL)
    assert [p["text"] for p in stored] == [
        f"{OWNER}, 2 March 2024: {OWNER} walked along the river before breakfast.",
        f"{OWNER}, 2 March 2024: {OWNER} adopted a puppy from the shelter; {OWNER}'s sister "
        "came along.",
        f"{OWNER}, 2 March 2024: In the evening {OWNER} cooked soup and read a novel.",
    ]
    assert all(p["kind"] == "paragraph" and p["embed_model"] == "hash-256" for p in stored)
    assert all(p["embedding"] is not None for p in stored)
    # A note of another writer speaks in its title's voice, its words as written.
    assert [p["text"] for p in _passages(store, DECOY)] == [
        "Penguins: # Penguins\nThe march of the emperor penguins across the ice.",
        "Penguins: They huddle together through the long winter.",
    ]
    # Every chunk and every passage embedded once (and the model's size probed once).
    assert report.embedded == 2 + 5 and kb.embedder.texts == 1 + 2 + 5


def test_a_query_matching_only_the_voice_finds_the_chunk(store: Store, notes: Path) -> None:
    # The owner's name and the date are in no note's own words, only in the journal's
    # passages; "march" is in the other note's.
    question = f"{OWNER} march"
    plain = _kb(store, notes, passages="none")
    plain.sync()
    before = search_store(store, plain.embedder, SearchPlan(question, top_k=1, mode="vector")).hits
    assert before[0].path == DECOY

    voiced = _kb(store, notes)
    voiced.sync()
    hits = search_store(store, voiced.embedder, SearchPlan(question, top_k=5, mode="vector")).hits
    assert hits[0].path == JOURNAL
    # Its similarity is its best passage's; its text, the chunk's own; one row per chunk.
    assert hits[0].similarity is not None and hits[0].similarity > 0.5
    assert hits[0].content.startswith("I walked along the river")
    assert len({(h.path, h.start_line) for h in hits}) == len(hits)
    # Hybrid search finds it too, from the vector list alone (full-text search reads no
    # passage, and "march" is the other note's word).
    [found] = [
        h
        for h in search_store(store, voiced.embedder, SearchPlan(question, top_k=5)).hits
        if h.path == JOURNAL
    ]
    assert found.vector_rank == 1 and found.text_rank is None


def test_reindex_and_copies_cost_no_embedding(store: Store, notes: Path) -> None:
    kb = _kb(store, notes)
    kb.sync()
    kb.reset_counts()
    assert kb.sync().embedded == 0
    # A copy of the journal elsewhere in the owner's folder: the same chunk, the same voice
    # and date (from its frontmatter), so the same texts: nothing is embedded again.
    shutil.copy(notes / JOURNAL, notes / "Alex/Journal/copy.md")
    report = kb.sync()
    assert report.indexed == 1 and report.embedded == 0 and kb.embedder.texts == 0
    assert len(_passages(store, "Alex/Journal/copy.md")) == 3


def test_passages_go_with_their_note_and_follow_a_rename(store: Store, notes: Path) -> None:
    # The new name keeps the day the old one says: the note's date, and so its voiced
    # passages, are the same (a rename to another day is indexed again, see kb.dates).
    kb = _kb(store, notes)
    kb.sync()
    before = _passages(store, JOURNAL)
    kb.reset_counts()
    os.rename(notes / JOURNAL, notes / RENAMED)
    report = kb.sync()
    assert report.moved == 1 and kb.embedder.texts == 0
    after = _passages(store, RENAMED)
    assert [(p["id"], p["text"]) for p in after] == [(p["id"], p["text"]) for p in before]
    (notes / RENAMED).unlink()
    kb.sync()
    assert (
        rows(
            store,
            "SELECT count(*) AS n FROM passages p JOIN chunks c ON c.id = p.chunk_id"
            " JOIN documents d ON d.id = c.document_id WHERE d.path = %s",
            RENAMED,
        )[0]["n"]
        == 0
    )
    assert len(rows(store, "SELECT id FROM passages")) == 2  # the decoy's


def test_turning_passages_off_drops_them(store: Store, notes: Path) -> None:
    _kb(store, notes).sync()
    off = _kb(store, notes, passages="none")
    off.sync()
    assert rows(store, "SELECT id FROM passages") == []
    # The chunks' vectors are found again by their text: nothing re-embedded.
    assert off.embedder.texts == 0


def test_a_new_embedding_model_re_embeds_passages(store: Store, notes: Path) -> None:
    _kb(store, notes).sync()
    other = _kb(store, notes, embed_model="hash-128")
    other.sync()
    stored = rows(store, "SELECT embed_model, vector_dims(embedding) AS dims FROM passages")
    assert stored and all(r == {"embed_model": "hash-128", "dims": 128} for r in stored)
    assert store.vectors.has_index()
    question = f"{OWNER} march"
    hits = search_store(store, other.embedder, SearchPlan(question, top_k=1, mode="vector")).hits
    assert hits[0].path == JOURNAL
