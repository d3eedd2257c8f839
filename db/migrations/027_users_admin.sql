-- Users an administrator can run (issue 18): who is signed in where, when
-- each account was last seen, one-time password-reset links and invite
-- links for invite-only sign-up.

-- scs keeps a session's data gob-encoded, so the sessions table cannot be
-- searched by user. This maps each session token to its account, written at
-- sign-in and touched (at most every few minutes) while it is used, so that
-- disabling an account, changing or resetting its password, "sign out other
-- sessions" and deleting it can end exactly that account's sessions. A row
-- whose session is gone (logout, expiry) is ignored by every reader (they
-- join sessions) and pruned at the next sign-in of its account.
CREATE TABLE user_sessions (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token      text NOT NULL UNIQUE,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    user_agent text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_sessions_user_idx ON user_sessions (user_id);
-- A signed-in session is valid only while its row here exists (withUser
-- checks it), so that a request in flight while its session is ended
-- cannot bring it back by saving the session at its end. Sessions made
-- before this table cannot be mapped (their data is gob-encoded): the
-- upgrade signs everyone out once.
DELETE FROM sessions;
CREATE INDEX user_sessions_created_idx ON user_sessions (created_at);

-- When the account last used Weft (a request of any of its sessions), at
-- most a few minutes off.
ALTER TABLE users ADD COLUMN last_seen_at timestamptz;

-- A one-time password-reset link an administrator made: only the SHA-256
-- of its random token is kept. A newer link for the same account replaces
-- the older (one row per account).
CREATE TABLE password_resets (
    user_id    bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    token_hash bytea NOT NULL UNIQUE,
    created_by bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

-- Invite links for invite-only sign-up: single use, with an expiry, bound
-- to an email address or not (''). Only the SHA-256 of the token is kept.
CREATE TABLE invites (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash bytea NOT NULL UNIQUE,
    email      text NOT NULL DEFAULT '',
    created_by bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    -- who used it; null again when that account is deleted (nothing of a
    -- deleted account is kept)
    used_by    bigint REFERENCES users (id) ON DELETE SET NULL
);
CREATE INDEX invites_created_idx ON invites (created_at DESC, id DESC);
CREATE INDEX invites_created_by_idx ON invites (created_by) WHERE created_by IS NOT NULL;
CREATE INDEX invites_used_by_idx ON invites (used_by) WHERE used_by IS NOT NULL;
CREATE INDEX password_resets_created_by_idx ON password_resets (created_by) WHERE created_by IS NOT NULL;
