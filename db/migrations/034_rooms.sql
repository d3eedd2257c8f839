-- Rooms (issue 20): people and several agents in one conversation.
--
-- A room is backed by one thread of its owner's workspace (threads.is_room),
-- so a room's messages, runs, steps, approvals, progress rows, compaction
-- markers and renderings are the thread machinery's own. The thread is
-- never listed, searched or opened as a thread; it is reached only through
-- the room, by its members. A room's conversation is one line: every
-- message goes under the thread's active leaf.
ALTER TABLE threads ADD COLUMN is_room boolean NOT NULL DEFAULT false;

CREATE TABLE rooms (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id     bigint NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    -- repeated from the thread and the owner's membership row, so that
    -- owner-only queries authorize without a join
    owner_id         bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    thread_id        bigint NOT NULL UNIQUE REFERENCES threads (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (name <> '' AND char_length(name) <= 120),
    -- how many times agents may hand on to each other by mention after a
    -- member's message (0: agents never trigger agents)
    mention_depth    integer NOT NULL DEFAULT 2 CHECK (mention_depth BETWEEN 0 AND 8),
    -- compression: summarize older messages when the request would fill
    -- this percentage of the model's context ...
    summarize_at     integer NOT NULL DEFAULT 80 CHECK (summarize_at BETWEEN 10 AND 100),
    -- ... send at most this many messages of history (0: as many as fit) ...
    history_messages integer NOT NULL DEFAULT 0 CHECK (history_messages BETWEEN 0 AND 10000),
    -- ... and always keep this many recent messages word for word
    keep_recent      integer NOT NULL DEFAULT 6 CHECK (keep_recent BETWEEN 0 AND 200),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rooms_owner_idx ON rooms (owner_id);
CREATE INDEX rooms_workspace_idx ON rooms (workspace_id);

-- Members, the owner included (role owner). Removing the row ends access.
CREATE TABLE room_members (
    room_id    bigint NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('owner', 'member')),
    invited_by bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (room_id, user_id)
);
CREATE INDEX room_members_user_idx ON room_members (user_id, room_id);
CREATE UNIQUE INDEX room_members_one_owner_key ON room_members (room_id) WHERE role = 'owner';
CREATE INDEX room_members_invited_by_idx ON room_members (invited_by) WHERE invited_by IS NOT NULL;

-- Agents of a room: named profiles. A mention @name routes a message to
-- one. Its role is a prompt and generation parameters (as roles.params);
-- tools on means the agent route answers, under the workspace's tool
-- governance narrowed by tool_policy (tool name or skill:NAME → auto, ask
-- or deny); its knowledge bases (the owner's, of the room's workspace)
-- make the rag route answer when tools are off.
CREATE TABLE room_agents (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    room_id     bigint NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (name ~ '^[A-Za-z][A-Za-z0-9_-]{0,31}$'),
    model       text NOT NULL DEFAULT '',
    prompt      text NOT NULL DEFAULT '' CHECK (char_length(prompt) <= 20000),
    params      jsonb NOT NULL DEFAULT '{}',
    tools       boolean NOT NULL DEFAULT false,
    tool_policy jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX room_agents_name_key ON room_agents (room_id, lower(name));

CREATE TABLE room_agent_kbs (
    agent_id bigint NOT NULL REFERENCES room_agents (id) ON DELETE CASCADE,
    kb_id    bigint NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    PRIMARY KEY (agent_id, kb_id)
);
CREATE INDEX room_agent_kbs_kb_idx ON room_agent_kbs (kb_id);

-- The agent that answers a message that mentions none (NULL: no answer).
ALTER TABLE rooms ADD COLUMN default_agent_id bigint REFERENCES room_agents (id) ON DELETE SET NULL;
CREATE INDEX rooms_default_agent_idx ON rooms (default_agent_id) WHERE default_agent_id IS NOT NULL;

-- Who spoke: a member (author_id) or an agent (room_agent_id), and the
-- name as it was then (kept when the user or agent is gone).
ALTER TABLE messages ADD COLUMN author_id bigint REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE messages ADD COLUMN room_agent_id bigint REFERENCES room_agents (id) ON DELETE SET NULL;
ALTER TABLE messages ADD COLUMN speaker text NOT NULL DEFAULT '';
CREATE INDEX messages_author_idx ON messages (author_id) WHERE author_id IS NOT NULL;
CREATE INDEX messages_room_agent_idx ON messages (room_agent_id) WHERE room_agent_id IS NOT NULL;

-- A room run: the agent answering, the member whose message started the
-- chain (approvals and questions go to them; they or the owner may stop
-- it) and how many agent-to-agent mentions led to it.
ALTER TABLE runs ADD COLUMN room_agent_id bigint REFERENCES room_agents (id) ON DELETE SET NULL;
ALTER TABLE runs ADD COLUMN asked_by bigint REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE runs ADD COLUMN mention_depth integer NOT NULL DEFAULT 0;
CREATE INDEX runs_room_agent_idx ON runs (room_agent_id) WHERE room_agent_id IS NOT NULL;
CREATE INDEX runs_asked_by_idx ON runs (asked_by) WHERE asked_by IS NOT NULL;
