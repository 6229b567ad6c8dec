-- Chunks still waiting for a vector (written before a model change finished, or cut off by
-- a lost model server). Every sync asks for them first; without this index that question
-- read the whole chunks table.
CREATE INDEX chunks_unembedded_idx ON chunks (id) WHERE embedding IS NULL;
