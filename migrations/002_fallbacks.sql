-- Outputs a model got wrong (echo, refusal, empty, runaway) are stored as structural
-- context instead. These columns name the chat model that failed, NULL when the stored
-- text is the model's own answer: a run with another model asks only for these again.
ALTER TABLE documents ADD COLUMN summary_fallback text;
ALTER TABLE chunks ADD COLUMN summary_fallback text;
ALTER TABLE chunks ADD COLUMN rewrite_fallback text;

CREATE INDEX documents_summary_fallback_idx ON documents (vault) WHERE summary_fallback IS NOT NULL;
CREATE INDEX chunks_fallback_idx ON chunks (document_id)
    WHERE summary_fallback IS NOT NULL OR rewrite_fallback IS NOT NULL;
