-- The chat model's re-ranking judgements: how well a chunk answers a query, cached under a
-- hash of the prompt version, the model, the query and the text shown, so a repeated query
-- costs no model call.
CREATE TABLE relevance (
    key         text PRIMARY KEY,
    score       smallint,            -- 0..10; NULL when the model's answer was unusable
    chat_model  text NOT NULL,
    judged_at   timestamptz NOT NULL DEFAULT now()
);
