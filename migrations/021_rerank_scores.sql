-- A cross-encoder's re-ranking scores (a /rerank server's or a local ONNX model's): how well a
-- chunk answers a query, cached under a hash of the re-ranker, the model, the query and the
-- text shown, so a repeated query costs no model call. Apart from the chat model's 0..10
-- judgements (relevance): these are real numbers on each model's own scale (a logit, a
-- probability), comparable only within one model.
CREATE TABLE rerank_scores (
    key        text PRIMARY KEY,
    score      double precision NOT NULL,
    model      text NOT NULL,
    scored_at  timestamptz NOT NULL DEFAULT now()
);
