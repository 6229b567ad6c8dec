-- The length of each chunk's full-text vector (distinct lexemes), kept beside it so that
-- BM25's average length is a scan of integers rather than of every tsvector.
ALTER TABLE chunks ADD COLUMN search_length integer
    GENERATED ALWAYS AS (length(to_tsvector('english', full_context))) STORED;
