"""The vault's notes and their syntax: which files are notes and reading them (`notes`), an
Obsidian vault's settings (`obsidian`), frontmatter and body (`parsing`), chunks and their
header paths (`chunking`), Obsidian's syntax as read (`wikitext`), a note's date (`dates`,
`moment`), how names compare (`names`), and what a sync must do (`sync_plan`)."""
