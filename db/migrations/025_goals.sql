-- Goal mode (issue 17): a thread's goal. After each agent run of the thread
-- the model judges whether the goal is met; if not, and the budget allows,
-- the runtime sends a continuation (an ordinary queued run). One goal a
-- thread; it goes with its thread.

CREATE TABLE thread_goals (
    thread_id   bigint PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    goal        text NOT NULL CHECK (goal <> '' AND char_length(goal) <= 2000),
    -- active: judged after each agent run; paused (by the user, by Stop on a
    -- continuation, by a failure); met; stopped (the budget ran out)
    status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'met', 'stopped')),
    -- the budget: continuation runs, their tokens, wall time since the goal
    -- was set or last resumed
    max_runs    integer NOT NULL DEFAULT 3 CHECK (max_runs BETWEEN 0 AND 50),
    max_tokens  integer NOT NULL DEFAULT 50000 CHECK (max_tokens BETWEEN 1000 AND 10000000),
    max_seconds integer NOT NULL DEFAULT 600 CHECK (max_seconds BETWEEN 60 AND 86400),
    runs_used   integer NOT NULL DEFAULT 0,
    tokens_used bigint NOT NULL DEFAULT 0,
    active_since timestamptz NOT NULL DEFAULT now(),
    -- when it stopped being active (time used stands still), null while active
    ended_at    timestamptz,
    -- the newest run judged: each run is judged once, by the instance where
    -- it settled
    judged_run_id bigint,
    -- a judgement is being made (shown as "checking")
    checking    boolean NOT NULL DEFAULT false,
    -- the continuation run the goal sent last
    continuation_run_id bigint REFERENCES runs (id) ON DELETE SET NULL,
    -- what happened last (the judge's reason, why it stopped), shown on the panel
    note        text NOT NULL DEFAULT '',
    -- bumped on every change: the panel reloads the page when it moved on
    version     integer NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- Deleting a run sets its goal's continuation to null.
CREATE INDEX thread_goals_continuation_idx ON thread_goals (continuation_run_id) WHERE continuation_run_id IS NOT NULL;
