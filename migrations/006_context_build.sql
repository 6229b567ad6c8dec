-- How each note's context was built: context.summaries and the layout version of
-- full_context. A note built another way is rebuilt by the next sync that sees it, from
-- cached model answers; rows from before this column rebuild once.
ALTER TABLE documents ADD COLUMN context_build text NOT NULL DEFAULT '';
