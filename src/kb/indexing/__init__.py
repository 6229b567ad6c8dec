"""Notes into the index, the processes that run for a while: the sync (`indexer`, its links
resolved by `linking`), the queued vectors (`vectorize`) and LLM context (`enrich`), run by
`worker`; `verify` checks the index against the vaults. A note's rows are made and written by
kb.note_writing, the same way for the sync and enrichment."""
