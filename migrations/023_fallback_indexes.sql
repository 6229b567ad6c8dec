-- The notes holding a fallback of another chat model (worth another try) are found at the
-- start of every sync. The indexes of 002 covered the file summary and the chunks' summaries
-- and rewrites, not the voice (015), statements (017) or questions (019) added since, so
-- that search read every chunk of the vault: half a second at 10,000 notes for a sync
-- with nothing to do. Fallbacks are rare: these indexes hold only the rows that have one.
DROP INDEX documents_summary_fallback_idx;
CREATE INDEX documents_fallback_idx ON documents (vault)
    WHERE summary_fallback IS NOT NULL OR voice_fallback IS NOT NULL;
DROP INDEX chunks_fallback_idx;
CREATE INDEX chunks_fallback_idx ON chunks (document_id)
    WHERE summary_fallback IS NOT NULL OR rewrite_fallback IS NOT NULL
       OR statements_fallback IS NOT NULL OR questions_fallback IS NOT NULL;
