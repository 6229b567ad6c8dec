-- Two-speed indexing: a note is stored at once with the context known without a model, and
-- its LLM context (file summary, chunk summaries, first-person rewrites) is written later by
-- workers (`kb worker`, the daemon, `kb index --wait`) that drain this queue.

-- One item per note that waits for its LLM context. Queuing a note again (it was edited
-- before its turn) replaces its item: a new ticket, content hash and priority, so it is
-- enriched once, for its latest content. A worker claims items newest first with
-- FOR UPDATE SKIP LOCKED and holds a lease it renews while it works; a worker that dies
-- leaves its lease to expire, and another worker takes the item. An enriched note is
-- written only if its item still has the ticket that was claimed.
CREATE SEQUENCE enrichment_tickets;
CREATE TABLE enrichment_queue (
    document_id   bigint      PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    ticket        bigint      NOT NULL DEFAULT nextval('enrichment_tickets'),
    content_hash  text        NOT NULL,   -- the note's version this item is for
    priority      bigint      NOT NULL,   -- the note's mtime_ns: newest first
    fresh         boolean     NOT NULL DEFAULT false,  -- ignore cached outputs (kb reindex)
    queued_at     timestamptz NOT NULL DEFAULT now(),
    attempts      integer     NOT NULL DEFAULT 0,
    last_error    text,
    not_before    timestamptz NOT NULL DEFAULT now(),  -- back-off after a failed attempt
    lease_owner   text,
    lease_until   timestamptz
);
CREATE INDEX enrichment_queue_priority_idx ON enrichment_queue (priority DESC);

-- One row per item finished, kept a day: the rate and the ETA `kb status` shows. The ticket
-- is the key, so no item is ever recorded done twice.
CREATE TABLE enrichment_done (
    ticket       bigint      PRIMARY KEY,
    document_id  bigint      NOT NULL,
    worker       text        NOT NULL,
    claimed_at   timestamptz NOT NULL,
    done_at      timestamptz NOT NULL DEFAULT now(),
    llm_calls    integer     NOT NULL
);
CREATE INDEX enrichment_done_at_idx ON enrichment_done (done_at);

-- The running workers, kept fresh by their heartbeat (as `daemons` is for daemons).
CREATE TABLE workers (
    id                  text PRIMARY KEY,          -- host:pid:tag
    host                text        NOT NULL,
    pid                 integer     NOT NULL,
    concurrency         integer     NOT NULL,      -- notes it enriches at once
    in_hand             integer     NOT NULL DEFAULT 0,
    heartbeat_interval  double precision NOT NULL,  -- seconds
    started_at          timestamptz NOT NULL DEFAULT now(),
    heartbeat_at        timestamptz NOT NULL DEFAULT now(),
    last_error          text
);
