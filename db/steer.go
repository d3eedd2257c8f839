package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// ErrRunNotActive is returned when a steering message is sent to a run that
// has already ended (or is not an agent run).
var ErrRunNotActive = errors.New("db: the run is not active")

// AddSteer stores a steering message for one of the user's active agent
// runs as a pending steer step: the run takes it at its next round
// boundary, on whichever instance executes it (TakeSteers).
func (d *DB) AddSteer(ctx context.Context, user, run int64, text string) (Step, error) {
	var s Step
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var status string
		err := tx.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1 AND owner_id = $2 AND kind = 'agent'
			FOR NO KEY UPDATE`, run, user).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if status != RunQueued && status != RunRunning && status != RunWaiting {
			return ErrRunNotActive
		}
		if s, err = insertStep(ctx, tx, run, StepSteer, StepPending, StepData{Content: text}); err != nil {
			return err
		}
		// Right after the commit (InTx): the instance running it shows the pending
		// card to its watchers at once, followers elsewhere read its steps.
		return notifyRuns(ctx, tx, NoteStepped, []int64{run})
	})
	return s, mapErr(err)
}

// TakeSteers takes a run's pending steering messages, oldest first: each
// becomes ok, gets round and moves to the end of the run's steps (where it
// entered the run's context), and the checkpoint that build returns (the
// run's messages with them appended) is saved in the same transaction. It
// returns nothing, and saves nothing, when none is pending.
func (d *DB) TakeSteers(ctx context.Context, run int64, round int, build func(steers []Step) any) ([]Step, error) {
	var taken []Step
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT 1 FROM runs WHERE id = $1 FOR NO KEY UPDATE", run); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT id FROM run_steps WHERE run_id = $1 AND kind = $2 AND status = 'pending' ORDER BY seq",
			run, StepSteer)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		for _, id := range ids {
			rows, err := tx.Query(ctx, `UPDATE run_steps SET status = 'ok', updated_at = now(),
					seq = (SELECT max(seq) + 1 FROM run_steps WHERE run_id = $1),
					data = jsonb_set(data, '{round}', to_jsonb($3::int))
				WHERE id = $2 RETURNING `+stepCols, run, id, round)
			if err != nil {
				return err
			}
			s, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Step])
			if err != nil {
				return err
			}
			taken = append(taken, s)
		}
		cp, err := outboxed(ctx, tx, build(taken))
		if err != nil {
			return err
		}
		return saveCheckpoint(ctx, tx, run, cp)
	})
	if err != nil {
		return nil, mapErr(err)
	}
	return taken, nil
}

// StepNotTaken is the status of a steering message still pending when its
// run ended: it arrived after the last round boundary (while the model
// wrote its final answer, or as the run stopped), so the model never saw it.
const StepNotTaken = "not_taken"

// settleLateSteers settles a finishing run's pending steering messages as
// not taken and moves them to the end of its steps (after the final
// answer's turn, where the run ended). FinishRun calls it after it updated
// the run's row: AddSteer locks that row and checks the run is active, so
// a steer is either settled here or refused, never left pending.
func settleLateSteers(ctx context.Context, tx pgx.Tx, run int64) error {
	_, err := tx.Exec(ctx, `UPDATE run_steps s SET status = $2, updated_at = now(), seq = top.seq + late.n
		FROM (SELECT max(seq) AS seq FROM run_steps WHERE run_id = $1) top,
		     (SELECT id, row_number() OVER (ORDER BY seq) AS n FROM run_steps
		      WHERE run_id = $1 AND kind = $3 AND status = 'pending') late
		WHERE s.id = late.id`, run, StepNotTaken, StepSteer)
	return err
}

// LateSteers returns the steering messages the newest finished run of one
// of the user's threads did not take (StepNotTaken), oldest first.
func (d *DB) LateSteers(ctx context.Context, user, thread int64) ([]Step, error) {
	rows, err := d.q().Query(ctx, `SELECT `+prefixed("s.", stepCols)+` FROM run_steps s
		WHERE s.kind = $3 AND s.status = $4 AND s.run_id = (SELECT max(r.id) FROM runs r
			WHERE r.thread_id = $1 AND r.owner_id = $2 AND r.status NOT IN ('queued', 'running', 'waiting'))
		ORDER BY s.seq`, thread, user, StepSteer, StepNotTaken)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Step])
}
