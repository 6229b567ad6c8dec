"""Notes into the index: the sync (`indexer`) and enrichment (`enrich`, run by `worker`)
build each note's rows the same way (`building`, `embedding`); `verify` checks the index
against the vaults."""
