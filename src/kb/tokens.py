"""How many tokens an embedder reads for a text, estimated without its tokenizer.

Subword tokenizers (WordPiece, BPE, SentencePiece) give a common word one token, split long
and rare words into pieces and punctuation into tokens of its own. The estimate counts a
word as one token per six characters, started, and each other symbol as one: on English
prose and Markdown it errs toward more tokens than the models' own tokenizers count, so a
text it says fits does fit.
"""

from __future__ import annotations

import re

_PIECES = re.compile(r"\w+|[^\w\s]")


def estimate(text: str) -> int:
    return sum(1 + (len(p) - 1) // 6 for p in _PIECES.findall(text))


def cut(text: str, budget: int) -> str:
    """The longest start of `text`, ending at a piece, whose estimate is within `budget`."""
    used = 0
    for match in _PIECES.finditer(text):
        used += 1 + (len(match.group()) - 1) // 6
        if used > budget:
            return text[: match.start()].rstrip()
    return text
