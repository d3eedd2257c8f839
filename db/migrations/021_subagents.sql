-- Sub-agents (issue 17): a delegated task is a run of its own, a child of
-- the agent run that delegated it (parent_run_id) and of the tool call
-- that did (parent_step_id). Its steps are run_steps of its own; what it
-- was asked and what it returned are in subagent:
--   {"task": …, "tools": […], "index": N, "live": "text so far",
--    "answer": …, "summary": …, "changes": […], "sources": […]}
-- A child never has messages of its own: its result reaches the thread
-- only as its parent's tool result, so later prompts never see it.

ALTER TABLE runs ADD COLUMN parent_run_id bigint REFERENCES runs (id) ON DELETE CASCADE;
ALTER TABLE runs ADD COLUMN parent_step_id bigint REFERENCES run_steps (id) ON DELETE SET NULL;
ALTER TABLE runs ADD COLUMN subagent jsonb;
CREATE INDEX runs_parent_idx ON runs (parent_run_id, id) WHERE parent_run_id IS NOT NULL;

-- At most one running (or waiting) run per thread: a thread's own runs.
-- Children run inside their parent, which holds the thread.
DROP INDEX runs_one_active_per_thread_key;
CREATE UNIQUE INDEX runs_one_active_per_thread_key ON runs (thread_id)
    WHERE status IN ('running', 'waiting') AND parent_run_id IS NULL;
