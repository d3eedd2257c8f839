-- Imports of conversations exported from other apps (issue 19): ChatGPT's
-- conversations.json and Open WebUI's chat export. The uploaded file is
-- kept in 1 MiB chunks until its job has read it (so any instance can run
-- the job, and a restart resumes it); each conversation is imported in a
-- transaction that also advances next_index, so a job run again never
-- imports a conversation twice. The report (import_items) outlives the
-- file.
CREATE TABLE imports (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner_id          bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    workspace_id      bigint NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    format            text NOT NULL CHECK (format IN ('chatgpt', 'openwebui')),
    file_name         text NOT NULL DEFAULT '' CHECK (char_length(file_name) <= 200),
    size_bytes        bigint NOT NULL DEFAULT 0,
    status            text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
    -- conversations in the file, once counted (NULL: not counted yet)
    total             integer,
    -- conversations handled so far (imported or skipped), in file order
    next_index        integer NOT NULL DEFAULT 0,
    imported          integer NOT NULL DEFAULT 0,
    skipped           integer NOT NULL DEFAULT 0,
    messages          integer NOT NULL DEFAULT 0,
    messages_skipped  integer NOT NULL DEFAULT 0,
    parts_skipped     integer NOT NULL DEFAULT 0,
    error             text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz
);
CREATE INDEX imports_owner_idx ON imports (owner_id, id DESC);

CREATE TABLE import_chunks (
    import_id bigint NOT NULL REFERENCES imports (id) ON DELETE CASCADE,
    seq       integer NOT NULL,
    data      bytea NOT NULL,
    PRIMARY KEY (import_id, seq)
);

-- One row per conversation of the file: imported (with its thread) or
-- skipped (with the reason).
CREATE TABLE import_items (
    import_id  bigint NOT NULL REFERENCES imports (id) ON DELETE CASCADE,
    position   integer NOT NULL,
    thread_id  bigint REFERENCES threads (id) ON DELETE SET NULL,
    title      text NOT NULL DEFAULT '',
    imported   boolean NOT NULL,
    messages   integer NOT NULL DEFAULT 0,
    -- why it was skipped, or what was left out of an imported one
    note       text NOT NULL DEFAULT '',
    PRIMARY KEY (import_id, position)
);
CREATE INDEX import_items_thread_idx ON import_items (thread_id);
