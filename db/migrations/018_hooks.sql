-- Lifecycle hooks (issue 16): the HTTP hooks a workspace's owner adds, and
-- the outbox of deliveries that are not waited for, worked by a job with
-- retries (at least once: the event id stays the same on every attempt).

CREATE TABLE workspace_hooks (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id bigint NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    event        text NOT NULL CHECK (event <> ''),
    url          text NOT NULL CHECK (url <> ''),
    -- signs each delivery (X-Weft-Signature): shown once, when the hook is made
    secret       text NOT NULL,
    timeout_ms   integer NOT NULL DEFAULT 10000 CHECK (timeout_ms BETWEEN 100 AND 60000),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workspace_hooks_workspace_idx ON workspace_hooks (workspace_id);

-- One row per event and hook. hook_key names an administrator's hook
-- ("url:…" or "command:…", found again in the hooks file when the job runs)
-- or is "workspace:<id>" with workspace_hook_id set. body is the exact
-- payload sent on every attempt (the signature covers these bytes).
CREATE TABLE hook_deliveries (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id          text NOT NULL,
    event             text NOT NULL,
    run_id            bigint REFERENCES runs (id) ON DELETE CASCADE,
    hook_key          text NOT NULL,
    workspace_hook_id bigint REFERENCES workspace_hooks (id) ON DELETE CASCADE,
    body              text NOT NULL,
    attempts          integer NOT NULL DEFAULT 0,
    last_error        text NOT NULL DEFAULT '',
    -- the run's trace step that shows this delivery's failures (0: none yet)
    step_id           bigint REFERENCES run_steps (id) ON DELETE SET NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    delivered_at      timestamptz,
    given_up_at       timestamptz,
    UNIQUE (event_id, hook_key)
);
CREATE INDEX hook_deliveries_run_idx ON hook_deliveries (run_id);
