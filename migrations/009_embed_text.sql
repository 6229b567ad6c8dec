-- What the embedder reads of each chunk: its full context fitted to the embedding model's
-- window (header path and chunk first, then as much of the summaries as fits). Full-text
-- search still reads all of full_context. A row whose embed_text differs from its
-- full_context was cut to fit; `kb status` counts them.
ALTER TABLE chunks ADD COLUMN embed_text text;
UPDATE chunks SET embed_text = full_context;
ALTER TABLE chunks ALTER COLUMN embed_text SET NOT NULL;
