-- Branches and finding things again: full-text search over message text
-- ('simple' configuration: no stemming, so every language tokenizes the
-- same way) plus trigram indexes, so substring search also works for
-- scripts without spaces between words.
--
-- The message indexes are partial: an answer being written is flushed to
-- its row every second, and keeping it out of the indexes until it is final
-- spares updating them on every flush (it becomes searchable when its run
-- ends).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

ALTER TABLE messages ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', left(content, 100000))) STORED;
CREATE INDEX messages_search_idx ON messages USING gin (search) WHERE status <> 'streaming';
CREATE INDEX messages_content_trgm_idx ON messages
    USING gin (content gin_trgm_ops) WHERE status <> 'streaming';

CREATE INDEX threads_title_trgm_idx ON threads USING gin (title gin_trgm_ops);

-- A run that goes on writing an existing (stopped) answer.
ALTER TABLE runs ADD COLUMN continues boolean NOT NULL DEFAULT false;
