"""Answering a question from the notes: retrieve, number the passages, ask the chat model,
keep only the citations that name a passage.

The pure parts (fitting passages into the context window, filtering citations as the answer
streams, recognising "your notes don't say") are separate from `ask`, the one function that
does I/O through the store, the embedder and the chat model.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kb.config import SearchMode
from kb.errors import LLMError
from kb.models.base import ChatModel, Embedder, close_stream
from kb.prompting import prompts
from kb.search import hybrid, reading
from kb.search.grounding import Read, check
from kb.store import Authorship, NoteInfo, SearchHit
from kb.store.candidates import CandidateReads
from kb.store.documents import Documents
from kb.store.queue import Queue
from kb.store.vectors import Vectors

if TYPE_CHECKING:
    from kb.search.plan import SearchPlan

# Room for a few cited sentences; a small model that rambles past it is cut off.
ANSWER_MAX_TOKENS = 320
# A passage cut shorter than this says too little to be worth its number.
MIN_PASSAGE_CHARS = 160
CUT_MARK = " […]"
# What kb says itself when no passage passes the filters and threshold: the model is not asked.
NOTHING_FOUND = "Your notes don't say: no passage matches the question."
# What kb says in place of an answer its passages do not hold (kb.search.grounding).
NOT_IN_NOTES = "Not in your notes."
# How many of the best passages such a reply points to.
CLOSEST = 3

# "[2]", "[1, 3]", "[1,3]": a citation is one or more passage numbers in brackets.
CITATION = re.compile(r"\[\s*\d+(?:\s*,\s*\d+)*\s*\]")
# The start of something that may still become a citation once more text arrives.
_OPEN_CITATION = re.compile(r"\[[\d,\s]*\Z")
_LONGEST_CITATION = 40
_NOT_IN_NOTES = re.compile(
    r"\b(?:notes?|passages?)\s+(?:do|does)\s*(?:n['\u2019]t|not)\s+(?:say|mention|contain|tell)"
    r"|\bnot\s+(?:in|mentioned\s+in)\s+(?:your|the)\s+(?:notes|passages)",
    re.IGNORECASE,
)


class Stopped(Exception):
    """The asker went away (`ask`'s `stop` was set): the answer is left unfinished and the
    chat model's stream closed."""


@dataclass(frozen=True)
class Source:
    """One numbered passage given to the model, and the search hit it came from."""

    number: int
    hit: SearchHit
    date: str | None  # the note's date (kb.dates), else the day it was last modified
    personal: bool  # written by the owner
    text: str  # as given to the model (kb.search.reading): whole, or cut with CUT_MARK
    cut: bool
    # Who wrote the note, as far as kb knows; None where the question is nobody's and no
    # writer was named.
    writer: reading.Writer | None = None
    day: dt.date | None = None  # the note's own date, which its relative times count from
    title: str = ""

    def header(self) -> str:
        """The line above the passage: who wrote it, when, the note's title, where in it."""
        headings = [h.lstrip("# ") for h in self.hit.header_path]
        return reading.header(self.writer, self.day, self.title, headings)


@dataclass(frozen=True)
class Timings:
    retrieval: float
    first_token: float | None  # seconds from the request to the first piece of the answer
    generation: float
    total: float


@dataclass(frozen=True)
class Answer:
    question: str
    text: str
    sources: list[Source]
    cited: list[int]
    model: str | None  # None when no passage was found, so no model was asked
    not_in_notes: bool
    timings: Timings
    # How the passages were found (see kb.results.SearchResult).
    mode_used: SearchMode
    warnings: tuple[str, ...]
    prompt_version: str = prompts.ANSWER_VERSION
    # The model's answer, when its passages did not hold it and `text` says so instead; and
    # why (kb.search.grounding).
    withdrawn: str | None = None
    withdrawn_because: str | None = None


def fit_passages(texts: Sequence[str], budget: int) -> list[tuple[str, bool]]:
    """The passages, best first, within `budget` characters: each kept whole while it fits;
    from the first that does not, the rest share what is left equally, each cut visibly;
    when the shares would be too short to say anything, the next passage takes all that is
    left and the others are left out. The best passage
    is always given, cut to the budget if it alone is longer. Returns (text, cut) pairs."""
    kept: list[tuple[str, bool]] = []
    left = budget
    sharing = False
    for i, raw in enumerate(texts):
        text = raw.strip()
        if not sharing and len(text) <= left:
            kept.append((text, False))
            left -= len(text)
            continue
        sharing = True
        share = left // (len(texts) - i)
        if share < MIN_PASSAGE_CHARS:
            # Too little for all: the next one takes what is left, if that is worth giving.
            if kept and left < MIN_PASSAGE_CHARS:
                break
            share = left
        cut = len(text) > share
        if cut:
            text = text[: max(0, share - len(CUT_MARK))].rstrip() + CUT_MARK
        kept.append((text, cut))
        left -= len(text)
    return kept


class CitationFilter:
    """Passes an answer through piece by piece, dropping citations that name no passage.

    Text that may still turn into a citation (an open bracket and digits) is held back
    until it is settled, and so is the whitespace before it, so a dropped citation takes
    its leading space with it. `cited` lists the valid numbers in order of first use.
    """

    def __init__(self, valid: Iterable[int]) -> None:
        self.valid = frozenset(valid)
        self.cited: list[int] = []
        self._pending = ""
        self._space = ""

    def feed(self, piece: str) -> str:
        self._pending += piece
        out: list[str] = []
        while self._pending:
            start = self._pending.find("[")
            if start == -1:
                out.append(self._text(self._pending))
                self._pending = ""
                break
            if start:
                out.append(self._text(self._pending[:start]))
                self._pending = self._pending[start:]
            match = CITATION.match(self._pending)
            if match:
                out.append(self._citation(match.group(0)))
                self._pending = self._pending[match.end() :]
            elif _OPEN_CITATION.match(self._pending) and len(self._pending) < _LONGEST_CITATION:
                break  # wait for the rest of it
            else:
                out.append(self._text("["))
                self._pending = self._pending[1:]
        return "".join(out)

    def close(self) -> str:
        """Whatever was held back, once the answer is complete."""
        rest = self._text(self._pending) if self._pending else ""
        self._pending = ""
        return rest + self._space

    def _text(self, text: str) -> str:
        body = text.rstrip()
        if not body:
            self._space += text
            return ""
        out = self._space + body
        self._space = text[len(body) :]
        return out

    def _citation(self, citation: str) -> str:
        numbers = [int(n) for n in re.findall(r"\d+", citation)]
        kept = list(dict.fromkeys(n for n in numbers if n in self.valid))
        if not kept:
            self._space = ""
            return ""
        self.cited.extend(n for n in kept if n not in self.cited)
        out = self._space + "[" + ", ".join(map(str, kept)) + "]"
        self._space = ""
        return out


def filter_citations(text: str, valid: Iterable[int]) -> tuple[str, list[int]]:
    """An answer with the citations that name no passage removed, and the numbers it cites."""
    f = CitationFilter(valid)
    return (f.feed(text) + f.close()).strip(), f.cited


def says_not_in_notes(answer: str) -> bool:
    """Whether an answer says the notes do not hold the answer ("Your notes don't say …")."""
    return bool(_NOT_IN_NOTES.search(answer))


def note_date(info: NoteInfo | None) -> str | None:
    """The date to show beside a passage: the note's date (kb.dates), else its
    modification day."""
    if info is None:
        return None
    if info.date and info.date.strip():
        return info.date.strip()[:32]
    return dt.datetime.fromtimestamp(info.mtime_ns / 1e9, dt.UTC).date().isoformat()


def number_sources(
    hits: Sequence[SearchHit],
    facts: dict[tuple[str, str], NoteInfo],
    budget: int,
    *,
    owner: str | None = None,
    authors: dict[tuple[str, str], Authorship] | None = None,
) -> list[Source]:
    """Number the hits that fit the budget (their header lines count too), best first,
    each written for the reader (kb.search.reading): with `owner`, the owner's notes speak
    of them as "you" and every other note is someone else's; `authors` gives the writers
    the chat model named (kb.context.voices) and the notes' own dates."""
    drafts = []
    for n, hit in enumerate(hits, 1):
        info = facts.get((hit.vault, hit.path))
        personal = bool(info and info.personal)
        known = (authors or {}).get((hit.vault, hit.path))
        named = known.writer if known else None
        writer = None
        if owner is not None:
            writer = reading.Writer(owner if personal else named, owner=personal)
        elif named:
            writer = reading.Writer(named, owner=False)
        day = known.day if known else None
        title = (info.title if info and info.title else "") or hit.path.removesuffix(".md")
        text = reading.text_for_reader(hit.content, writer, day)
        drafts.append(Source(n, hit, note_date(info), personal, text, False, writer, day, title))
    room = budget - sum(len(s.header()) + len(f"[{s.number}] \n\n") for s in drafts)
    fitted = fit_passages([s.text for s in drafts], max(room, MIN_PASSAGE_CHARS))
    # Fewer passages than hits when the last ones had no room left.
    return [
        replace(source, text=text, cut=cut)
        for source, (text, cut) in zip(drafts, fitted, strict=False)
    ]


def closest(sources: Sequence[Source]) -> str:
    """What kb says in place of an answer the passages do not hold: that, and the best
    passages to read instead."""
    numbers = [f"[{s.number}]" for s in sources[:CLOSEST]]
    if not numbers:
        return NOT_IN_NOTES
    listed = numbers[0] if len(numbers) == 1 else ", ".join(numbers[:-1]) + f" and {numbers[-1]}"
    return f"{NOT_IN_NOTES} The closest passages are {listed}."


def ask(
    embedder: Embedder,
    chat: ChatModel,
    plan: SearchPlan,
    *,
    candidates: CandidateReads,
    vectors: Vectors,
    queue: Queue,
    documents: Documents,
    context_window: int,
    on_text: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> Answer:
    """Retrieve the passages of the plan's question and have the chat model answer from them
    alone, in a prompt that fits `context_window` tokens.

    With the plan's owner, a first-person question is the owner's (retrieval adds the name,
    and the model is told which notes are theirs). With its reranker, the passages are the
    ones it judged best, as `kb query --rerank` lists them. `on_text` receives
    the answer as it streams, citations that name no passage already removed. Once `stop` is
    set, the model's stream is closed at its next piece and Stopped raised.
    """
    question, owner = plan.text, plan.owner
    started = time.perf_counter()
    found = hybrid.run(embedder, plan, candidates=candidates, vectors=vectors, queue=queue)
    hits = found.hits
    retrieved = time.perf_counter()
    if not hits:
        if on_text:
            on_text(NOTHING_FOUND)
        elapsed = retrieved - started
        return Answer(
            question,
            NOTHING_FOUND,
            [],
            [],
            None,
            True,
            Timings(elapsed, None, 0.0, elapsed),
            found.mode_used,
            found.warnings,
        )
    sources = _sources(
        hits, question, owner, context_window, candidates=candidates, documents=documents
    )
    prompt = prompts.answer_prompt(
        question,
        [(s.header(), s.text) for s in sources],
        owner=owner,
        max_tokens=ANSWER_MAX_TOKENS,
        context_window=context_window,
    )
    citations = CitationFilter(s.number for s in sources)
    if stop is not None and stop.is_set():
        raise Stopped  # gone while the passages were found: the model is not asked
    text, first = _streamed(chat.stream(prompt), citations, stop, on_text)
    done = time.perf_counter()
    if not text:
        # Seen when a server drops the request for another one (llama.cpp's server does).
        raise LLMError(f"the chat model '{chat.name}' returned an empty answer: ask again")
    answer = Answer(
        question=question,
        text=text,
        sources=sources,
        cited=citations.cited,
        model=chat.name,
        not_in_notes=says_not_in_notes(text),
        timings=Timings(
            retrieved - started,
            None if first is None else first - retrieved,
            done - retrieved,
            done - started,
        ),
        mode_used=found.mode_used,
        warnings=found.warnings,
    )
    folders = documents.folder_names(sorted({h.vault for h in hits}))
    checked = held_to_passages(answer, owner=owner, folders=folders)
    if checked.withdrawn is not None and on_text:
        on_text(f"\n\n{checked.text}")
    return checked


def _sources(
    hits: Sequence[SearchHit],
    question: str,
    owner: str | None,
    window: int,
    *,
    candidates: CandidateReads,
    documents: Documents,
) -> list[Source]:
    """The hits as the numbered passages the model reads, as many as the prompt's budget of
    a `window` of tokens holds, each with its note's facts and writer."""
    notes = [(h.vault, h.path) for h in hits]
    budget = prompts.answer_budget(
        question, owner=owner, max_tokens=ANSWER_MAX_TOKENS, context_window=window
    )
    return number_sources(
        hits,
        candidates.note_info(notes),
        budget,
        owner=owner,
        authors=documents.authorship(notes),
    )


def _streamed(
    pieces: Iterator[str],
    citations: CitationFilter,
    stop: threading.Event | None,
    on_text: Callable[[str], None] | None,
) -> tuple[str, float | None]:
    """The model's answer as it streams, citations that name no passage removed and each
    piece handed to `on_text`; and when its first piece came (perf_counter), None for none.
    Once `stop` is set, the stream is closed at its next piece and Stopped raised."""
    shown: list[str] = []
    first: float | None = None
    try:
        for piece in pieces:
            if stop is not None and stop.is_set():
                raise Stopped
            if first is None:
                first = time.perf_counter()
            if text := citations.feed(piece):
                shown.append(text)
                if on_text:
                    on_text(text)
    finally:
        close_stream(pieces)
    if tail := citations.close():
        shown.append(tail)
        if on_text:
            on_text(tail)
    return "".join(shown).strip(), first


def held_to_passages(answer: Answer, *, owner: str | None, folders: Collection[str] = ()) -> Answer:
    """The answer as it stands when its passages hold what it says; else kb's own reply in
    its place (`closest`), the model's words kept as `withdrawn`. An answer that already
    says the notes do not know stands. `folders`: the names of the folders of the vaults
    the passages come from (someone a folder is named for is someone kb knows)."""
    if answer.not_in_notes:
        return answer
    reads = [Read(s.number, s.header(), s.text, s.writer) for s in answer.sources]
    found = check(answer.text, answer.question, reads, answer.cited, owner=owner, folders=folders)
    why = found.why
    if why is None:
        # Its sources are the passages that hold it, whatever numbers the model wrote.
        return replace(answer, cited=list(found.behind)) if found.behind else answer
    return replace(
        answer,
        text=closest(answer.sources),
        cited=[],
        not_in_notes=True,
        withdrawn=answer.text,
        withdrawn_because=why,
    )
