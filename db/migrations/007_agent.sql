-- The agent: tool governance per workspace, "this thread" approvals, the
-- loop's checkpoint, and the state of steps that wait for the user.

-- Rows override the defaults of each tool's class (read: auto, write: ask,
-- network: disabled).
CREATE TABLE tool_policies (
    workspace_id bigint NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    tool         text NOT NULL,
    enabled      boolean NOT NULL,
    mode         text NOT NULL CHECK (mode IN ('auto', 'ask', 'deny')),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, tool)
);

-- Tools approved for the rest of one thread ("this thread").
CREATE TABLE tool_thread_grants (
    thread_id  bigint NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    tool       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, tool)
);

ALTER TABLE workspaces ADD COLUMN agent_max_steps integer NOT NULL DEFAULT 25
    CHECK (agent_max_steps BETWEEN 1 AND 200);

-- The loop's state after its last step: a resumed run starts from here.
ALTER TABLE runs ADD COLUMN checkpoint jsonb;

-- pending: an approval or question waiting for the user; otherwise the
-- step's outcome (ok, error, refused, once, thread, always, denied,
-- answered, timeout, cancelled).
ALTER TABLE run_steps ADD COLUMN status text NOT NULL DEFAULT '';
ALTER TABLE run_steps ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX run_steps_pending_idx ON run_steps (run_id) WHERE status = 'pending';
CREATE INDEX runs_waiting_idx ON runs (instance_id) WHERE status = 'waiting';
