-- BM25 without scoring every chunk that shares a word with the query: impact-ordered
-- postings, so a search reads only the best postings of each query word, a narrow table of
-- each chunk's full-text vector to score the chunks found, and the corpus statistics
-- (document frequencies, chunk count, total length) kept up to date instead of counted at
-- query time. Everything here is maintained by triggers on `chunks`, so every way a chunk
-- comes or goes (a note saved again, deleted, a vault removed: ON DELETE CASCADE from
-- documents) keeps it exact, in the same transaction.

-- A chunk's BM25 term weight for a lexeme (k1 1.2, b 0.75) at a reference average length:
-- the order in which a search reads a lexeme's postings. Searches score the chunks they
-- find with the corpus's real average length, so the reference only decides which postings
-- come first; 64 lexemes is a typical chunk of kb's (1600 characters hold 30 to 120).
CREATE FUNCTION text_impact(frequency integer, length integer) RETURNS real
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (frequency * 2.2 / (frequency + 1.2 * (0.25 + 0.75 * length / 64.0)))::real;

-- Each chunk's full-text vector (of full_context: what is embedded, so a chunk is found by
-- its own words and those of its note's title and headings) and its length in lexemes. Kept
-- apart from `chunks`, whose wide rows push it out to TOAST storage: scoring a found chunk
-- reads this narrow row only.
CREATE TABLE text_chunks (
    chunk_id  bigint PRIMARY KEY,
    length    integer  NOT NULL,
    terms     tsvector NOT NULL
);

-- One row per (lexeme, chunk).
CREATE TABLE text_postings (
    lexeme       text COLLATE "C" NOT NULL,
    impact       real   NOT NULL,
    chunk_id     bigint NOT NULL,
    document_id  bigint NOT NULL  -- for filters: a chunk never changes document
);

-- How many chunks hold each lexeme (BM25's document frequency), and the totals behind the
-- average chunk length. Their rows are updated at every write: room left on each page keeps
-- those updates in place (HOT), with no new index entry each time.
CREATE TABLE text_lexemes (
    lexeme  text COLLATE "C" PRIMARY KEY,
    chunks  integer NOT NULL
) WITH (fillfactor = 50);
CREATE TABLE text_corpus (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    chunks   bigint NOT NULL,
    lexemes  bigint NOT NULL
) WITH (fillfactor = 10);

INSERT INTO text_chunks (chunk_id, length, terms)
SELECT id, search_length, search_text FROM chunks;
INSERT INTO text_postings (lexeme, impact, chunk_id, document_id)
SELECT w.lexeme, text_impact(cardinality(w.positions), t.length), t.chunk_id, c.document_id
  FROM text_chunks t JOIN chunks c ON c.id = t.chunk_id, unnest(t.terms) AS w;
INSERT INTO text_lexemes (lexeme, chunks)
SELECT lexeme, count(*) FROM text_postings GROUP BY lexeme;
INSERT INTO text_corpus (chunks, lexemes)
SELECT count(*), coalesce(sum(length), 0) FROM text_chunks;

-- Statistics for the planner now, rather than at autovacuum's next visit.
ANALYZE text_chunks, text_postings, text_lexemes;

-- A search reads a lexeme's postings best first; a deleted chunk's postings are found by
-- the same key (its lexemes and impacts follow from its terms), so no second index.
CREATE INDEX text_postings_order ON text_postings (lexeme, impact DESC, chunk_id)
    INCLUDE (document_id);

-- The generated full-text columns and their indexes (migrations 004 and 007) computed the
-- vector twice per chunk and served the scoring of every match; text_chunks replaces them.
ALTER TABLE chunks DROP COLUMN search_length, DROP COLUMN search_text;

-- One function for the three triggers: rows that leave (`removed`: deleted, or the old
-- version of an updated row) take their vector, postings and counts with them; rows that
-- arrive (`added`) bring theirs.
CREATE FUNCTION text_chunks_changed() RETURNS trigger LANGUAGE plpgsql AS $$
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
            SELECT a.id, a.document_id, to_tsvector('english', a.full_context) AS terms
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

CREATE TRIGGER chunks_text_added AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION text_chunks_changed();
CREATE TRIGGER chunks_text_removed AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION text_chunks_changed();
CREATE TRIGGER chunks_text_updated AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION text_chunks_changed();
