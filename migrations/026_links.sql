-- A note's links as rows (kb.vault.link_rules): each wikilink, embed and Markdown link to a note,
-- with the chunk and line it sits on, and the note it leads to; NULL while it leads to none
-- (no such note, or one kb does not index: an ignored or excluded note is never linked to).
CREATE TABLE links (
    document_id  bigint  NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    position     integer NOT NULL,  -- the link's place among its note's links
    chunk        integer,           -- the position of the chunk holding it (chunks' ids
                                    -- change when a note is written again)
    line         integer NOT NULL,  -- 1-based, in the file
    kind         text    NOT NULL CHECK (kind IN ('wikilink', 'embed', 'markdown')),
    target       text    NOT NULL,  -- as written: "folder/Note"
    anchor       text    NOT NULL,  -- "Heading", "^block", or ''
    display      text    NOT NULL,  -- the text shown, or ''
    target_key   text    NOT NULL,  -- the name it looks up (kb.vault.link_rules.link_key)
    target_id    bigint  REFERENCES documents (id) ON DELETE SET NULL,
    PRIMARY KEY (document_id, position)
);
CREATE INDEX links_target_id_idx ON links (target_id);
-- A note added, moved or deleted re-resolves the links that name it, found by this.
CREATE INDEX links_target_key_idx ON links (target_key);

-- The names links find a note by (its file name's, its aliases'; kb.vault.link_rules.note_keys).
CREATE TABLE note_names (
    document_id  bigint NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    key          text   NOT NULL,
    PRIMARY KEY (document_id, key)
);
CREATE INDEX note_names_key_idx ON note_names (key);

-- Which extraction of links a note's rows hold: 0 for a note indexed before links were
-- stored, whose links the next sync writes from the file without chunking it again.
ALTER TABLE documents ADD COLUMN links_version integer NOT NULL DEFAULT 0;
CREATE INDEX documents_links_version_idx ON documents (vault) WHERE links_version = 0;
