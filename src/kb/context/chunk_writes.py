"""What the chat model writes of each chunk, one item a line, each naming who and when: the
facts it holds (statements) and the questions it answers (doc2query).

The chat model writes them from the chunk, told who the note's "I" is (kb.context.voices) and the
note's date, so "I won last week" can become "Nate won a tournament in the week before 21
January 2022", or "When did Nate win his first video game tournament?". Each line kept is
then embedded as a vector of its own (kb.context.passage_texts): a question about one fact of a
long chunk matches the statement of that fact, or the question it answers, better than the
chunk's own vector.

A small model fails in known ways: it copies the note's lines under a speaker label, lists
bare dates, keeps "I", invents dates. Every line is checked and dropped when it fails; only
what passes is kept. One set of checks serves every kind, each kind's limits given by its
`ChunkWriteSpec`. Pure functions.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kb.config import ChunkWrite
from kb.context.voices import FIRST_PERSON
from kb.prompting import prompts
from kb.prompting.outputs import Output
from kb.store.passages import PassageKind


@dataclass(frozen=True)
class ChunkWriteSpec:
    """One kind of lines the model writes of each chunk: how it is asked, checked, cached
    and searched. Its kind names it everywhere: in `context.writes`, as its prompt's task
    and wording (kb.prompting.prompts.lines_prompt), first in its cache key, and in its chunk
    columns (`<kind>`, `<kind>_key`, `<kind>_fallback`)."""

    kind: ChunkWrite
    passage: PassageKind  # what each line kept is among its chunk's passages
    version: str  # its prompt's (kb.prompting.prompts): in its cache key and in the notes' build id
    max_tokens: int  # room for `most` lines of twenty-odd tokens; a runaway stops soon
    most: int  # lines kept at most: a runaway list is noise
    max_words: int
    question: bool  # each line must be a question


STATEMENTS = ChunkWriteSpec(
    kind="statements",
    passage="statement",
    version=prompts.STATEMENTS_VERSION,
    max_tokens=320,
    most=12,
    max_words=40,
    question=False,
)
# Fewer and shorter than statements: a question asks after one fact, and eight of them
# cover what a chunk answers.
QUESTIONS = ChunkWriteSpec(
    kind="questions",
    passage="question",
    version=prompts.QUESTIONS_VERSION,
    max_tokens=240,
    most=8,
    max_words=30,
    question=True,
)
SPECS: Mapping[ChunkWrite, ChunkWriteSpec] = {s.kind: s for s in (STATEMENTS, QUESTIONS)}
# Bump when the checks change: every note with lines is rebuilt, its cached lines read
# through the checks again (`read_again`), so an index keeps no line today's checks drop.
# 2: words from nowhere; dates resolved from the chunk's relative words.
CHECKS_VERSION = "2"

_MIN_WORDS = 4
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)]|(?:statement|question|q)\s*\d*\s*:)\s*", re.I)
# "Nate: Thanks, Joanna!": a line of the note under a speaker's label, not a statement.
_LABEL = re.compile(r"^[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,2}:\s")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?")
_CAPITALISED = re.compile(r"\b[A-Z][\w'\u2019-]+")
_YEAR = re.compile(r"\b(?:1[89]|2[01])\d\d\b")
# Words that date something relative to the note, and how many months from its date
# resolving them may reach.
_RELATIVE_TO = r"(?:last|next|previous|coming|ago|earlier|later|this|that)"
_RELATIVE = (
    (
        re.compile(
            r"\b(?:yesterday|tomorrow|tonight|ago|(?:mon|tues|wednes|thurs|fri|satur|sun)day|"
            r"(?:last|next) (?:week|weekend))\b",
            re.IGNORECASE,
        ),
        1,
    ),
    (re.compile(rf"\b{_RELATIVE_TO}\b.{{0,20}}\bmonths?\b|\bmonths? ago\b", re.I), 6),
    (re.compile(rf"\b{_RELATIVE_TO}\b.{{0,20}}\byears?\b|\byears? ago\b", re.I), 12),
)
_MONTHS = [m.lower() for m in calendar.month_name[1:]]
_MONTH = re.compile(r"\b(" + "|".join(m for m in calendar.month_name[1:]) + r")\b", re.IGNORECASE)
# Words a restatement adds to what a note says, and months (checked on their own).
_FILLER = frozenset(
    "about also after again before being both during from have having into just more most "
    "much only other over some such than that their them then there these they this those "
    "through very what when where which while will with would your says said plans planned "
    "mentions mentioned talks talked shares shared tells told asks asked feels felt wants "
    "wanted thinks thought does doing going".split()
) | {m.lower() for m in calendar.month_name[1:]}
# "Nate wrote the note on 21 January 2022": about the note, not a fact in it.
_ABOUT_THE_NOTE = re.compile(r"\b(?:wrote|writes|written|write)\s+(?:the|this)\s+note\b", re.I)
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”")
# Capitalised words that start sentences, or questions, without naming anyone.
_COMMON = frozenset(
    "the a an this that these those it they he she we you there here his her their its "
    "in on at for and but or so then when after before during "
    "what who whom whose where why how which did does do is was were has have had can could "
    "would should".split()
)


@dataclass(frozen=True)
class Written:
    """What was kept of the model's answer, and why each dropped line was dropped."""

    kept: tuple[str, ...]
    dropped: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.kept)


def read_lines(
    answer: str, spec: ChunkWriteSpec, *, source: str, writer: str | None, date: str | None
) -> Written:
    """The usable lines of `answer`, written from the chunk `source` as `spec` asks.

    A line is kept when it has 4 to `spec.max_words` words (and is a question ending in "?"
    when `spec` asks for questions), says no "I", is not a labelled line of the chunk, names
    someone the chunk or the writer names (when the note has a writer: a manual's facts are
    about things), and every year and month it gives is the chunk's or the note's date's;
    repeats are dropped, and lines past `spec.most`."""
    known = f"{source}\n{writer or ''}\n{date or ''}"
    held = _stems(known)
    names = {_name(w) for w in _CAPITALISED.findall(known)} - _COMMON if writer else None
    dates = {m.lower() for m in _MONTH.findall(known)} | set(_YEAR.findall(known))
    dates |= _resolvable(source, date)
    lines = {_squeeze(line) for line in source.splitlines() if line.strip()}
    kept: list[str] = []
    dropped: list[str] = []
    for raw in answer.splitlines():
        line = _BULLET.sub("", raw.strip()).strip()
        if not line:
            continue
        problem = _problem(line, spec, names=names, dates=dates, lines=lines, held=held, seen=kept)
        if problem:
            dropped.append(problem)
        elif len(kept) < spec.most:
            kept.append(line)
    return Written(tuple(kept), tuple(dropped))


def read_again(
    output: Output, spec: ChunkWriteSpec, *, source: str, writer: str | None, date: str | None
) -> Output:
    """A cached answer's kept lines, read through today's checks (what an older version
    kept may be dropped now; nothing dropped comes back)."""
    if output.fallback:
        return output
    written = read_lines(output.text, spec, source=source, writer=writer, date=date)
    return Output(written.text, fallback=not written.kept)


def _resolvable(source: str, date: str | None) -> set[str]:
    """The months and years a line may give that the note does not spell out: resolving
    the chunk's words for time relative to its dated note ("yesterday", "on Friday": the
    month around the note's; "last month": half a year; "next year": a year either side).
    None without such words, so a date from nowhere is still dropped."""
    year, month = _YEAR.search(date or ""), _MONTH.search(date or "")
    if year is None or month is None:
        return set()
    reach = max((months for words, months in _RELATIVE if words.search(source)), default=0)
    at = int(year.group()) * 12 + _MONTHS.index(month.group().lower())
    around = [divmod(at + step, 12) for step in range(-reach, reach + 1)]
    return {_MONTHS[m] for _, m in around} | {str(y) for y, _ in around}


def _problem(
    line: str,
    spec: ChunkWriteSpec,
    *,
    names: set[str] | None,
    dates: set[str],
    lines: set[str],
    held: set[str],
    seen: list[str],
) -> str | None:
    words = _WORD.findall(line)
    if not _MIN_WORDS <= len(words) <= spec.max_words:
        return "not a sentence"
    if spec.question and not line.endswith("?"):
        return "not a question"
    if _LABEL.match(line) or _squeeze(line) in lines:
        return "a line of the note"
    if _ABOUT_THE_NOTE.search(line):
        return "about the note"
    if FIRST_PERSON.search(_QUOTED.sub(" ", line)):
        return "first person"
    if names is not None and not any(_name(w) in names for w in _CAPITALISED.findall(line)):
        return "names no one"
    given = {m.lower() for m in _MONTH.findall(line)} | set(_YEAR.findall(line))
    if given - dates:
        return "a date the note does not give"
    said = _stems(line)
    if len(said - held) > len(said) / 2:
        return "words the note does not hold"
    if line in seen:
        return "repeated"
    return None


def _stems(text: str) -> set[str]:
    """The content words of `text`, each cut to its first five letters (so "painted" is
    "paint"), without months and the words any restatement adds."""
    words = (w.lower() for w in _WORD.findall(text))
    return {w[:5] for w in words if len(w) > 3 and w.isalpha() and w not in _FILLER}


def _name(word: str) -> str:
    # "Who chose the tiles for Maria's kitchen?" names Maria.
    return re.sub(r"['\u2019]s$", "", word.lower())


def _squeeze(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))
