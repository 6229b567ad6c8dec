"""Related notes, for every face: `kb related`, MCP's `related_notes`, the page's note view
and `/api/related`.

The candidates of a note come from three reads, each bounded by an index: the notes its text
names (its word n-grams against every note's names), its neighbours in the link graph and
the notes two links away, and the notes whose chunks lie nearest its chunks (the HNSW
graph, a few per chunk), read at once on the pool's connections, and then what is read of
the candidates, at once too. kb.related.signals turns each into a row, the fitted ranker
(kb.related.scorer) orders them, and kb.related.why says why in words. A request for one
line's chunk (`NOTE:LINE`) reads that chunk's text and vectors alone; the links stay the
note's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from kb.errors import KbError
from kb.related import signals, why
from kb.related.evidence import Evidence, joined, nearest_of_all
from kb.related.mentions import ngrams
from kb.related.scorer import Scorer
from kb.services.note_links import NoteLinks
from kb.store.links import LinkRow, Links, StoredNote
from kb.store.nearby import Near, Related, RelatedNote, Similarity, SourceChunk
from kb.store.vectors import Vectors

# How many of a source's chunks its candidates are measured against, how many of those look
# for their nearest chunks, and how many each: a long note's first chunks say what it is
# about, and each probe of the HNSW graph costs: six probes keep the figures twelve gave
# (docs/related.md) in about half their time.
MOST_CHUNKS = 12
MOST_PROBED = 6
PER_CHUNK = 12
# How many candidates each probe keeps as it walks the graph (hnsw.ef_search; pgvector's
# default is 40, for a search's page of hits): the narrowest walk that leaves the help
# vault's candidates and figures as they were (24 lost one and moved them), and the
# probes of 85,000 chunks about a tenth quicker.
PROBE_BREADTH = 32
# How many notes two links away are scored, by Adamic-Adar.
GRAPH_DEPTH = 100
DEFAULT_TOP_K = 10
# The reads that run at once, each on its own connection of the pool: the slowest read of
# each round (the HNSW probes, then the candidates' vectors) sets its time, not their sum.
PARALLEL_READS = 4


@dataclass(frozen=True)
class RelatedHit:
    vault: str
    path: str
    title: str
    score: float
    why: list[str]
    # What each feature added to the score (`--explain`); empty unless asked for.
    lifts: dict[str, float]

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "vault": self.vault,
            "path": self.path,
            "title": self.title,
            "score": round(self.score, 4),
            "why": self.why,
        }
        if self.lifts:
            out["lifts"] = {k: round(v, 4) for k, v in self.lifts.items() if v}
        return out


@dataclass(frozen=True)
class RelatedNotes:
    """A note's related notes, best first, and its links both ways."""

    vault: str
    path: str
    title: str
    lines: tuple[int, int] | None  # the chunk asked for, by its line span; None: the note
    related: list[RelatedHit]
    links: NoteLinks  # its links both ways, and those that lead to no note
    ranker: str  # the name of the ranker that ordered them

    def as_json(self) -> dict[str, Any]:
        """`kb related --json`: the related notes, and the note's links as `NoteLinks`
        gives them to every face."""
        return {
            **self.links.as_json(),
            "title": self.title,
            "lines": list(self.lines) if self.lines else None,
            "related": [h.as_json() for h in self.related],
            "ranker": self.ranker,
        }


@dataclass(frozen=True)
class Candidates:
    """Every candidate of a source, what relates each to it, and its features' row."""

    source: signals.Source
    lines: tuple[int, int] | None  # the chunk asked for; None: the whole note
    texts: dict[int, str]  # the source's chunks searched from, by id
    out_links: list[LinkRow]  # the source's links
    evidence: list[Evidence]
    rows: list[list[float]]


def lines_with_links(chunks: Sequence[SourceChunk], lines: set[int]) -> str:
    """The lines of `chunks` among `lines` (by their number in the file), one text."""
    return "\n".join(
        text
        for chunk in chunks
        for number, text in enumerate(chunk.content.split("\n"), chunk.start_line)
        if number in lines
    )


def title_of(note: RelatedNote) -> str:
    """The frontmatter's title, else the file name, as links name a note."""
    return (note.title or "").strip() or PurePosixPath(note.path).stem


def chunk_at(chunks: Sequence[SourceChunk], line: int) -> SourceChunk:
    """The chunk holding `line`, else the first one after it (a line between chunks: a
    blank line, the frontmatter); a KbError past the note's end."""
    for chunk in chunks:
        if line <= chunk.end_line:
            return chunk
    last = chunks[-1].end_line if chunks else 0
    raise KbError(f"line {line} is past the note's last chunk (line {last})")


class RelatedService:
    """Related notes over one index, kept to the configuration's vaults."""

    def __init__(
        self,
        *,
        related: Related,
        links: Links,
        vectors: Vectors,
        own_vaults: Sequence[str],
        ranker: Callable[[], Scorer],
        owner_name: str | None = None,
    ) -> None:
        self.repo = related
        self.links = links
        self.vectors = vectors
        self.own_vaults = tuple(own_vaults)
        self._ranker = ranker
        self.owner_name = owner_name
        # The service's threads, kept between notes: a thread started for each note waits
        # its turn on a busy machine before its first read.
        self._reads = ThreadPoolExecutor(PARALLEL_READS, thread_name_prefix="kb-related")

    def candidates(
        self, vault: str, path: str, *, line: int | None = None, unlinked: bool = False
    ) -> Candidates:
        """Every candidate of a note (or of the chunk holding `line`) and its features' row;
        `unlinked` leaves out the notes it links to. A KbError when the index holds no such
        note."""
        note = self.repo.note(vault, path)
        if note is None or note.vault not in self.own_vaults:
            raise KbError(f"the index holds no note {path!r} in vault {vault!r}")
        chunks = self.repo.chunks(note.id)
        picked = [chunk_at(chunks, line)] if line is not None else chunks
        vaults = self.own_vaults
        searched = picked[:MOST_CHUNKS]
        probed = picked[:MOST_PROBED]
        space = self.vectors.space()
        reads = self._reads
        # The reads of candidates at once: the HNSW probes, the longest, in two halves.
        probing = [
            reads.submit(self._nearest, note.id, half, space, vaults)
            for half in (probed[: len(probed) // 2], probed[len(probed) // 2 :])
        ]
        linking = reads.submit(self.repo.neighbours, note.id, most=GRAPH_DEPTH, vaults=vaults)
        grams = ngrams("\n".join(c.content for c in picked))
        mentions = self.repo.mentioned(note.id, list(grams.counts), vaults)
        out_links = self.links.out_links(note.id)
        link_lines = ngrams(lines_with_links(picked, {r.line for r in out_links}))
        neighbours = linking.result()
        near = nearest_of_all(probe.result() for probe in probing)
        linked = {n.document_id for n in neighbours if n.linked}
        ids = set(mentions) | {n.document_id for n in neighbours}
        ids |= {n.document_id for n in near}
        if unlinked:
            ids -= linked
        ids.discard(note.id)
        # Then what is read of the candidates, at once: their chunks (vectors and whether
        # they name the note), the longest, in two halves (each note's figures are its own).
        candidates = sorted(ids)
        halves = (candidates[: len(candidates) // 2], candidates[len(candidates) // 2 :])
        measuring = [
            reads.submit(self._similarities, searched, half, note.names, space) for half in halves
        ]
        notes = self.repo.notes(candidates)
        rarity = self.repo.rarity(sorted(set(mentions.values())))
        similarities: dict[int, Similarity] = {}
        mentioning: set[int] = set()
        for half in measuring:
            measured, naming = half.result()
            similarities |= measured
            mentioning |= naming
        found = joined(
            notes,
            mentions=mentions,
            grams=grams,
            link_lines=link_lines,
            rarity=rarity,
            mentioning=mentioning,
            neighbours=neighbours,
            near=near,
            similarities=similarities,
        )
        source = signals.Source(
            note,
            out_links=len(linked),
            in_links=sum(n.links_here for n in neighbours),
            chunks=len(probed),
        )
        return Candidates(
            source=source,
            lines=(picked[0].start_line, picked[0].end_line) if line is not None else None,
            texts={c.id: c.content for c in searched},
            out_links=out_links,
            evidence=found,
            rows=signals.rows(source, found),
        )

    def _nearest(
        self,
        source: int,
        chunks: Sequence[SourceChunk],
        space: tuple[str, int] | None,
        vaults: Sequence[str],
    ) -> list[Near]:
        if space is None:
            return []
        return self.repo.nearest(
            source,
            [c.id for c in chunks],
            model=space[0],
            dimensions=space[1],
            per_chunk=PER_CHUNK,
            breadth=PROBE_BREADTH,
            vaults=vaults,
        )

    def _similarities(
        self,
        chunks: Sequence[SourceChunk],
        ids: Sequence[int],
        names: Sequence[str],
        space: tuple[str, int] | None,
    ) -> tuple[dict[int, Similarity], set[int]]:
        if space is None:
            return {}, self.repo.mentioning(ids, names)
        return self.repo.similarities(
            [c.id for c in chunks], ids, names, model=space[0], dimensions=space[1]
        )

    def related(
        self,
        vault: str,
        path: str,
        *,
        line: int | None = None,
        top_k: int = DEFAULT_TOP_K,
        unlinked: bool = False,
        explain: bool = False,
    ) -> RelatedNotes:
        """The `top_k` notes most related to a note (or to the chunk holding `line`), best
        first, each with why; `unlinked` leaves out the notes it links to."""
        if top_k < 1:
            raise KbError("top-k must be at least 1")
        found = self.candidates(vault, path, line=line, unlinked=unlinked)
        ranker = self._ranker()
        scored = sorted(
            zip(found.evidence, found.rows, strict=True),
            key=lambda pair: (-ranker.score(pair[1]), pair[0].note.path),
        )[:top_k]
        hits = []
        for candidate, row in scored:
            lifts = ranker.lifts(row)
            hits.append(
                RelatedHit(
                    vault=candidate.note.vault,
                    path=candidate.note.path,
                    title=title_of(candidate.note),
                    score=ranker.score(row),
                    why=why.reasons(
                        lifts,
                        found.source,
                        candidate,
                        source_text=found.texts,
                        owner=self.owner_name,
                    ),
                    lifts=lifts if explain else {},
                )
            )
        note = found.source.note
        return RelatedNotes(
            vault=note.vault,
            path=note.path,
            title=title_of(note),
            lines=found.lines,
            related=hits,
            links=NoteLinks(
                StoredNote(note.id, note.vault, note.path, tuple(note.names)),
                links_to=found.out_links,
                linked_from=self.links.backlinks(note.id),
                unresolved=self.links.unresolved(note.id),
            ),
            ranker=ranker.name,
        )
