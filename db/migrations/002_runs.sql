-- The run runtime: cross-instance stop requests, instance liveness for crash
-- recovery, and which threads still carry a provisional title.
ALTER TABLE runs ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;
CREATE INDEX runs_queued_idx ON runs (thread_id, id) WHERE status = 'queued';
CREATE INDEX runs_owner_active_idx ON runs (owner_id) WHERE status IN ('running', 'waiting');

CREATE TABLE instances (
    id           text PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- provisional: derived from the first message; generated: by the model;
-- user: set by a rename (never overwritten).
ALTER TABLE threads ADD COLUMN title_state text NOT NULL DEFAULT 'provisional'
    CHECK (title_state IN ('provisional', 'generated', 'user'));
