"""Embedder profiles: prefixes and windows per model, applied to every text, re-embedding on
a change; full contexts fitted to the window, and the cut ones counted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kb.container import Container
from kb.context import fit
from kb.errors import KbError
from kb.llm import embed_name, embed_profile, embed_window, make_embedder
from kb.llm.fake import FakeEmbedder
from kb.llm.profiles import UNKNOWN, ProfiledEmbedder, profile_for
from kb.models import tokens
from kb.search.plan import SearchPlan
from kb.store import Store
from support.configs import make_config
from support.fake_kb import Kb
from support.reading import search_store

NOMIC = ("search_query: ", "search_document: ")
INSTRUCTION = "Represent this sentence for searching relevant passages: "


@pytest.mark.parametrize(
    ("name", "family", "prefixes", "window"),
    [
        ("nomic-embed-text", "nomic", NOMIC, 2048),
        ("nomic-embed-text:latest", "nomic", NOMIC, 2048),
        ("nomic-ai/nomic-embed-text-v1.5", "nomic", NOMIC, 2048),
        ("nomic-embed-text-v2-moe", "nomic-v2", NOMIC, 512),
        ("mxbai-embed-large:335m", "mxbai", (INSTRUCTION, ""), 512),
        ("all-minilm:l6-v2", "minilm", ("", ""), 256),
        ("all-minilm-l6-v2-f16", "minilm", ("", ""), 256),
        ("sentence-transformers/all-MiniLM-L6-v2", "minilm", ("", ""), 256),
        ("bge-m3", "bge-m3", ("", ""), 8192),
        ("BAAI/bge-small-en-v1.5", "bge", (INSTRUCTION, ""), 512),
        ("bge-base-en-v1.5", "bge", (INSTRUCTION, ""), 512),
        ("snowflake-arctic-embed:33m", "arctic-embed", (INSTRUCTION, ""), 512),
        ("snowflake-arctic-embed2", "arctic-embed-2", ("query: ", ""), 8192),
        ("embeddinggemma:300m", "embeddinggemma",
         ("task: search result | query: ", "title: none | text: "), 2048),
        ("intfloat/multilingual-e5-small", "e5", ("query: ", "passage: "), 512),
        ("e5-small-v2", "e5", ("query: ", "passage: "), 512),
        ("qwen3-embedding:0.6b", "qwen3-embedding", None, 32768),
        ("granite-embedding:30m", "granite-embedding", ("", ""), 512),
        ("some-new-model", "unknown", ("", ""), 512),
    ],
)  # fmt: skip
def test_known_models_by_the_names_servers_report(
    name: str, family: str, prefixes: tuple[str, str] | None, window: int
) -> None:
    profile = profile_for(name)
    assert profile.family == family and profile.window == window
    if prefixes is not None:
        assert (profile.query_prefix, profile.document_prefix) == prefixes
    else:
        assert profile.query_prefix.startswith("Instruct: ") and profile.document_prefix == ""


def test_config_overrides_any_part_of_a_profile(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        llm={"embed_model": "nomic-embed-text", "embed_query_prefix": "q> ", "embed_window": 64},
    )
    profile = embed_profile(cfg.llm)
    assert (profile.query_prefix, profile.document_prefix, profile.window) == (
        "q> ",
        "search_document: ",
        64,
    )
    # The document prefix and the sequence's two special tokens come out of the window.
    assert embed_window(cfg.llm) == 64 - tokens.estimate("search_document: ") - 2
    assert profile_for("x", document_prefix="") == UNKNOWN


class Recording:
    name = "rec"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen.extend(texts)
        return [[1.0, 0.0] for _ in texts]


def test_documents_and_queries_are_sent_with_their_prefixes() -> None:
    inner = Recording()
    embedder = ProfiledEmbedder(inner, profile_for("nomic-embed-text"))
    embedder.embed(["a note"])
    embedder.embed_query("a question")
    assert inner.seen == ["search_document: a note", "search_query: a question"]
    # The prefixes are in the name every vector is stored under; none, no change of name.
    assert embedder.name.startswith("rec#") and len(embedder.name) == len("rec#") + 8
    assert ProfiledEmbedder(Recording(), profile_for("all-minilm")).name == "rec"


@pytest.mark.parametrize("model", ["nomic-embed-text", "hash-256", "e5-small-v2"])
def test_the_stored_name_is_known_from_the_config_alone(tmp_path: Path, model: str) -> None:
    # What `kb verify` asks the index for: the name the embedder stores vectors under.
    cfg = make_config(tmp_path, llm={"embed_model": model}).llm
    assert embed_name(cfg) == make_embedder(cfg).name
    assert (embed_name(cfg) == model) == (embed_profile(cfg).tag == "")


def test_a_change_of_prefixes_re_embeds_without_a_model_call(kb: Kb, vault: Path) -> None:
    kb.sync()
    chunks = kb.store.state.status().chunks
    kb.reset_counts()
    fake = FakeEmbedder("hash-256")
    profile = profile_for("hash-256", query_prefix="find: ", document_prefix="note: ")
    prefixed = ProfiledEmbedder(fake, profile)
    switched = Container(kb.config, kb.store, chat=kb.chat, embedder=prefixed)
    switched.sync()
    # Every chunk again, with its prefix, by the embedding queue (kb index leaves it there).
    switched.worker(until_empty=True, speeds=("embed",)).run()
    assert not kb.chat.calls
    assert fake.texts >= chunks
    assert kb.store.vectors.space() == (prefixed.name, 256)
    assert search_store(kb.store, prefixed, SearchPlan("miso ramen", top_k=3)).hits
    # A search with the old prefixes would compare vectors of two kinds: it is refused.
    with pytest.raises(KbError, match="re-embed"):
        search_store(kb.store, kb.embedder, SearchPlan("miso ramen", top_k=3))


def test_fit_cuts_a_full_context_at_the_window_and_keeps_one_that_fits() -> None:
    context = "# Trip > ## Day 2\n\nWe ate ramen.\n\nA summary of the part.\n\nThe note's summary."
    assert fit(context, 1000) == context
    cut = fit(context, 12)
    assert context.startswith(cut) and tokens.estimate(cut) <= 12 < tokens.estimate(context)
    assert "ramen" in cut and "note's summary" not in cut


def test_tokens_are_estimated_generously() -> None:
    assert tokens.estimate("") == 0
    assert tokens.estimate("I ate ramen.") == 5  # "ramen" is two pieces, the full stop one
    assert tokens.estimate("contextualization") == 5  # long words count as several pieces
    assert tokens.estimate("2024 東京") == 6  # digits and other scripts: one per character
    assert tokens.cut("one two three", 2) == "one two"


@pytest.mark.parametrize(("window", "all_fit"), [(4096, True), (40, False)])
def test_status_counts_the_chunks_embedded_cut(
    store: Store, vault: Path, window: int, all_fit: bool
) -> None:
    cfg = make_config(vault, llm={"embed_window": window})
    Kb(store, cfg).sync()
    status = store.state.status()
    assert status.chunks > 0
    assert (status.cut == 0) is all_fit
    if not all_fit:
        assert 0 < status.cut <= status.chunks


@given(st.text(alphabet=st.sampled_from("ab1_ .,-\n\t9Z\x1c\x7f\x00"), max_size=200))
def test_the_ascii_estimate_counts_as_the_piece_by_piece_one(text: str) -> None:
    assert tokens.estimate(text) == sum(tokens._pieces(p) for p in tokens._PIECES.findall(text))
