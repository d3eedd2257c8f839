package db

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// Subagent is what a sub-agent's run was asked and what it returned (the
// runs.subagent column of a child run).
type Subagent struct {
	Task  string   `json:"task"`
	Tools []string `json:"tools,omitempty"` // the tools it was given ("": every tool its parent may use)
	Index int      `json:"index"`           // its place in the delegation (0 for delegate_task)
	// Live is the text of its current model turn, saved about once a
	// second while it works.
	Live    string       `json:"live,omitempty"`
	Answer  string       `json:"answer,omitempty"`
	Summary string       `json:"summary,omitempty"` // the short evidence summary returned with the answer
	Changes []FileChange `json:"changes,omitempty"`
	Sources []StepSource `json:"sources,omitempty"`
	Rounds  int          `json:"rounds,omitempty"`
	// Budget is what it may spend: model rounds and seconds.
	MaxRounds  int `json:"max_rounds,omitempty"`
	MaxSeconds int `json:"max_seconds,omitempty"`
}

// SubRun is a sub-agent's run with its steps, as its parent's trace shows
// it.
type SubRun struct {
	ID         int64
	Status     string
	Error      string
	Usage      Usage
	Sub        Subagent
	StartedAt  *time.Time
	FinishedAt *time.Time
	Steps      []Step
}

// AddSubRun records a sub-agent's run under one of parent's tool calls: a
// running agent run of the same thread, user, model and instance, with no
// messages of its own, not started yet (it waits for its turn among its
// siblings until StartSubRun).
func (d *DB) AddSubRun(ctx context.Context, parent, step int64, sub Subagent) (Run, error) {
	rows, err := d.q().Query(ctx, `INSERT INTO runs (thread_id, owner_id, kind, status, instance_id, user_message_id,
			model, parent_run_id, parent_step_id, subagent)
		SELECT thread_id, owner_id, 'agent', 'running', instance_id, user_message_id, model, id, $2, $3
		FROM runs WHERE id = $1 AND kind = 'agent'
		RETURNING `+runCols, parent, step, sub)
	if err != nil {
		return Run{}, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run])
	return r, mapErr(err)
}

// StartSubRun records that a sub-agent's run started working.
func (d *DB) StartSubRun(ctx context.Context, run int64) error {
	_, err := d.q().Exec(ctx, "UPDATE runs SET started_at = now() WHERE id = $1 AND parent_run_id IS NOT NULL", run)
	return err
}

// SetSubLive saves a running sub-agent's current text.
func (d *DB) SetSubLive(ctx context.Context, run int64, live string) error {
	_, err := d.q().Exec(ctx, `UPDATE runs SET subagent = jsonb_set(COALESCE(subagent, '{}'), '{live}', to_jsonb($2::text))
		WHERE id = $1 AND parent_run_id IS NOT NULL AND status IN ('running', 'waiting')`, run, noNUL(live))
	return err
}

// FinishSubRun records how a sub-agent's run ended: its status, error,
// usage and result (its live text is dropped). Pending steps it left are
// settled as cancelled in the same transaction.
func (d *DB) FinishSubRun(ctx context.Context, run int64, status, errText string, usage Usage, sub Subagent) error {
	sub.Live = ""
	sub.Answer = noNUL(sub.Answer)
	return d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE run_steps SET status = 'cancelled', updated_at = now()
			WHERE run_id = $1 AND status = 'pending'`, run); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE runs SET status = $2, error = $3, usage = $4, subagent = $5, finished_at = now()
			WHERE id = $1 AND parent_run_id IS NOT NULL`, run, status, noNUL(errText), usage, sub)
		return err
	})
}

// EndSubRuns ends the sub-agents of a run that are still active when it
// ends (their result could not be recorded): cancelled, or interrupted
// with status interrupted, their pending steps cancelled.
func (d *DB) EndSubRuns(ctx context.Context, parent int64, status string) error {
	return d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE runs SET status = $2, finished_at = now(),
				error = CASE WHEN error = '' THEN 'Its parent run ended first.' ELSE error END
			WHERE parent_run_id = $1 AND status IN ('queued', 'running', 'waiting') RETURNING id`, parent, status)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE run_steps SET status = 'cancelled', updated_at = now()
			WHERE run_id = ANY($1) AND status IN ('pending', 'running')`, ids)
		return err
	})
}

// subRunsOf loads the sub-agents of the given runs (the user's) with
// their steps, keyed by the tool-call step that delegated them, in order.
func subRunsOf(ctx context.Context, q querier, user int64, parents []int64) (map[int64][]SubRun, error) {
	out := map[int64][]SubRun{}
	rows, err := q.Query(ctx, `SELECT id, parent_step_id, status, error, usage, COALESCE(subagent, '{}'), started_at, finished_at
		FROM runs WHERE parent_run_id = ANY($1) AND owner_id = $2 AND parent_step_id IS NOT NULL
		ORDER BY parent_step_id, (subagent->>'index')::int, id`, parents, user)
	if err != nil {
		return nil, err
	}
	type row struct {
		ID         int64
		Step       int64
		Status     string
		Error      string
		Usage      json.RawMessage
		Sub        Subagent
		StartedAt  *time.Time
		FinishedAt *time.Time
	}
	subs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil || len(subs) == 0 {
		return out, err
	}
	ids := make([]int64, len(subs))
	type pos struct {
		step int64
		i    int
	}
	at := map[int64]pos{}
	for i, s := range subs {
		ids[i] = s.ID
		sr := SubRun{ID: s.ID, Status: s.Status, Error: s.Error, Sub: s.Sub, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt}
		_ = json.Unmarshal(s.Usage, &sr.Usage)
		out[s.Step] = append(out[s.Step], sr)
		at[s.ID] = pos{s.Step, len(out[s.Step]) - 1}
	}
	rows, err = q.Query(ctx, "SELECT "+stepCols+" FROM run_steps WHERE run_id = ANY($1) ORDER BY run_id, seq", ids)
	if err != nil {
		return nil, err
	}
	steps, err := pgx.CollectRows(rows, pgx.RowToStructByName[Step])
	if err != nil {
		return nil, err
	}
	for _, s := range steps {
		p := at[s.RunID]
		list := out[p.step]
		list[p.i].Steps = append(list[p.i].Steps, s)
	}
	return out, nil
}

// withSubRuns attaches to each delegating tool call its sub-agents.
func withSubRuns(ctx context.Context, q querier, user int64, steps []Step) error {
	var parents []int64
	seen := map[int64]bool{}
	for _, s := range steps {
		if s.Kind == StepToolCall && IsDelegation(s.Data.Tool) && !seen[s.RunID] {
			seen[s.RunID] = true
			parents = append(parents, s.RunID)
		}
	}
	if len(parents) == 0 {
		return nil // no query for a run that never delegated
	}
	subs, err := subRunsOf(ctx, q, user, parents)
	if err != nil {
		return err
	}
	for i := range steps {
		steps[i].Subagents = subs[steps[i].ID]
	}
	return nil
}

// Delegation tools: their calls start sub-agents.
const (
	ToolDelegateTask     = "delegate_task"
	ToolDelegateParallel = "delegate_parallel"
)

// IsDelegation reports whether a tool starts sub-agents.
func IsDelegation(tool string) bool { return tool == ToolDelegateTask || tool == ToolDelegateParallel }
