-- The database backend of each daemon's own connection (the one holding the writer lock).
-- A daemon that dies drops that connection at once, so `kb status` tells it is gone from
-- the backend's absence, without waiting for its heartbeat to go stale.
ALTER TABLE daemons ADD COLUMN backend_pid integer;
