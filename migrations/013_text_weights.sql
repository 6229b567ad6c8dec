-- Full-text search weighs a chunk's words by where they come from (BM25F): with LLM context,
-- the chunk's own words (or its first-person rewrite) and its header path count in full, the
-- summaries after them for 0.3. At full weight, a summary's few words about the whole note,
-- repeated on every one of its chunks, outranked the one chunk whose own words answer a
-- question; left out, they no longer found what only they say (a journal whose summary names
-- its writer). 0.3 was chosen on the retrieval benchmark's datasets together (see README).

-- Where a chunk's summaries begin in full_context, in characters; NULL: nothing in it counts
-- for less (the structure and none levels, whose summaries are the note's own title, folder
-- and headings).
ALTER TABLE chunks ADD COLUMN summaries_at integer;

-- A chunk's full-text vector: its own words weighted A, its summaries left at D.
CREATE FUNCTION text_terms(full_context text, summaries_at integer) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE
        WHEN summaries_at IS NULL THEN setweight(to_tsvector('english', full_context), 'A')
        ELSE setweight(to_tsvector('english', left(full_context, summaries_at)), 'A')
             || to_tsvector('english', substr(full_context, summaries_at + 1))
    END;

-- A lexeme's frequency in a chunk, each occurrence counted by its weight (A 1, D 0.3): what
-- BM25 reads as the term frequency, here (the postings' order) and in kb.store.candidates. One
-- expression, so the planner inlines it: a search calls it for every query word of every
-- chunk it scores.
CREATE FUNCTION text_frequency(weights text[]) RETURNS float8
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN cardinality(weights) - 0.7 * cardinality(array_positions(weights, 'D'));

-- text_impact (010), for a frequency that may be fractional.
DROP FUNCTION text_impact(integer, integer);
CREATE FUNCTION text_impact(frequency float8, length integer) RETURNS real
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (frequency * 2.2 / (frequency + 1.2 * (0.25 + 0.75 * length / 64.0)))::real;

-- The chunks stored with LLM context (their note's context build names the level) get where
-- their summaries begin from the layout kb.context.full_context writes: the header path and
-- the chunk (or its rewrite), then the summaries. A row whose text does not begin that way
-- keeps NULL and counts in full, as before. No note is rebuilt.
ALTER TABLE chunks DISABLE TRIGGER chunks_text_updated;
UPDATE chunks c SET summaries_at = length(own.text)
  FROM (SELECT k.id, concat_ws(E'\n\n', nullif(array_to_string(k.header_path, ' > '), ''),
                               nullif(coalesce(k.rewrite, k.content), '')) AS text
          FROM chunks k JOIN documents d ON d.id = k.document_id
         WHERE split_part(d.context_build, '/', 2) = 'llm') AS own
 WHERE own.id = c.id AND starts_with(c.full_context, own.text);
ALTER TABLE chunks ENABLE TRIGGER chunks_text_updated;

-- Every chunk's vector and postings and the statistics made again, weighted, as in 010.
TRUNCATE text_chunks, text_postings, text_lexemes, text_corpus;
INSERT INTO text_chunks (chunk_id, length, terms)
SELECT id, length(terms), terms
  FROM (SELECT id, text_terms(full_context, summaries_at) AS terms FROM chunks) AS c;
INSERT INTO text_postings (lexeme, impact, chunk_id, document_id)
SELECT w.lexeme, text_impact(text_frequency(w.weights), t.length), t.chunk_id, c.document_id
  FROM text_chunks t JOIN chunks c ON c.id = t.chunk_id, unnest(t.terms) AS w;
INSERT INTO text_lexemes (lexeme, chunks)
SELECT lexeme, count(*) FROM text_postings GROUP BY lexeme;
INSERT INTO text_corpus (chunks, lexemes)
SELECT count(*), coalesce(sum(length), 0) FROM text_chunks;
ANALYZE text_chunks, text_postings, text_lexemes;

-- The triggers' function, as in 010_text_search_scale.sql, on weighted vectors.
CREATE OR REPLACE FUNCTION text_chunks_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- A note saved for the first time deletes its (no) old chunks.
        IF NOT EXISTS (SELECT 1 FROM removed) THEN
            RETURN NULL;
        END IF;
    ELSIF TG_OP = 'UPDATE' THEN
        -- kb replaces chunks rather than editing them; an update that leaves the text as it
        -- was (a new embedding) changes nothing here.
        IF NOT EXISTS (
            SELECT 1 FROM removed o JOIN added n ON n.id = o.id
             WHERE o.full_context IS DISTINCT FROM n.full_context
                OR o.summaries_at IS DISTINCT FROM n.summaries_at
                OR o.document_id <> n.document_id
        ) THEN
            RETURN NULL;
        END IF;
    END IF;
    -- Writers that change the statistics take their turn, until commit: two of them never
    -- lock the rows of text_lexemes in opposite orders (a deadlock). The keys spell "kb",
    -- "tx"; the daemon's writer lock uses "kb", "da".
    PERFORM pg_advisory_xact_lock(27490, 29816);
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        WITH gone AS (
            DELETE FROM text_chunks t USING removed r WHERE t.chunk_id = r.id
            RETURNING t.chunk_id, t.length, t.terms
        ), w AS (
            SELECT w.lexeme, text_impact(text_frequency(w.weights), g.length) AS impact,
                   g.chunk_id
              FROM gone g, unnest(g.terms) AS w
        ), unposted AS (
            DELETE FROM text_postings p USING w
             WHERE p.lexeme = w.lexeme AND p.impact = w.impact AND p.chunk_id = w.chunk_id
        ), uncounted AS (
            UPDATE text_corpus SET chunks = text_corpus.chunks - g.chunks,
                                   lexemes = text_corpus.lexemes - g.lexemes
              FROM (SELECT count(*) AS chunks, coalesce(sum(length), 0) AS lexemes
                      FROM gone) AS g
        )
        UPDATE text_lexemes l SET chunks = l.chunks - r.chunks
          FROM (SELECT lexeme, count(*) AS chunks FROM w GROUP BY lexeme) AS r
         WHERE l.lexeme = r.lexeme;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        WITH v AS (
            SELECT a.id, a.document_id, text_terms(a.full_context, a.summaries_at) AS terms
              FROM added a
        ), kept AS (
            INSERT INTO text_chunks (chunk_id, length, terms)
            SELECT id, length(terms), terms FROM v
        ), w AS (
            SELECT w.lexeme, text_impact(text_frequency(w.weights), length(v.terms)) AS impact,
                   v.id, v.document_id
              FROM v, unnest(v.terms) AS w
        ), posted AS (
            INSERT INTO text_postings (lexeme, impact, chunk_id, document_id)
            SELECT lexeme, impact, id, document_id FROM w
        ), counted AS (
            UPDATE text_corpus SET chunks = text_corpus.chunks + n.chunks,
                                   lexemes = text_corpus.lexemes + n.lexemes
              FROM (SELECT count(*) AS chunks, coalesce(sum(length(terms)), 0) AS lexemes
                      FROM v) AS n
        )
        INSERT INTO text_lexemes (lexeme, chunks)
        SELECT lexeme, count(*) FROM w GROUP BY lexeme
            ON CONFLICT (lexeme) DO UPDATE SET chunks = text_lexemes.chunks + EXCLUDED.chunks;
    END IF;
    RETURN NULL;
END
$$;

