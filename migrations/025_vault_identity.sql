-- Which configuration holds each vault. Several configurations may share one index: a vault
-- is known by its name and its folder, and by the config file that last synced it with the
-- settings its notes were built with, so that a second configuration that gives the name to
-- another folder, the folder another name, or the vault other settings is refused rather
-- than let the two take each other's rows at every sync (kb.vault.sync_plan.vault_refusal).
ALTER TABLE vaults ADD COLUMN config text;     -- resolved path; NULL: not known (or no file)
ALTER TABLE vaults ADD COLUMN settings jsonb;  -- {"personal": "...", ...}; NULL: not known

-- The vaults each daemon watches: `kb status` lists a configuration's own daemons, and
-- `kb forget` refuses a vault a running daemon watches.
ALTER TABLE daemons ADD COLUMN vaults text[] NOT NULL DEFAULT '{}';

-- Vectors of texts whose notes a sync deleted or `kb forget` removed, by the text's hash and
-- model, as kept_outputs keeps the model's outputs: a note put back is embedded no more.
CREATE TABLE kept_vectors (
    text_hash   text   NOT NULL,
    embed_model text   NOT NULL,
    embedding   vector NOT NULL,
    PRIMARY KEY (text_hash, embed_model)
);
