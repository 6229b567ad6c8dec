-- The links to a note with the notes they come from, in the index itself: related notes count
-- each candidate's linking notes (kb.store.nearby) from the index alone, without visiting the
-- table's rows. It takes the place of the index on target_id alone, which it serves as well
-- (a note's deletion, the link graph's reads), so a sync still writes one index for it.
CREATE INDEX links_target_document_idx ON links (target_id, document_id);
DROP INDEX links_target_id_idx;
