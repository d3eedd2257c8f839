-- The foundation: accounts, sessions, workspaces, conversation trees and runs.
-- pgvector comes first so every later migration can use it.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email         text NOT NULL CHECK (email <> ''),
    display_name  text NOT NULL DEFAULT '',
    password_hash text NOT NULL,
    role          text NOT NULL CHECK (role IN ('admin', 'member')),
    disabled      boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

-- Instance-wide settings an admin changes (for example signup_mode).
CREATE TABLE settings (
    key        text PRIMARY KEY,
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- scs/pgxstore's table.
CREATE TABLE sessions (
    token  text PRIMARY KEY,
    data   bytea NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX sessions_expiry_idx ON sessions (expiry);

-- Failed logins, counted per key ('ip:…' or 'email:…') inside a window so that
-- every instance enforces the same limit.
CREATE TABLE login_failures (
    key        text NOT NULL,
    failed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_key_idx ON login_failures (key, failed_at);

CREATE TABLE workspaces (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name          text NOT NULL CHECK (name <> ''),
    root_path     text NOT NULL DEFAULT '',
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    is_default    boolean NOT NULL DEFAULT false,
    default_model text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workspaces_owner_idx ON workspaces (owner_id, status, lower(name));
CREATE UNIQUE INDEX workspaces_one_default_key ON workspaces (owner_id) WHERE is_default;

-- Personas: a prompt plus generation parameters (behaviour arrives with roles).
CREATE TABLE roles (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner_id   bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (name <> ''),
    prompt     text NOT NULL DEFAULT '',
    params     jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX roles_owner_idx ON roles (owner_id, lower(name));

CREATE TABLE threads (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id     bigint NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    -- The owner is repeated from the workspace so that every thread query can
    -- authorize without a join.
    owner_id         bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title            text NOT NULL DEFAULT '',
    model            text NOT NULL DEFAULT '',
    role_id          bigint REFERENCES roles (id) ON DELETE SET NULL,
    agent_enabled    boolean NOT NULL DEFAULT false,
    tts_enabled      boolean NOT NULL DEFAULT false,
    image_enabled    boolean NOT NULL DEFAULT false,
    context_summary  text NOT NULL DEFAULT '',
    notes            text NOT NULL DEFAULT '',
    pinned           boolean NOT NULL DEFAULT false,
    archived         boolean NOT NULL DEFAULT false,
    active_leaf_id   bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    last_activity_at timestamptz NOT NULL DEFAULT now()
);
-- Serves exactly the sidebar query: a workspace's unarchived threads, pinned
-- first, newest activity first, keyset-paginated on (pinned, activity, id).
CREATE INDEX threads_sidebar_idx ON threads (workspace_id, pinned DESC, last_activity_at DESC, id DESC)
    WHERE NOT archived;
CREATE INDEX threads_archived_idx ON threads (workspace_id, last_activity_at DESC, id DESC)
    WHERE archived;
CREATE INDEX threads_owner_idx ON threads (owner_id);

CREATE TABLE messages (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id  bigint NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    parent_id  bigint REFERENCES messages (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
    content    text NOT NULL DEFAULT '',
    parts      jsonb NOT NULL DEFAULT '[]',
    metadata   jsonb NOT NULL DEFAULT '{}',
    status     text NOT NULL DEFAULT 'complete'
               CHECK (status IN ('streaming', 'complete', 'error', 'cancelled', 'interrupted')),
    error      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- Children of a node in sibling order; also serves "roots of a thread".
CREATE INDEX messages_thread_parent_idx ON messages (thread_id, parent_id, id);
CREATE INDEX messages_parent_idx ON messages (parent_id);

ALTER TABLE threads ADD CONSTRAINT threads_active_leaf_fk
    FOREIGN KEY (active_leaf_id) REFERENCES messages (id) ON DELETE SET NULL;

CREATE TABLE runs (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id            bigint NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    owner_id             bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind                 text NOT NULL CHECK (kind IN ('chat', 'rag', 'agent')),
    status               text NOT NULL DEFAULT 'queued'
                         CHECK (status IN ('queued', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'interrupted')),
    instance_id          text NOT NULL DEFAULT '',
    user_message_id      bigint REFERENCES messages (id) ON DELETE SET NULL,
    assistant_message_id bigint REFERENCES messages (id) ON DELETE SET NULL,
    model                text NOT NULL DEFAULT '',
    usage                jsonb NOT NULL DEFAULT '{}',
    error                text NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL DEFAULT now(),
    started_at           timestamptz,
    finished_at          timestamptz
);
CREATE INDEX runs_thread_idx ON runs (thread_id, id);
CREATE INDEX runs_active_idx ON runs (status, instance_id) WHERE status IN ('queued', 'running', 'waiting');
-- At most one running (or waiting) run per thread.
CREATE UNIQUE INDEX runs_one_active_per_thread_key ON runs (thread_id) WHERE status IN ('running', 'waiting');

-- Ordered, typed records of an agent run (model turn, tool call, approval, …).
CREATE TABLE run_steps (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id     bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    kind       text NOT NULL,
    data       jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, seq)
);

-- Uploaded files: content-addressed blobs on disk, referenced by messages.
CREATE TABLE attachments (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner_id   bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    message_id bigint REFERENCES messages (id) ON DELETE CASCADE,
    sha256     text NOT NULL,
    name       text NOT NULL DEFAULT '',
    mime       text NOT NULL DEFAULT '',
    size       bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX attachments_message_idx ON attachments (message_id);
CREATE INDEX attachments_sha_idx ON attachments (sha256);

-- Generated audio and images bound to a message.
CREATE TABLE media (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('audio', 'image')),
    sha256     text NOT NULL DEFAULT '',
    mime       text NOT NULL DEFAULT '',
    status     text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'ready', 'failed')),
    error      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX media_message_idx ON media (message_id);
