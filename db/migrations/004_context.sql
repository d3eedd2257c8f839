-- Context assembly: roles get unique names per owner (the /role command
-- finds them by name), users keep custom instructions, threads carry their
-- own context settings, and every model's prompt-size calibration is shared
-- by all instances.
CREATE UNIQUE INDEX roles_owner_name_key ON roles (owner_id, lower(name));
DROP INDEX roles_owner_idx;

ALTER TABLE users ADD COLUMN instructions text NOT NULL DEFAULT '';

-- num_ctx: the thread's own cap on the context window (0: none).
-- compaction: older turns are summarized automatically and summaries are
-- used; off sends the full history again (summaries stay in the tree).
ALTER TABLE threads ADD COLUMN num_ctx integer NOT NULL DEFAULT 0 CHECK (num_ctx >= 0);
ALTER TABLE threads ADD COLUMN compaction boolean NOT NULL DEFAULT true;

-- Compaction nodes are messages with role 'system' hanging under the last
-- message they cover; they are looked up by parent.
CREATE INDEX messages_compaction_idx ON messages (parent_id, id) WHERE role = 'system';

-- How many characters a model's tokens hold, learned from Ollama's
-- prompt_eval_count (an exponential moving average over samples).
CREATE TABLE model_calibration (
    model           text PRIMARY KEY,
    chars_per_token double precision NOT NULL CHECK (chars_per_token > 0),
    samples         integer NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
