"""Related notes: the notes most related to a note (or to one of its chunks), from what kb
knows of both: their links, the names one mentions of the other, their meaning, writers,
dates and tags, ordered by a ranker fitted on a vault's own links (bench/related.py)."""
