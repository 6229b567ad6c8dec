-- The length of each chunk's full-text vector (distinct lexemes), kept beside it for BM25.
-- The index lets the per-query corpus statistics (chunk count and average length for one
-- embedding model) come from an index-only scan instead of reading every chunk row.
ALTER TABLE chunks ADD COLUMN search_length integer
    GENERATED ALWAYS AS (length(to_tsvector('english', full_context))) STORED;
CREATE INDEX chunks_search_length_idx ON chunks (embed_model) INCLUDE (search_length);
