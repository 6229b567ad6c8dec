"""When a write is a bulk load: an index is then cheaper built once over all the rows than
kept up to date row by row. The vector indexes (kb.indexing.vectorize) and the text index's
postings (`bulk_bracket`, around a sync's write of notes) are dropped for one and built
again after it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kb.store.text_index import TextIndex

# From this many notes to write, and more than the index already holds (a first index, a big
# import). Inserting each vector into an HNSW graph took four times as long as the rest of
# the work (1,000 notes, two loaded cores: 63 s against 13 s without the indexes); each
# posting into the text index's B-tree, about half of what the database spends on a new
# chunk.
BULK_LOAD_NOTES = 200


def bulk_load(waiting: int, held: Callable[[], int]) -> bool:
    """Whether `waiting` notes are written without an index that holds `held()` notes
    (counted only for a write large enough to be one)."""
    return waiting >= BULK_LOAD_NOTES and waiting > held()


@contextmanager
def bulk_bracket(text_index: TextIndex, *, bulk: bool) -> Iterator[None]:
    """A write of notes: the text index's postings B-tree dropped before it when it is a bulk
    load, and built after any write that finds it missing. A write stopped midway (an
    exception) leaves it dropped, the notes written found by their words without it: the
    next sync's write builds it."""
    if bulk:
        text_index.drop()
    yield
    if not text_index.present():
        text_index.build()
