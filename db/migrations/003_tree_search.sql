-- Branches and finding things again: full-text search over message text
-- and thread titles ('simple' configuration: no stemming, so every language
-- tokenizes the same way) plus trigram indexes, so substring search also
-- works for scripts without spaces between words.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

ALTER TABLE messages ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', left(content, 100000))) STORED;
CREATE INDEX messages_search_idx ON messages USING gin (search);
CREATE INDEX messages_content_trgm_idx ON messages USING gin (content gin_trgm_ops);

CREATE INDEX threads_title_trgm_idx ON threads USING gin (title gin_trgm_ops);
CREATE INDEX threads_workspace_activity_idx ON threads (workspace_id, owner_id, last_activity_at DESC);

-- A run records the model it was asked to use (regenerate may pick another
-- than the thread's), and whether it continues an existing answer.
ALTER TABLE runs ADD COLUMN continues boolean NOT NULL DEFAULT false;
