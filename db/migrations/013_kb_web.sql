-- Knowledge-base documents fetched from the web (rag/web*.go): the page's
-- address, what a re-fetch sends back to ask whether it changed, and where
-- a fetch stands. An uploaded file has source_url ''.
ALTER TABLE kb_documents
    ADD COLUMN source_url    text NOT NULL DEFAULT '',
    ADD COLUMN etag          text NOT NULL DEFAULT '',
    ADD COLUMN last_modified text NOT NULL DEFAULT '',
    ADD COLUMN fetched_at    timestamptz,
    -- '' settled; 'fetching' a fetch job is queued or running; 'updating'
    -- a changed page is being read while the version before still answers
    -- (its next chunks wait in generation 0, which nothing retrieves).
    ADD COLUMN web_state     text NOT NULL DEFAULT '' CHECK (web_state IN ('', 'fetching', 'updating')),
    ADD COLUMN web_progress  real NOT NULL DEFAULT 0;
-- The same page twice in one knowledge base is a duplicate.
CREATE UNIQUE INDEX kb_documents_source_key ON kb_documents (kb_id, source_url) WHERE source_url <> '';

-- A sitemap being read into a knowledge base, and what came of it.
CREATE TABLE kb_web_crawls (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kb_id      bigint NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    owner_id   bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    url        text NOT NULL,
    max_pages  integer NOT NULL CHECK (max_pages BETWEEN 1 AND 1000),
    max_depth  integer NOT NULL CHECK (max_depth BETWEEN 1 AND 5),
    status     text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed')),
    message    text NOT NULL DEFAULT '',
    pages      integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX kb_web_crawls_kb_idx ON kb_web_crawls (kb_id, id DESC);
