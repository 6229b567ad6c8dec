-- The voice of a note outside the owner's folders, as the chat model named it (kb.voices):
-- whose "I" its paragraph passages speak in. An empty voice is the model's "no one said";
-- a rejected answer is kept as a fallback of the model that wrote it, like a summary.
ALTER TABLE documents
    ADD COLUMN voice          text,
    ADD COLUMN voice_key      text,
    ADD COLUMN voice_fallback text;
CREATE INDEX documents_voice_key_idx ON documents (voice_key) WHERE voice_key IS NOT NULL;
