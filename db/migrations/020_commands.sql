-- Slash commands typed into a thread and their replies (issue 17): kept as
-- the thread's command entries, shown after the message that was the
-- thread's active leaf when the command ran, visible after a reload. They
-- are a table of their own, not messages: context assembly reads only
-- messages, so they are never sent to the model.

CREATE TABLE thread_commands (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id        bigint NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    after_message_id bigint REFERENCES messages (id) ON DELETE SET NULL,
    command          text NOT NULL CHECK (command <> ''),
    reply            text NOT NULL DEFAULT '',
    failed           boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX thread_commands_thread_idx ON thread_commands (thread_id, id);
