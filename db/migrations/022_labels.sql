-- The tree, completed (issue 17): labels on messages and summaries of the
-- branches a user leaves. Both are nodes of a thread's tree — each hangs
-- under one message — kept in tables of their own, not as messages:
-- context assembly reads only messages, so neither ever reaches the model.

-- A label is a short name a user gives one message of a thread (any role,
-- any branch); the thread lists them to jump to.
CREATE TABLE message_labels (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id  bigint NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (name <> '' AND char_length(name) <= 80),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX message_labels_thread_idx ON message_labels (thread_id, id);
CREATE INDEX message_labels_message_idx ON message_labels (message_id);

-- A branch summary is the model's short summary of a branch the user
-- switched away from, hanging under the branch's first message (so it is
-- shown where that branch forks off the one being read). One per branch:
-- leaving it again after it grew writes it anew (attempt counts the
-- writes, so a slower earlier write never overwrites a later one).
CREATE TABLE branch_summaries (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id         bigint NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    branch_message_id bigint NOT NULL UNIQUE REFERENCES messages (id) ON DELETE CASCADE,
    leaf_message_id   bigint REFERENCES messages (id) ON DELETE SET NULL,
    status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'complete', 'error')),
    summary           text NOT NULL DEFAULT '',
    error             text NOT NULL DEFAULT '',
    model             text NOT NULL DEFAULT '',
    attempt           integer NOT NULL DEFAULT 1,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX branch_summaries_thread_idx ON branch_summaries (thread_id, id);

-- Whether leaving a branch of the thread writes its summary (off unless the
-- user switches it on).
ALTER TABLE threads ADD COLUMN summarize_branches boolean NOT NULL DEFAULT false;
