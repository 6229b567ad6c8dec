-- The questions a chunk answers, as the chat model wrote them (kb.chunk_writes): one a line,
-- each naming who and when. Kept under their cache key like every model output, beside the
-- statements (017) and in the same way; each is also a passage of its own, embedded as a
-- vector (kind 'question').
ALTER TABLE chunks
    ADD COLUMN questions          text,
    ADD COLUMN questions_key      text,
    ADD COLUMN questions_fallback text;
CREATE INDEX chunks_questions_key_idx ON chunks (questions_key)
    WHERE questions_key IS NOT NULL;
ALTER TABLE passages DROP CONSTRAINT passages_kind_check;
ALTER TABLE passages ADD CONSTRAINT passages_kind_check
    CHECK (kind IN ('paragraph', 'statement', 'question'));
