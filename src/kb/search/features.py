"""What the learned ranker reads of each candidate: a row of numbers from the signals kb
already has in one search (both lists' verdicts, the chunk's vectors, its note, the
question's words, names, person and time), pure and in milliseconds.

The ranker (kb.search.ranker) is fitted on these rows by bench/ranker.py, which makes them
with this module from the candidates kb.search.hybrid.retrieve finds: what it was fitted
on is what a query computes.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import Stemmer

from kb.context.voices import FIRST_PERSON
from kb.fusion import Fused
from kb.search.ranker import Schema
from kb.search.when import Period
from kb.store import Candidate, Candidates

# Where a chunk is missing from a list: one place past the end of a list of 40.
ABSENT = 41
# A passage kind the level does not write, or a chunk without such a passage.
NO_SIMILARITY = -1.0
# The candidates the cross-candidate features compare a chunk with: kb's first TOP.
TOP = 10
# The meaning of the features: a ranker file records the version it was fitted on, and one
# of another version is not used (kb.search.ranker). Bump it when any feature's value is
# made differently (another formula, another constant above, or another input: what the
# candidates query returns, fusion's score) and fit the trees again (bench/ranker.py);
# tests/test_features.py's expected rows say when. A feature
# added, dropped, renamed or moved changes FEATURES, which a ranker file is checked by too.
# 1: the 49 features of the trees kb ships.
FEATURES_VERSION = 1


class FeatureRow(NamedTuple):
    """One candidate's features, in the order a ranker's trees read them. Each is given by
    name where its value is made (`_row`): no name can be paired with another's value, and
    one left out or unknown there is an error."""

    # What each list said of it.
    vector_rank: float
    vector_inverse_rank: float
    similarity: float
    similarity_gap: float  # below the query's best similarity
    text_rank: float
    text_inverse_rank: float
    text_score: float
    text_share: float  # of the query's best BM25
    in_both: float
    # kb's order: the fused score, and its place after the time the question names.
    fused_score: float
    fused_share: float
    fused_rank: float
    # The chunk's own vector and its best passage of each kind (kb.context.passage_texts).
    own_similarity: float
    paragraph_similarity: float
    statement_similarity: float
    question_similarity: float
    passages: float
    # The chunk in its note.
    chars: float
    header_depth: float
    position: float
    relative_position: float
    note_chunks: float
    # Its note among the candidates: how many, the best place, whether this is that one,
    # and its neighbours' fused score (the chunk before or after it, when a candidate).
    note_candidates: float
    note_best_rank: float
    note_best: float
    note_rank: float
    neighbour_score: float
    # The owner and the first person: kb's rule reads a first-person question as the owner's.
    first_person: float
    personal: float
    first_person_personal: float
    owner_named: float
    # A time the question names, against the note's own date.
    dated: float
    note_dated: float
    in_period: float
    log_days_apart: float
    # The question's words in the chunk, its names (capitalised words) and its title path.
    word_overlap: float
    name_overlap: float
    names: float
    header_overlap: float
    query_words: float
    # Names: the question's names in the header path and file name (the writer of a letter,
    # the person a note is about), how many in the chunk, and the owner as the writer.
    name_header: float
    names_found: float
    owner_header: float
    first_person_owner_header: float
    # Across the candidates: how rare the chunk's words are among the first TOP candidates,
    # the words no better-placed candidate has, how many of the first TOP share them, how
    # spread its note's chunks are, and how many notes the first TOP hold.
    candidate_rarity: float
    novel_words: float
    shared_top: float
    note_spread: float
    top_notes: float


FEATURES: tuple[str, ...] = FeatureRow._fields
# What a ranker file of a search's rows must have been fitted on (kb.search.ranker.load).
SCHEMA = Schema(FEATURES, FEATURES_VERSION)

_WORD = re.compile(r"[A-Za-z0-9']+")
# Words too common to tell chunks apart.
_COMMON = frozenset(
    "the a an and or of to in on at for with from by about is are was were be been did do "
    "does what when where who whom which why how that this these those it its as has have "
    "had he she they them his her their you your we our any some ever".split()
)
_SELF = frozenset({"i", "me", "my", "mine", "myself"})
# Many stems of a list of words at once (Snowball's English, as PostgreSQL's english text
# search stems).
Stems = Callable[[Sequence[str]], list[str]]


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _english() -> Stems:
    """A stemmer of one search's own: a Snowball stemmer must not be shared by threads, and
    one costs less than a microsecond to make."""
    return Stemmer.Stemmer("english", 0).stemWords


def _names(question: str) -> set[str]:
    """The question's capitalised words past its first: names of people, places, things."""
    words = _WORD.findall(question)[1:]
    return {w.lower() for w in words if w[0].isupper() and w.lower() not in ("i", "i'm")}


@dataclass(frozen=True)
class _Finder:
    """Finds which of some stems a text holds, in one scan: a word is looked at when it
    starts as a stem does (a stem less its last letter: "anomali" finds "anomaly") and
    counted when its own stem is one of them."""

    stems: frozenset[str]
    pattern: re.Pattern[str] | None
    stem: Stems

    @classmethod
    def of(cls, stems: set[str], stem: Stems) -> _Finder:
        if not stems:
            return cls(frozenset(), None, stem)
        starts = {s if len(s) <= 3 else s[:-1] for s in stems}
        alternatives = "|".join(re.escape(w) for w in sorted(starts, key=len, reverse=True))
        # The first letters looked ahead for before the alternatives are tried: most places
        # of a text are passed over by that one test (an eighth of the scan's time).
        first = "".join(sorted({re.escape(s[0]) for s in starts}))
        return cls(
            frozenset(stems),
            re.compile(rf"(?<![A-Za-z0-9'])(?=[{first}])(?:{alternatives})[A-Za-z0-9']*"),
            stem,
        )

    def found(self, text: str) -> set[str]:
        """The stems of the finder's that `text` holds."""
        if self.pattern is None:
            return set()
        return set(self.stem(list(set(self.pattern.findall(text.lower()))))) & self.stems


def _note(row: Candidate) -> tuple[str, str]:
    return row.vault, row.path


@dataclass(frozen=True)
class _Question:
    """What the features read of the question: its words (less the common ones and the
    first person), its names, whether it is in the first person, the owner's words, one
    pattern that finds any of them, and the middle of the time it names."""

    asked: set[str]
    names: set[str]
    first_person: bool
    owner_words: set[str]
    finder: _Finder
    middle: dt.date | None

    @classmethod
    def of(cls, question: str, owner: str | None, period: Period | None) -> _Question:
        stem = _english()
        asked = set(stem(list(_words(question) - _COMMON - _SELF)))
        names = set(stem(list(_names(question))))
        owner_words = set(stem(list(_words(owner or ""))))
        return cls(
            asked=asked,
            names=names,
            first_person=bool(FIRST_PERSON.search(question)),
            owner_words=owner_words,
            finder=_Finder.of(asked | names | owner_words, stem),
            middle=period.first + (period.last - period.first) / 2 if period else None,
        )


@dataclass(frozen=True)
class _Standing:
    """The candidates as a whole, in kb's order: the best of each score, each note's
    candidates, the chunks by their place in their note, the question's words each chunk
    holds, and how those words spread over the first TOP."""

    ids: list[int]
    best_similarity: float
    best_text: float
    fused: dict[int, float]
    best_fused: float
    notes: dict[tuple[str, str], list[int]]
    note_order: dict[tuple[str, str], int]
    place_of: dict[int, int]
    at_position: dict[tuple[str, str, int], int]
    found_words: dict[int, set[str]]
    in_top: Counter[str]
    novel: dict[int, int]
    top_notes: int

    @classmethod
    def of(cls, found: Candidates, order: Sequence[Fused], q: _Question) -> _Standing:
        ids = [f.id for f in order]
        cands = [found.rows[i] for i in ids]
        fused = {f.id: f.score for f in order}
        notes: dict[tuple[str, str], list[int]] = {}
        for row in cands:
            notes.setdefault(_note(row), []).append(row.id)
        place_of = {i: n for n, i in enumerate(ids, 1)}
        found_words = {r.id: q.finder.found(r.content) for r in cands}
        wanted = q.asked | q.names
        # How many of the first TOP candidates hold each word; each chunk's words that none
        # placed before it holds.
        in_top: Counter[str] = Counter()
        for i in ids[:TOP]:
            in_top.update(found_words[i] & wanted)
        seen: set[str] = set()
        novel: dict[int, int] = {}
        for i in ids:
            mine = found_words[i] & wanted
            novel[i] = len(mine - seen)
            if place_of[i] <= TOP:
                seen |= mine
        return cls(
            ids=ids,
            best_similarity=max((r.similarity or 0.0 for r in cands), default=0.0),
            best_text=max((r.text_score or 0.0 for r in cands), default=0.0),
            fused=fused,
            best_fused=max(fused.values(), default=0.0) or 1.0,
            notes=notes,
            note_order={note: n for n, note in enumerate(notes, 1)},  # by their best chunk
            place_of=place_of,
            at_position={(*_note(r), r.position): r.id for r in cands},
            found_words=found_words,
            in_top=in_top,
            novel=novel,
            top_notes=len({_note(found.rows[i]) for i in ids[:TOP]}),
        )


def rows(
    question: str,
    owner: str | None,
    found: Candidates,
    order: Sequence[Fused],
    period: Period | None,
) -> list[FeatureRow]:
    """Each candidate's features, in kb's order (`order`: every candidate of `found`, fused,
    the time the question names first)."""
    q = _Question.of(question, owner, period)
    standing = _Standing.of(found, order, q)
    return [
        _row(row, place, q, standing, period)
        for place, row in enumerate((found.rows[i] for i in standing.ids), 1)
    ]


def _row(
    row: Candidate, place: int, q: _Question, st: _Standing, period: Period | None
) -> FeatureRow:
    """One candidate's features, each named beside its value."""
    similarity, text = row.similarity or 0.0, row.text_score or 0.0
    kinds = row.kinds or {}
    siblings = st.notes[_note(row)]
    neighbours = (st.at_position.get((*_note(row), row.position + d)) for d in (-1, 1))
    day = row.own_date
    words = st.found_words[row.id]
    header = q.finder.found(" ".join([*row.header_path, row.path]))
    asked, names = q.asked, q.names
    mine = words & (asked | names)
    in_top = row.id in st.ids[:TOP]
    shared = [st.in_top[w] - (1 if in_top else 0) for w in mine]
    owner_header = bool(q.owner_words & header)
    return FeatureRow(
        vector_rank=row.vector_rank or ABSENT,
        vector_inverse_rank=1 / row.vector_rank if row.vector_rank else 0.0,
        similarity=similarity,
        similarity_gap=st.best_similarity - similarity,
        text_rank=row.text_rank or ABSENT,
        text_inverse_rank=1 / row.text_rank if row.text_rank else 0.0,
        text_score=text,
        text_share=text / st.best_text if st.best_text else 0.0,
        in_both=float(bool(row.vector_rank and row.text_rank)),
        fused_score=st.fused[row.id],
        fused_share=st.fused[row.id] / st.best_fused,
        fused_rank=place,
        own_similarity=NO_SIMILARITY if row.own_similarity is None else row.own_similarity,
        paragraph_similarity=kinds.get("paragraph", NO_SIMILARITY),
        statement_similarity=kinds.get("statement", NO_SIMILARITY),
        question_similarity=kinds.get("question", NO_SIMILARITY),
        passages=row.passages,
        chars=math.log1p(len(row.content)),
        header_depth=len(row.header_path),
        position=row.position,
        relative_position=row.position / max(1, row.note_chunks - 1),
        note_chunks=row.note_chunks,
        note_candidates=len(siblings),
        note_best_rank=st.place_of[siblings[0]],
        note_best=float(siblings[0] == row.id),
        note_rank=st.note_order[_note(row)],
        neighbour_score=max((st.fused[n] for n in neighbours if n is not None), default=0.0),
        first_person=float(q.first_person),
        personal=float(row.personal),
        first_person_personal=float(q.first_person and row.personal),
        owner_named=float(bool(q.owner_words & words)),
        dated=float(period is not None),
        note_dated=float(day is not None),
        in_period=float(period is not None and period.holds(day)),
        log_days_apart=(
            math.log1p(abs((day - q.middle).days))
            if q.middle is not None and day is not None
            else -1.0
        ),
        word_overlap=len(asked & words) / len(asked) if asked else 0.0,
        name_overlap=len(names & words) / len(names) if names else 0.0,
        names=len(names),
        header_overlap=len(asked & header) / len(asked) if asked else 0.0,
        query_words=len(asked),
        name_header=len(names & header) / len(names) if names else 0.0,
        names_found=len(names & words),
        owner_header=float(owner_header),
        first_person_owner_header=float(q.first_person and owner_header),
        candidate_rarity=sum(math.log((TOP + 1) / (1 + st.in_top[w])) for w in mine),
        novel_words=st.novel[row.id] / len(asked | names) if asked | names else 0.0,
        shared_top=sum(shared) / len(shared) if shared else 0.0,
        note_spread=st.place_of[siblings[-1]] - st.place_of[siblings[0]],
        top_notes=st.top_notes,
    )
