"""A note made into the rows a sync writes, and written: its chunk rows built
(`building`), its bytes prepared (`preparing`), notes written on file threads (`writing`)
as the sync's write plan says (`write_plan`), the embedding space followed (`space`), a
sync's events (`events`) and when a write is a bulk load (`bulk`)."""
