-- A chunk's statements, as the chat model wrote them (kb.statements): one fact a line, each
-- naming who and when. Kept under their cache key like every model output; each is also a
-- passage of its own, embedded as a vector (kind 'statement').
ALTER TABLE chunks
    ADD COLUMN statements          text,
    ADD COLUMN statements_key      text,
    ADD COLUMN statements_fallback text;
CREATE INDEX chunks_statements_key_idx ON chunks (statements_key)
    WHERE statements_key IS NOT NULL;
ALTER TABLE passages DROP CONSTRAINT passages_kind_check;
ALTER TABLE passages ADD CONSTRAINT passages_kind_check CHECK (kind IN ('paragraph', 'statement'));
