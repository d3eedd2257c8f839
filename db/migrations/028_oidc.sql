-- Single sign-on (OpenID Connect): the identities a provider vouches for,
-- each (issuer, subject) pair linked to one account. An account has at most
-- one identity per issuer, so a provider's second account cannot take over
-- an account already linked to its first.
CREATE TABLE user_identities (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    issuer      text NOT NULL CHECK (issuer <> ''),
    subject     text NOT NULL CHECK (subject <> ''),
    email       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    last_login  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (issuer, subject),
    UNIQUE (issuer, user_id)
);
CREATE INDEX user_identities_user_idx ON user_identities (user_id);
