"""Answering a query: its candidates retrieved (owner-aware query text, embedding, both
lists), then ranked, held to the threshold and re-ranked."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kb.config import SearchMode
from kb.context.voices import FIRST_PERSON, voiced
from kb.errors import KbError, LLMError
from kb.fusion import Fused, Fusion, fuse, single
from kb.models.base import Embedder
from kb.results import SearchHit, SearchResult
from kb.search import features, ranker
from kb.search.ranker import Ranker
from kb.search.when import Period, question_period
from kb.store import Candidates
from kb.store.candidates import CandidateReads
from kb.store.queue import Queue
from kb.store.vectors import Vectors

if TYPE_CHECKING:
    from kb.search.plan import SearchPlan


def owner_query(text: str, owner: str) -> str:
    """Prepend the owner's name to a first-person query, as personal notes name the owner.

    For full-text search only (see `retrieve`). Measured against rewriting "I" and "my" into
    the name (docs/retrieval.md): the same for full-text search."""
    if FIRST_PERSON.search(text) and owner.lower() not in text.lower():
        return f"{owner}: {text}"
    return text


def fused_order(
    found: Candidates, mode: SearchMode, fusion: Fusion, period: Period | None = None
) -> list[Fused]:
    """The candidates in the mode's order: one list alone, or both fused; those of notes
    from the `period` a question names first, each group in that order."""
    if mode == "vector":
        order = single(found.vector, vector=True)
    elif mode == "text":
        order = single(found.text, vector=False)
    else:
        order = fuse(found.vector, found.text, fusion)
    if period is not None:
        order.sort(key=lambda f: not period.holds(found.rows[f.id].own_date))
    return order


@dataclass(frozen=True)
class Judge:
    """The learned ranker, what it reads of the question beside the candidates, and how
    many of its first hits are explained (what moved them costs as much again as their
    scores: worked out only for the hits a search returns)."""

    ranker: Ranker
    question: str
    owner: str | None
    explained: int = 10


def rank(
    found: Candidates,
    mode: SearchMode,
    fusion: Fusion,
    period: Period | None = None,
    *,
    judge: Judge | None = None,
) -> list[SearchHit]:
    """The candidates best first: kb's order (`fused_order`), then, with a `judge` and both
    lists, the learned ranker's order of them (kb.search.ranker)."""
    order = fused_order(found, mode, fusion, period)
    if judge is None or mode != "hybrid" or not order:
        return [_hit(found, f) for f in order]
    rows = features.rows(judge.question, judge.owner, found, order, period)
    judged = ranker.order(judge.ranker, order, rows)
    row_of = {f.id: row for f, row in zip(order, rows, strict=True)}
    return [
        replace(
            _hit(found, f),
            fused_rank=judged.fused_rank[f.id],
            judged=judged.scores[f.id],
            lifted_by=ranker.reasons(judge.ranker, row_of[f.id]) if n < judge.explained else None,
        )
        for n, f in enumerate(judged.order)
    ]


def _hit(found: Candidates, fused: Fused) -> SearchHit:
    row = found.rows[fused.id]
    return SearchHit(
        vault=row.vault,
        path=row.path,
        header_path=row.header_path,
        content=row.content,
        score=fused.score,
        similarity=row.similarity,
        start_line=row.start_line,
        end_line=row.end_line,
        vector_rank=fused.vector_rank,
        vector_score=fused.vector_score,
        text_rank=fused.text_rank,
        text_score=fused.text_score,
        date=row.note_date.isoformat() if row.note_date else None,
    )


@dataclass(frozen=True)
class Retrieved:
    """What a search finds before it orders anything: the candidates, the lists it could
    read (the plan's mode, or text alone where the query could not be embedded), the time
    the question names, and what it has to say about them."""

    found: Candidates
    used: SearchMode
    period: Period | None
    warnings: tuple[str, ...]


def retrieve(
    embedder: Embedder,
    plan: SearchPlan,
    *,
    candidates: CandidateReads,
    vectors: Vectors,
    queue: Queue,
) -> Retrieved:
    """The plan's candidates, as every search finds them (and every benchmark, so that what
    the learned ranker is fitted and judged on is what a query computes).

    Full-text search needs no model: text mode embeds the query only for a threshold, and
    a hybrid search whose embedder fails reads the text list alone, with a warning. Vector
    mode, and a threshold, cannot do without the embedder: its error is raised.

    A question that names a time ("in March 2023", "yesterday", read from the plan's
    `today`) has it read here (kb.search.when), for the ranking to put those notes first.

    Notes stored but not embedded yet (the embedding queue's) are in the text list only; a
    search that uses the vector list says in a warning how many there are.
    """
    space, waiting = _index_state(embedder, plan, vectors=vectors, queue=queue)
    warnings: list[str] = []
    if waiting and plan.uses_vectors:
        warnings.append(
            f"{waiting} notes are not in the vector list yet (their vectors are being"
            " embedded): found by their words only"
        )
    # No vector yet (a new index, its first notes still being embedded): the text list alone
    # (the statement is made for a size, which the unread vector list makes no use of).
    vector, used = (None, "text") if space is None else _embedded(embedder, plan, warnings)
    model, dimensions = space or (embedder.name, 1)
    found = candidates.find(
        vector,
        owner_query(plan.text, plan.owner) if plan.owner else plan.text,
        model=model,
        dimensions=dimensions,
        depth=max(plan.depth, plan.fetch),
        lists="both" if used == "hybrid" else used,
        filters=plan.filters,
    )
    return Retrieved(found, used, question_period(plan.text, plan.today), tuple(warnings))


def run(
    embedder: Embedder,
    plan: SearchPlan,
    *,
    candidates: CandidateReads,
    vectors: Vectors,
    queue: Queue,
) -> SearchResult:
    """The plan's best chunks, best first (what each part of it means: kb.search.plan): its
    candidates (`retrieve`) ranked, the threshold applied, then re-ranked.

    With a learned ranker, a hybrid search orders its candidates by it, fusion's order where
    the query could not be embedded or the ranker's file was fitted on other features (with
    a warning). With a reranker, its candidates are judged by it (the chat model or a
    cross-encoder) before the top `top_k` are kept.
    """
    got = retrieve(embedder, plan, candidates=candidates, vectors=vectors, queue=queue)
    warnings = list(got.warnings)
    learned = plan.learned
    if learned is not None and learned.unfit:
        if plan.mode == "hybrid":
            warnings.append(learned.unfit)
        learned = None
    explained = plan.fetch if plan.explain else 0
    judge = Judge(learned, plan.text, plan.owner, explained) if learned else None
    hits = rank(got.found, got.used, plan.fusion, got.period, judge=judge)[: plan.fetch]
    if plan.threshold is not None:
        hits = [h for h in hits if h.similarity is not None and h.similarity >= plan.threshold]
    if plan.reranker:
        try:
            # The model reads the user's own words; the owner's name is for full-text search.
            hits = plan.reranker.rerank(plan.text, hits)
        except LLMError as exc:
            # The search itself worked: its answer is still worth having.
            warnings.append(f"re-ranking skipped, results in search order: {exc}")
    return SearchResult(hits[: plan.top_k], got.used, tuple(warnings))


def _index_state(
    embedder: Embedder, plan: SearchPlan, *, vectors: Vectors, queue: Queue
) -> tuple[tuple[str, int] | None, int]:
    """The index's embedding space (None before its first vector) and how many notes wait
    for their vectors; a KbError when the plan cannot be searched on it."""
    space = vectors.space()
    waiting = (
        queue.unembedded_notes(plan.filters.vaults) if plan.uses_vectors or space is None else 0
    )
    if space is None and (not waiting or plan.mode == "vector" or plan.threshold is not None):
        if waiting:
            raise KbError(
                f"no note has its vectors yet ({waiting} waiting): search with --mode text,"
                " or run `kb index --wait`, `kb worker` or `kb daemon`"
            )
        raise KbError("the index is empty: run `kb index` first")
    if space is not None and space[0] != embedder.name:
        raise KbError(
            f"the index holds vectors of '{space[0]}' but the config says '{embedder.name}': "
            "run `kb index` to re-embed"
        )
    return space, waiting


def _embedded(
    embedder: Embedder, plan: SearchPlan, warnings: list[str]
) -> tuple[list[float] | None, SearchMode]:
    """The query's vector, where the plan reads one, and the lists the search can use: a
    hybrid search whose embedder fails falls back to the text list, with a warning."""
    if not plan.uses_vectors:
        return None, plan.mode
    # Without voiced passages the owner's name is a word to match, not a meaning to embed:
    # BM25 uses it to prefer the owner's own notes, while an embedder pulls the question
    # toward every note that names the owner (first-person questions on personal-dev: vector
    # recall@5 0.41 with the name, 0.63 without, with e5; 0.24 and 0.38 with MiniLM).
    owner = plan.owner if plan.voiced_index else None
    try:
        return embedder.embed_query(voiced(plan.text, owner) if owner else plan.text), plan.mode
    except LLMError as exc:
        if plan.threshold is not None:
            raise type(exc)(f"a similarity threshold needs the embedder: {exc}") from None
        if plan.mode == "vector":
            raise
        # A model server that is off (a laptop after a restart) must not stop a search
        # that full-text search alone can answer.
        warnings.append(f"full-text search only (the query could not be embedded): {exc}")
        return None, "text"
