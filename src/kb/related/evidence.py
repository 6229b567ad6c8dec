"""What kb knows of each note related to a source: the candidates of every kind (named in
its text, near in the link graph, near in meaning) joined into one record a note. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kb.store.nearby import Near, Neighbour, RelatedNote


@dataclass(frozen=True)
class Evidence:
    """A candidate note and what relates it to the source."""

    note: RelatedNote
    mention: str | None  # the name of it the source's text holds
    mentions_source: bool  # its text holds one of the source's names
    neighbour: Neighbour | None
    near: Near | None


def joined(
    notes: Mapping[int, RelatedNote],
    *,
    mentions: Mapping[int, str],
    mentioning: set[int],
    neighbours: Sequence[Neighbour],
    near: Sequence[Near],
) -> list[Evidence]:
    """One record for every candidate `notes` holds, in id order."""
    by_neighbour = {n.document_id: n for n in neighbours}
    by_near = {n.document_id: n for n in near}
    return [
        Evidence(
            note=notes[i],
            mention=mentions.get(i),
            mentions_source=i in mentioning,
            neighbour=by_neighbour.get(i),
            near=by_near.get(i),
        )
        for i in sorted(notes)
    ]
