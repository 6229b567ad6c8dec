-- Full-text search and the embedder read different texts of a chunk. The embedder reads its
-- full context (the chunk with the model's summaries, fitted to its window: embed_text);
-- full-text search reads the chunk with its header path and what the note's title and
-- folder say (search_text), never the model's words, which lowered BM25's recall wherever it
-- was measured. The column full-text search has always read is renamed for what it holds,
-- and the trigger that keeps the postings follows it.
ALTER TABLE chunks RENAME COLUMN full_context TO search_text;

-- The trigger's function, as in 010_text_search_scale.sql, on the renamed column.
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
             WHERE o.search_text IS DISTINCT FROM n.search_text
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
            SELECT w.lexeme, text_impact(cardinality(w.positions), g.length) AS impact,
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
            SELECT a.id, a.document_id, to_tsvector('english', a.search_text) AS terms
              FROM added a
        ), kept AS (
            INSERT INTO text_chunks (chunk_id, length, terms)
            SELECT id, length(terms), terms FROM v
        ), w AS (
            SELECT w.lexeme, text_impact(cardinality(w.positions), length(v.terms)) AS impact,
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

-- Whether the embedder's text was cut to fit its window: the two texts now differ anyway,
-- so their difference no longer says it. Rows written before were cut where they differed.
ALTER TABLE chunks ADD COLUMN embed_cut boolean NOT NULL DEFAULT false;
UPDATE chunks SET embed_cut = true WHERE embed_text <> search_text;
