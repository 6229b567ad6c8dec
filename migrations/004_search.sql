-- Full-text search over exactly what is embedded (full_context): the text side of hybrid
-- search, so a chunk is found by its own words and by those of its file summary.
ALTER TABLE chunks ADD COLUMN search_text tsvector
    GENERATED ALWAYS AS (to_tsvector('english', full_context)) STORED;
CREATE INDEX chunks_search_text_idx ON chunks USING gin (search_text);
