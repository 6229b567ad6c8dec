-- Three speeds: a note is stored with its full-text terms at once, its vectors are embedded
-- next from this queue, and its LLM context comes last (enrichment_queue). A chunk or a
-- passage without a vector is searched by its words alone until its note's item is done.

-- One item per note with a chunk or a passage still waiting for a vector, the same shape as
-- enrichment_queue's: saving the note again replaces its item (a new ticket), workers claim
-- items newest first with FOR UPDATE SKIP LOCKED under a lease, and a failed attempt waits
-- for its back-off. Vectors are written only to rows whose text is still the one embedded,
-- so a result that comes late is harmless.
CREATE SEQUENCE embedding_tickets;
CREATE TABLE embedding_queue (
    document_id   bigint      PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    ticket        bigint      NOT NULL DEFAULT nextval('embedding_tickets'),
    content_hash  text        NOT NULL,
    priority      bigint      NOT NULL,   -- the note's mtime_ns: newest first
    fresh         boolean     NOT NULL DEFAULT false,  -- ignore vectors cached (kb reindex)
    queued_at     timestamptz NOT NULL DEFAULT now(),
    attempts      integer     NOT NULL DEFAULT 0,
    last_error    text,
    not_before    timestamptz NOT NULL DEFAULT now(),
    lease_owner   text,
    lease_until   timestamptz
);
CREATE INDEX embedding_queue_priority_idx ON embedding_queue (priority DESC);

-- Items finished, kept a day for the rate and the ETA (as enrichment_done).
CREATE TABLE embedding_done (
    ticket       bigint      PRIMARY KEY,
    document_id  bigint      NOT NULL,
    worker       text        NOT NULL,
    claimed_at   timestamptz NOT NULL,
    done_at      timestamptz NOT NULL DEFAULT now(),
    embedded     integer     NOT NULL   -- texts sent to the embedder for it
);
CREATE INDEX embedding_done_at_idx ON embedding_done (done_at);

-- Notes left without a vector before this queue (a model change cut short) wait in it.
INSERT INTO embedding_queue (document_id, content_hash, priority)
SELECT d.id, d.content_hash, d.mtime_ns FROM documents d
 WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id AND c.embedding IS NULL)
    OR EXISTS (SELECT 1 FROM passages p JOIN chunks c ON c.id = p.chunk_id
                WHERE c.document_id = d.id AND p.embedding IS NULL);
