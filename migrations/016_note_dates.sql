-- A note's own date (its frontmatter `date`, else a date in its file name; kb.vault.dates),
-- NULL when it has none: what a question's dates are matched against (kb.search.when), unlike the
-- file's modification time, which a sync, a clone or a backup resets.
ALTER TABLE documents ADD COLUMN note_date date;
CREATE INDEX documents_note_date_idx ON documents (note_date) WHERE note_date IS NOT NULL;
