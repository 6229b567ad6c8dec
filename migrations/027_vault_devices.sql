-- The device (st_dev) each vault's folder was on at its last sync: a folder that holds no note
-- and is on another device is taken for the mount point of a disk that went (unmounted), and
-- its notes are kept rather than deleted (kb.vault.presence).
ALTER TABLE vaults ADD COLUMN device bigint;
