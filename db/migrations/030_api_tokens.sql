-- API tokens (issue 19): personal tokens for the OpenAI-compatible API
-- under /v1. Only the SHA-256 of a token is stored (a database dump hands
-- out no working token); the owner sees the token once, when it is made.
-- A token has scopes (read: GET routes only; chat: completions and
-- embeddings; kb: the knowledge-base extension), an optional expiry and a
-- fixed one-minute window of requests for its rate limit, counted here so
-- that every instance agrees. Revoking deletes the row; deleting the user
-- deletes their tokens.
CREATE TABLE api_tokens (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name          text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    token_sha256  bytea NOT NULL UNIQUE CHECK (octet_length(token_sha256) = 32),
    -- the token's first characters after its prefix, to tell tokens apart
    token_hint    text NOT NULL CHECK (char_length(token_hint) <= 16),
    scopes        text[] NOT NULL CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['read', 'chat', 'kb']),
    expires_at    timestamptz,
    last_used_at  timestamptz,
    window_start  timestamptz NOT NULL DEFAULT now(),
    window_count  integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_tokens_user_idx ON api_tokens (user_id, id);
