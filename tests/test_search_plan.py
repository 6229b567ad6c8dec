"""A search request resolved into its plan once: the `[query]` settings and the vault filter
filled in, and the query and numbers checked there, in one line, before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kb.config import MAX_TOP_K
from kb.errors import KbError
from kb.fusion import Fusion
from kb.search.plan import MAX_QUERY_CHARS, SearchPlan
from kb.services import searching as search_service
from kb.services.searching import SearchRequest
from kb.store import SearchFilter, Store
from support.configs import OWNER, make_config
from support.fake_kb import Kb


@pytest.mark.parametrize(
    ("text", "options", "error"),
    [
        ("", {}, "the query is empty"),
        (" \n ", {}, "the query is empty"),
        (
            "x" * (MAX_QUERY_CHARS + 1),
            {},
            f"the query is 10001 characters long; at most {MAX_QUERY_CHARS}",
        ),
        ("caf\udce9", {}, "the query holds bytes that are not valid UTF-8"),
        (
            "pelican",
            {"top_k": 10**20},
            f"top_k is 100000000000000000000: it must be from 1 to {MAX_TOP_K}",
        ),
        ("pelican", {"top_k": 0}, f"top_k is 0: it must be from 1 to {MAX_TOP_K}"),
        ("pelican", {"threshold": 2.0}, "the threshold is 2.0: a cosine similarity, from -1 to 1"),
        ("pelican", {"threshold": float("nan")}, "the threshold is nan"),
    ],
)
def test_a_plan_is_checked_when_it_is_made(text: str, options: dict[str, Any], error: str) -> None:
    with pytest.raises(KbError) as raised:
        SearchPlan(text, **options)
    assert str(raised.value).startswith(error) and "\n" not in str(raised.value)


def test_the_service_fills_in_what_a_request_leaves_out(store: Store, vault: Path) -> None:
    query = {"top_k": 7, "mode": "text", "fusion": "rrf", "vector_weight": 0.4, "rerank": True}
    kb = Kb(store, make_config(vault, query=query))
    # Another configuration's vault shares the index: this one's searches keep to its own.
    store.vaults.record("theirs", "/elsewhere")
    service = kb.search_service()
    tagged = SearchFilter(tags=("travel",))
    plan = service.plan(SearchRequest("when did I climb a mountain", filters=tagged))
    assert (plan.text, plan.owner, plan.top_k, plan.mode) == (
        "when did I climb a mountain",
        OWNER,
        7,
        "text",
    )
    assert plan.fusion == Fusion("rrf", 0.4) and plan.reranker is not None
    # The face's filters, and the configuration's vaults alone.
    assert plan.filters == SearchFilter(tags=("travel",), vaults=("v",))
    assert plan.threshold is None and plan.learned is not None

    asked = SearchRequest("x", top_k=2, mode="vector", threshold=0.5, rerank=False, owner=False)
    plan = service.plan(asked)
    assert (plan.owner, plan.top_k, plan.mode, plan.threshold) == (None, 2, "vector", 0.5)
    assert plan.reranker is None


def test_every_search_and_question_runs_one_plan(kb: Kb, monkeypatch: pytest.MonkeyPatch) -> None:
    kb.sync()
    service = kb.search_service()
    made: list[SearchPlan] = []

    def counted(*args: Any, **kwargs: Any) -> SearchPlan:
        made.append(SearchPlan(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(search_service, "SearchPlan", counted)
    assert service.search(SearchRequest("miso ramen")).hits
    assert len(made) == 1
    assert service.ask(SearchRequest("which miso goes into the ramen")).sources
    assert len(made) == 2

    # A request that cannot be planned stops there: nothing is embedded, no model is asked.
    kb.reset_counts()
    for run in (service.search, service.ask):
        with pytest.raises(KbError, match=r"^the query is empty$"):
            run(SearchRequest("  "))
    assert kb.embedder.calls == 0 and kb.chat.total_calls == 0 and len(made) == 2
