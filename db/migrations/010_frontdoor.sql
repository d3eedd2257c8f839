-- The front door: login attempts are reserved (and released on success) by
-- id, so the limit holds under parallel attempts; sign-ups are counted per
-- client address; first-administrator setup tokens live in settings under
-- 'setup_token:<sha256>' (no table needed).
ALTER TABLE login_failures ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;

CREATE TABLE signup_attempts (
    client     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX signup_attempts_client_idx ON signup_attempts (client, created_at);
