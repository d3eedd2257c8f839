package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Settling an agent's steps (approvals, answers, time-outs) and the tool
// policies and grants that decide them.

// StepOf returns one of the user's steps with its run.
func (d *DB) StepOf(ctx context.Context, user, id int64) (Step, Run, error) {
	var s Step
	rows, err := d.q().Query(ctx, "SELECT "+prefixed("s.", stepCols)+` FROM run_steps s
		JOIN runs r ON r.id = s.run_id WHERE s.id = $1 AND r.owner_id = $2`, id, user)
	if err != nil {
		return Step{}, Run{}, err
	}
	if s, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Step]); err != nil {
		return Step{}, Run{}, mapErr(err)
	}
	r, err := d.Run(ctx, user, s.RunID)
	return s, r, err
}

// Decide settles one of the user's pending approvals. "thread" also allows
// the tool for the rest of the thread, "always" sets the workspace's rule
// for the tool to auto; both in the same transaction. A step no longer
// pending is ErrDecided.
func (d *DB) Decide(ctx context.Context, user, step int64, decision string) (Step, error) {
	var s Step
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if s, err = settleOwned(ctx, tx, user, step, StepApproval, decision, nil); err != nil {
			return err
		}
		var thread, ws int64
		if err := tx.QueryRow(ctx, `SELECT t.id, t.workspace_id FROM runs r JOIN threads t ON t.id = r.thread_id
			WHERE r.id = $1`, s.RunID).Scan(&thread, &ws); err != nil {
			return err
		}
		switch decision {
		case DecideThread:
			_, err = tx.Exec(ctx, `INSERT INTO tool_thread_grants (thread_id, tool) VALUES ($1, $2)
				ON CONFLICT DO NOTHING`, thread, s.Data.Tool)
		case DecideAlways:
			err = setToolPolicy(ctx, tx, ws, s.Data.Tool, true, "auto")
		}
		return err
	})
	return s, mapErr(err)
}

// Answer settles one of the user's pending questions with its answers.
func (d *DB) Answer(ctx context.Context, user, step int64, answers []string) (Step, error) {
	var s Step
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		s, err = settleOwned(ctx, tx, user, step, StepQuestion, StepAnswered, answers)
		return err
	})
	return s, mapErr(err)
}

func settleOwned(ctx context.Context, tx pgx.Tx, user, step int64, kind, status string, answers []string) (Step, error) {
	rows, err := tx.Query(ctx, `UPDATE run_steps s SET status = $4, updated_at = now(),
			data = CASE WHEN $5::jsonb IS NULL THEN s.data ELSE s.data || jsonb_build_object('answers', $5::jsonb) END
		FROM runs r WHERE s.id = $1 AND r.id = s.run_id AND r.owner_id = $2 AND s.kind = $3 AND s.status = 'pending'
		RETURNING `+prefixed("s.", stepCols), step, user, kind, status, answers)
	if err != nil {
		return Step{}, err
	}
	s, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Step])
	if errors.Is(err, pgx.ErrNoRows) {
		// Someone else's, missing, or already settled?
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM run_steps s JOIN runs r ON r.id = s.run_id
			WHERE s.id = $1 AND r.owner_id = $2 AND s.kind = $3)`, step, user, kind).Scan(&exists); err != nil {
			return Step{}, err
		}
		if exists {
			return Step{}, ErrDecided
		}
		return Step{}, ErrNotFound
	}
	return s, err
}

// SettlePending settles every pending step of a run with status (a timeout
// answers questions with their given answers elsewhere; this is for Stop
// and failures: cancelled).
func (d *DB) SettlePending(ctx context.Context, run int64, status string) error {
	_, err := d.q().Exec(ctx, `UPDATE run_steps SET status = $2, updated_at = now()
		WHERE run_id = $1 AND status IN ('pending', 'running') AND kind <> 'steer'`, run, status)
	return err
}

// ToolPolicy is a workspace's rule for one tool.
type ToolPolicy struct {
	Tool    string `db:"tool"`
	Enabled bool   `db:"enabled"`
	Mode    string `db:"mode"` // auto, ask or deny
}

// ToolPolicies returns the rules set for one of the user's workspaces (tools
// without a row follow their defaults).
func (d *DB) ToolPolicies(ctx context.Context, user, workspace int64) (map[string]ToolPolicy, error) {
	rows, err := d.q().Query(ctx, `SELECT p.tool, p.enabled, p.mode FROM tool_policies p
		JOIN workspaces w ON w.id = p.workspace_id WHERE p.workspace_id = $1 AND w.owner_id = $2`, workspace, user)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[ToolPolicy])
	if err != nil {
		return nil, err
	}
	out := make(map[string]ToolPolicy, len(list))
	for _, p := range list {
		out[p.Tool] = p
	}
	return out, nil
}

// SetToolPolicy sets the rule of one tool in one of the user's workspaces.
func (d *DB) SetToolPolicy(ctx context.Context, user, workspace int64, tool string, enabled bool, mode string) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		var ok bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM workspaces WHERE id = $1 AND owner_id = $2)",
			workspace, user).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		return setToolPolicy(ctx, tx, workspace, tool, enabled, mode)
	}))
}

func setToolPolicy(ctx context.Context, q querier, workspace int64, tool string, enabled bool, mode string) error {
	_, err := q.Exec(ctx, `INSERT INTO tool_policies (workspace_id, tool, enabled, mode) VALUES ($1, $2, $3, $4)
		ON CONFLICT (workspace_id, tool) DO UPDATE SET enabled = $3, mode = $4, updated_at = now()`,
		workspace, tool, enabled, mode)
	return err
}

// SetAgentMaxSteps sets how many tool rounds an agent run may take in one
// of the user's workspaces.
func (d *DB) SetAgentMaxSteps(ctx context.Context, user, workspace int64, n int) error {
	return execOne(ctx, d.q(), "UPDATE workspaces SET agent_max_steps = $3, updated_at = now() WHERE id = $1 AND owner_id = $2",
		workspace, user, n)
}

// ThreadGrants lists the tools approved for the rest of one of the user's
// threads.
func (d *DB) ThreadGrants(ctx context.Context, user, thread int64) (map[string]bool, error) {
	rows, err := d.q().Query(ctx, `SELECT g.tool FROM tool_thread_grants g JOIN threads t ON t.id = g.thread_id
		WHERE g.thread_id = $1 AND t.owner_id = $2`, thread, user)
	if err != nil {
		return nil, err
	}
	tools, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(tools))
	for _, t := range tools {
		out[t] = true
	}
	return out, nil
}

// TimeoutQuestion settles a pending question with the recommended answers
// once its deadline passed; one answered meanwhile is ErrDecided.
func (d *DB) TimeoutQuestion(ctx context.Context, step int64, answers []string) (Step, error) {
	rows, err := d.q().Query(ctx, `UPDATE run_steps SET status = 'timeout', updated_at = now(),
			data = data || jsonb_build_object('answers', $2::jsonb)
		WHERE id = $1 AND kind = 'question' AND status = 'pending' RETURNING `+stepCols, step, answers)
	if err != nil {
		return Step{}, err
	}
	s, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Step])
	if errors.Is(err, pgx.ErrNoRows) {
		return Step{}, ErrDecided
	}
	return s, err
}
