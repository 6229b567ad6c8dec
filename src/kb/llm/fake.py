"""A deterministic, offline provider that counts its calls.

It lets kb run end to end with no model server (tests, demos on a laptop in a
train): summaries are keyword digests (several-part prompts get one numbered line per
part), the first-person rewrite is a pronoun substitution, a note's writer is its `author`
property, statements are its sentences said of the writer (questions ask whether the writer
said them), and embeddings are a hashed bag of words, so texts that share words are close in
cosine.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence

from kb.models.base import Prompt, TokenUsage
from kb.models.providers import ProviderSpec

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    (
        "a an and are as at be by for from has have he her his i in is it its me my mine "
        "myself of on or our she that the their they this to was we were with you your"
    ).split()
)
_FIRST_PERSON = re.compile(r"\b(I|me|my|mine|myself)\b", re.IGNORECASE)
_WIKILINK = re.compile(r"(\[\[[^\]]*\]\])")
_PIECE = re.compile(r"\S+\s*")
_SENTENCE = re.compile(r"(?<=[.!?])\s")
RECENT_PROMPTS = 512


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _keywords(text: str, n: int) -> str:
    counts = Counter(_words(text))
    return ", ".join(w for w, _ in counts.most_common(n))


class FakeChat:
    def __init__(self, name: str = "fake-chat") -> None:
        self.name = name
        self.calls: Counter[str] = Counter()
        # The latest prompts only, for tests to read: a daemon on the offline provider runs
        # for months and must not keep every prompt it ever saw.
        self.prompts: deque[Prompt] = deque(maxlen=RECENT_PROMPTS)
        self.usage = TokenUsage()
        self._lock = threading.Lock()

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def complete(self, prompt: Prompt) -> str:
        with self._lock:
            self.calls[prompt.task] += 1
            self.prompts.append(prompt)
        answer = self._answer(prompt)
        # Words stand in for tokens: there is no tokenizer here.
        sent = sum(len(m["content"].split()) for m in prompt.messages())
        self.usage.add(sent, len(answer.split()))
        return answer

    def stream(self, prompt: Prompt) -> Iterator[str]:
        # Word by word, as a server streams tokens.
        yield from _PIECE.findall(self.complete(prompt))

    def _answer(self, prompt: Prompt) -> str:
        inputs = prompt.inputs
        if prompt.task == "rewrite":
            owner = inputs["owner"]
            replacement = {
                "i": owner,
                "me": owner,
                "myself": owner,
                "my": f"{owner}'s",
                "mine": f"{owner}'s",
            }
            # Link targets are names of other notes, not the writer speaking.
            parts = _WIKILINK.split(inputs["content"])
            parts[::2] = [
                _FIRST_PERSON.sub(lambda m: replacement[m.group(0).lower()], part)
                for part in parts[::2]
            ]
            return "".join(parts)
        if prompt.task == "rerank":
            # The share of the query's words found in the passage, on the 0-10 scale.
            wanted = set(_words(inputs["query"]))
            found = set(_words(inputs["header_path"] + " " + inputs["passage"]))
            return str(round(10 * len(wanted & found) / max(1, len(wanted))))
        if prompt.task == "answer":
            return _grounded_answer(inputs)
        if prompt.task in ("statements", "questions"):
            return _lines(inputs, question=prompt.task == "questions")
        if prompt.task == "voice":
            # The author a note's properties name, as a model reads a byline.
            author = re.search(r"^author: (.+)$", inputs["properties"], re.MULTILINE)
            return author.group(1) if author else "unknown"
        about = f" about {inputs['owner']}" if inputs.get("owner") else ""
        if prompt.task == "file_summary":
            return _note_digest(inputs["excerpt"], about)
        if prompt.task in ("note_summary", "chunk_summaries"):
            # Numbered lines, as a model keeps to the format; each part's line says what a
            # chunk prompt of its own would have been answered.
            lines = [
                f"Part {n}: {_part_digest(inputs[f'content_{n}'], about)}"
                for n in map(int, inputs["asked"].split())
            ]
            if prompt.task == "note_summary":
                contents = (v for k, v in inputs.items() if k.startswith("content_"))
                lines.insert(0, f"Note: {_note_digest(' '.join(contents), about)}")
            return "\n".join(lines)
        return _part_digest(inputs["content"], about)


def _lines(inputs: Mapping[str, str], *, question: bool) -> str:
    """Each sentence of four words or more, said of the writer, with the note's date; or
    asked whether the writer said it."""
    writer = inputs["writer"] or "The writer"
    when = f" on {inputs['date']}" if inputs["date"] else ""
    sentences = _SENTENCE.split(" ".join(inputs["content"].split()))
    said = [
        _FIRST_PERSON.sub(writer, s.strip().rstrip(".!?"))
        for s in sentences
        if len(s.split()) >= 4 and not s.startswith("#")
    ]
    if question:
        return "\n".join(f"Did {writer} say{when} that {s}?" for s in said)
    return "\n".join(f"{writer} says{when} that {s}." for s in said)


def _note_digest(text: str, about: str) -> str:
    return f"A note{about} covering {_keywords(text, 8)}."


def _part_digest(text: str, about: str) -> str:
    return f"This part{about} covers {_keywords(text, 6)}."


def _grounded_answer(inputs: Mapping[str, str]) -> str:
    """The first sentence of the passage sharing most words with the question, cited; or
    the admission that the notes do not say, when no passage shares a word."""
    wanted = set(_words(inputs["question"]))
    shared = {
        int(key.removeprefix("passage_")): len(wanted & set(_words(text)))
        for key, text in inputs.items()
        if key.startswith("passage_")
    }
    best = max(shared, key=lambda n: (shared[n], -n), default=None)
    if best is None or shared[best] == 0:
        return "Your notes don't say."
    sentence = _SENTENCE.split(inputs[f"passage_{best}"].strip(), maxsplit=1)[0]
    return f"{sentence} [{best}]"


class FakeEmbedder:
    """Hashed bag of words; the dimension comes from a name like `hash-256`."""

    def __init__(self, name: str = "hash-256") -> None:
        self.name = name
        match = re.search(r"(\d+)$", name)
        self.dimensions = int(match.group(1)) if match else 256
        self.calls = 0
        self.texts = 0
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            self.calls += 1
            self.texts += len(texts)
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        [vector] = self.embed([text])
        return vector

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dimensions
        for word in _words(text):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dimensions
            vec[index] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vec))
        if norm == 0:
            vec[0] = 1.0
            return vec
        return [x / norm for x in vec]


PROVIDER = ProviderSpec(
    chat=lambda at: FakeChat(at.model),
    embedder=lambda at: FakeEmbedder(at.model),
    served_models=None,
    note="for tests only",
)
