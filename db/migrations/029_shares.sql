-- Share links (issue 18): a read-only link to the visible path of a thread
-- as it was when the link was made. Only the SHA-256 of the link's token
-- is stored, so a database dump hands out no links; the owner sees the URL
-- once, at creation. Revoking deletes the row. Deleting the thread, or any
-- message of the shared path (which deletes the leaf below it), deletes
-- the link with it.
CREATE TABLE shares (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id       bigint NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    owner_id        bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- the last message of the path shared: the root down to it is shown
    leaf_message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    token_sha256    bytea NOT NULL UNIQUE CHECK (octet_length(token_sha256) = 32),
    -- the token's first characters, so the owner can tell links apart
    token_hint      text NOT NULL CHECK (char_length(token_hint) <= 8),
    -- attachments and generated media are shown (through the link's own
    -- URLs) only when the owner chose so
    include_files   boolean NOT NULL DEFAULT false,
    expires_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX shares_thread_idx ON shares (thread_id, id);
CREATE INDEX shares_owner_idx ON shares (owner_id, id);
CREATE INDEX shares_leaf_idx ON shares (leaf_message_id);
