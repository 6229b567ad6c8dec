-- `kb daemon`: one row per running daemon (the writer and any standby), kept fresh by its
-- heartbeat. A row whose heartbeat is older than a few intervals belongs to a dead daemon.
CREATE TABLE daemons (
    id                  text PRIMARY KEY,          -- host:pid
    host                text        NOT NULL,
    pid                 integer     NOT NULL,
    role                text        NOT NULL,      -- 'writer' or 'standby'
    activity            text        NOT NULL DEFAULT '',
    queue_length        integer     NOT NULL DEFAULT 0,
    heartbeat_interval  double precision NOT NULL,  -- seconds
    started_at          timestamptz NOT NULL DEFAULT now(),
    heartbeat_at        timestamptz NOT NULL DEFAULT now(),
    last_error          text
);
