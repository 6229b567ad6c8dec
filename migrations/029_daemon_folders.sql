-- The folder of each vault a daemon watches, in the order of `vaults`: two configurations may
-- give one name to two folders, and `kb status` lists a daemon only where it watches the
-- config's vault at the config's folder (empty: not known, a daemon before 029).
ALTER TABLE daemons ADD COLUMN folders text[] NOT NULL DEFAULT '{}';
