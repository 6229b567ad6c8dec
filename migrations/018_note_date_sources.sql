-- Every note has a date now (kb.dates): its own (a property, a daily note's name, a date in
-- its file name), else its file's modification day. Where it came from tells them apart: a
-- question's dates are matched against a note's own date only. A date property that names
-- no day ("date: soon") is kept, to be listed by `kb status --json`.
ALTER TABLE documents ADD COLUMN date_source text;
ALTER TABLE documents ADD COLUMN date_unread text;
CREATE INDEX documents_date_unread_idx ON documents (vault, path) WHERE date_unread IS NOT NULL;
