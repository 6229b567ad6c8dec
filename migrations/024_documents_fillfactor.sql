-- A sync tool that touches every note (same bytes, a new mtime) makes kb rewrite every
-- documents row's size and mtime. A full page gives the new version of a row no room beside
-- the old one, so each one went to another page and every index of the table took a new
-- entry for it: 0.14-0.22 s for 10,000 notes. With half of each page free, the new versions
-- stay on their page and no index is written (a heap-only update): 0.03 s. Rows already stored
-- move to half-full pages as they are next rewritten.
ALTER TABLE documents SET (fillfactor = 50);
