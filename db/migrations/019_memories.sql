-- Memory (issue 17): facts about a user that the model keeps across
-- conversations (the agent's remember and forget tools), that the user
-- adds by hand, and sees, edits and deletes on /memory. A memory is the
-- user's alone: every query takes the user.

CREATE TABLE memories (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    fact       text NOT NULL CHECK (fact <> '' AND char_length(fact) <= 500),
    -- where it came from: 'agent' (the remember tool, in thread_id and
    -- run_id), 'manual' (/memory) or 'extracted' (after a turn)
    source     text NOT NULL CHECK (source IN ('agent', 'manual', 'extracted')),
    -- the thread it was written in; kept, as null, when the thread is deleted
    thread_id  bigint REFERENCES threads (id) ON DELETE SET NULL,
    run_id     bigint REFERENCES runs (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memories_user_idx ON memories (user_id, updated_at DESC, id DESC);
-- Deleting a thread or a run sets its memories' source to null: these keep
-- that from reading every memory.
CREATE INDEX memories_thread_idx ON memories (thread_id) WHERE thread_id IS NOT NULL;
CREATE INDEX memories_run_idx ON memories (run_id) WHERE run_id IS NOT NULL;

-- A temporary thread neither reads nor writes memories.
ALTER TABLE threads ADD COLUMN temporary boolean NOT NULL DEFAULT false;

-- The user's switch for silent extraction: after each answer, a background
-- job asks the model for lasting facts of the turn (off by default).
ALTER TABLE users ADD COLUMN memory_extract boolean NOT NULL DEFAULT false;
