-- The vaults the index holds, by name, with the folder each was last synced from. Several
-- configurations may share one database: a sync touches only the vaults its config names,
-- and a vault renamed in a config is found again by its folder and keeps its rows. A vault no
-- config names stays until `kb forget` removes it.
CREATE TABLE vaults (
    name      text        PRIMARY KEY,
    folder    text,                     -- resolved; NULL for a vault stored before 020
    synced_at timestamptz
);
INSERT INTO vaults (name)
SELECT vault FROM documents UNION SELECT vault FROM failures
ON CONFLICT DO NOTHING;

-- Model outputs of notes a `kb forget` removed, by cache key: content enriched once is never
-- sent to the model again, whichever vault it comes back in. A fallback (structural context
-- where the model's answer was rejected) is kept with the model that failed, as in the rows.
CREATE TABLE kept_outputs (
    key      text PRIMARY KEY,
    text     text NOT NULL,
    fallback text
);

-- The vaults a worker builds the notes of (empty: every vault): `kb index --wait` watches the
-- workers of its own vaults, not another configuration's.
ALTER TABLE workers ADD COLUMN vaults text[] NOT NULL DEFAULT '{}';
