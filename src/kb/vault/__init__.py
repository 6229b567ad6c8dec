"""The vault's notes and their syntax: which files are notes and reading them (`notes`), an
Obsidian vault's settings (`obsidian`), frontmatter and body (`parsing`), chunks and their
header paths (`chunking`), Obsidian's syntax as read (`wikitext`), a note's links
(`link_rules`), whether its folder is there (`presence`), and what a sync must do
(`sync_plan`). A note's date (kb.dates) and how names compare (kb.names) sit below both this
folder and the config, which reads them too."""
