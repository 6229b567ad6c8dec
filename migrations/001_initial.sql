-- kb's schema: one row per note, one row per chunk of a note.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE documents (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    vault         text        NOT NULL,
    path          text        NOT NULL,  -- POSIX path relative to the vault root
    content_hash  text        NOT NULL,  -- sha256 of the file's bytes
    size          bigint      NOT NULL,
    mtime_ns      bigint      NOT NULL,
    metadata      jsonb       NOT NULL DEFAULT '{}'::jsonb,  -- frontmatter, tags, links
    personal      boolean     NOT NULL DEFAULT false,
    summary       text,
    summary_key   text,                  -- hash of everything the summary was made from
    indexed_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (vault, path)
);
CREATE INDEX documents_content_hash_idx ON documents (content_hash);
CREATE INDEX documents_summary_key_idx ON documents (summary_key);

CREATE TABLE chunks (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id   bigint  NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    position      integer NOT NULL,
    header_path   text[]  NOT NULL,
    content       text    NOT NULL,     -- the raw chunk, what queries return
    content_hash  text    NOT NULL,
    start_line    integer NOT NULL,     -- 1-based, inclusive, in the file
    end_line      integer NOT NULL,
    summary       text    NOT NULL,
    summary_key   text    NOT NULL,
    rewrite       text,                 -- third-person rewrite (personal notes only)
    rewrite_key   text,
    full_context  text    NOT NULL,     -- what is embedded
    context_hash  text    NOT NULL,
    chat_model    text    NOT NULL,
    embedding     vector,               -- dimension fixed per embedding model, see store.py
    embed_model   text,
    UNIQUE (document_id, position)
);
CREATE INDEX chunks_summary_key_idx ON chunks (summary_key);
CREATE INDEX chunks_rewrite_key_idx ON chunks (rewrite_key);
CREATE INDEX chunks_context_hash_idx ON chunks (context_hash, embed_model);

-- Files that could not be indexed on the last attempt, shown by `kb status`.
CREATE TABLE failures (
    vault      text        NOT NULL,
    path       text        NOT NULL,
    error      text        NOT NULL,
    failed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (vault, path)
);

-- Small key/value state: the active embedding model, the last sync.
CREATE TABLE state (
    key    text PRIMARY KEY,
    value  jsonb NOT NULL
);
