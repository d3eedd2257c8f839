-- Models in the browser (issue 18): a pull of a model onto a model server,
-- started by an administrator on /admin/models. The row is the pull's truth
-- for every tab and instance: its progress is written by the instance that
-- runs it (instance_id) at most once a second; Cancel sets
-- cancel_requested (and notifies), and a pull whose instance died is
-- marked interrupted.

CREATE TABLE model_pulls (
    id            bigserial PRIMARY KEY,
    model         text NOT NULL CHECK (model <> '' AND char_length(model) <= 300),
    -- the server's label (chat.Servers' name), '' with one model server
    server        text NOT NULL DEFAULT '',
    requested_by  bigint REFERENCES users (id) ON DELETE SET NULL,
    instance_id   text NOT NULL,
    status        text NOT NULL DEFAULT 'running'
                  CHECK (status IN ('running', 'completed', 'failed', 'cancelled', 'interrupted')),
    -- Ollama's last status line ("pulling manifest", "pulling 0a1b2c3d4e5f", "success")
    status_text   text NOT NULL DEFAULT '',
    -- the layer being pulled (its digest) and how many layers were seen
    digest        text NOT NULL DEFAULT '',
    layers        integer NOT NULL DEFAULT 0,
    -- bytes of the layers seen so far: done and total, and the speed
    completed     bigint NOT NULL DEFAULT 0,
    total         bigint NOT NULL DEFAULT 0,
    bytes_per_sec bigint NOT NULL DEFAULT 0,
    error         text NOT NULL DEFAULT '',
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);

-- One running pull of a model per server.
CREATE UNIQUE INDEX model_pulls_running_idx ON model_pulls (lower(model), server) WHERE status = 'running';
CREATE INDEX model_pulls_recent_idx ON model_pulls (created_at DESC);
