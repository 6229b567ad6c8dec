-- A chunk's passages: extra texts (today its paragraphs in their writer's voice, see
-- kb.context.passage_texts), each embedded as a vector of its own. The vector list scores a chunk by the
-- best of its own vector and its passages'. Like chunks' vectors, a passage's vector is
-- untyped: its HNSW index is built for the active model's size (kb.store.passages).
CREATE TABLE passages (
    id           bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chunk_id     bigint  NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    position     integer NOT NULL,
    kind         text    NOT NULL CHECK (kind IN ('paragraph')),
    text         text    NOT NULL,  -- what is embedded
    text_hash    text    NOT NULL,  -- sha256 of text: the vector's cache key
    embedding    vector,
    embed_model  text,
    UNIQUE (chunk_id, position)
);
CREATE INDEX passages_text_hash_idx ON passages (text_hash, embed_model);
CREATE INDEX passages_unembedded_idx ON passages (id) WHERE embedding IS NULL;
