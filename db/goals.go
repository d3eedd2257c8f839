package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Goal statuses (thread_goals.status).
const (
	GoalActive  = "active"  // judged after each agent run of the thread
	GoalPaused  = "paused"  // by the user, by Stop on a continuation, or after a failure
	GoalMet     = "met"     // the model judged it met
	GoalStopped = "stopped" // the budget ran out
)

// The default budget of a new goal, and its bounds.
const (
	DefaultGoalRuns    = 3
	DefaultGoalTokens  = 50_000
	DefaultGoalSeconds = 600
	MaxGoalRuns        = 50
	MinGoalTokens      = 1_000
	MaxGoalTokens      = 10_000_000
	MinGoalSeconds     = 60
	MaxGoalSeconds     = 86_400
	MaxGoalRunes       = 2000
)

// ErrGoalNotActive refuses pausing a goal that is not active.
var ErrGoalNotActive = errors.New("db: the goal is not active")

// ErrGoalMet refuses resuming a goal that is met.
var ErrGoalMet = errors.New("db: the goal is met")

// ErrGoalBudgetUsed refuses resuming a goal whose continuation runs or
// tokens are used up (the user raises the budget first).
var ErrGoalBudgetUsed = errors.New("db: the goal's budget is used up")

// Goal is a thread's goal and its budget (runs, tokens, time) with what of
// it is used.
type Goal struct {
	ThreadID    int64      `db:"thread_id"`
	Text        string     `db:"goal"`
	Status      string     `db:"status"`
	MaxRuns     int        `db:"max_runs"`
	MaxTokens   int        `db:"max_tokens"`
	MaxSeconds  int        `db:"max_seconds"`
	RunsUsed    int        `db:"runs_used"`
	TokensUsed  int64      `db:"tokens_used"`
	ActiveSince time.Time  `db:"active_since"`
	EndedAt     *time.Time `db:"ended_at"`
	// ElapsedMS is the wall time since the goal was set or resumed, up to
	// now or to when it stopped being active.
	ElapsedMS         int64  `db:"elapsed_ms"`
	JudgedRunID       *int64 `db:"judged_run_id"`
	Checking          bool   `db:"checking"`
	ContinuationRunID *int64 `db:"continuation_run_id"`
	Note              string `db:"note"`
	Version           int    `db:"version"`
}

// Exhausted names the part of the budget that is used up ("runs",
// "tokens", "time"; "" when there is room for another continuation).
func (g Goal) Exhausted() string {
	switch {
	case g.RunsUsed >= g.MaxRuns:
		return "runs"
	case g.TokensUsed >= int64(g.MaxTokens):
		return "tokens"
	case g.ElapsedMS >= int64(g.MaxSeconds)*1000:
		return "time"
	}
	return ""
}

// goalCols reads a goal; g is thread_goals, cr its continuation run. A goal
// whose continuation was cancelled while still queued (Stop before it
// started, which never settles as a run) reads as paused.
const goalCols = `g.thread_id, g.goal,
	CASE WHEN ` + stoppedQueued + ` THEN 'paused' ELSE g.status END AS status,
	g.max_runs, g.max_tokens, g.max_seconds, g.runs_used, g.tokens_used, g.active_since,
	CASE WHEN ` + stoppedQueued + ` THEN COALESCE(g.ended_at, cr.finished_at) ELSE g.ended_at END AS ended_at,
	(extract(epoch FROM COALESCE(g.ended_at, CASE WHEN ` + stoppedQueued + ` THEN cr.finished_at END, now()) - g.active_since) * 1000)::bigint AS elapsed_ms,
	g.judged_run_id, g.checking, g.continuation_run_id,
	CASE WHEN ` + stoppedQueued + ` THEN 'Stopped before it started: the goal is paused. /goal resume goes on.' ELSE g.note END AS note,
	g.version`

// stoppedQueued: the goal is active but its continuation was cancelled
// before it started (Stop on a queued run, which never settles as a run).
const stoppedQueued = `(g.status = 'active' AND cr.status = 'cancelled' AND cr.started_at IS NULL)`

const goalFrom = ` FROM thread_goals g JOIN threads t ON t.id = g.thread_id
	LEFT JOIN runs cr ON cr.id = g.continuation_run_id`

func collectGoal(rows pgx.Rows, err error) (Goal, error) {
	if err != nil {
		return Goal{}, err
	}
	g, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Goal])
	return g, mapErr(err)
}

// Goal is the goal of one of the user's threads (ErrNotFound: none).
func (d *DB) Goal(ctx context.Context, user, thread int64) (Goal, error) {
	return collectGoal(d.q().Query(ctx, "SELECT "+goalCols+goalFrom+" WHERE g.thread_id = $1 AND t.owner_id = $2", thread, user))
}

// lockGoal reads the goal of one of the user's threads and locks it for the
// rest of the transaction.
func lockGoal(ctx context.Context, tx pgx.Tx, user, thread int64) (Goal, error) {
	return collectGoal(tx.Query(ctx, "SELECT "+goalCols+goalFrom+" WHERE g.thread_id = $1 AND t.owner_id = $2 FOR UPDATE OF g", thread, user))
}

// updateGoal writes g back (every change bumps the version) and reads it
// again.
func updateGoal(ctx context.Context, tx pgx.Tx, user int64, g Goal) (Goal, error) {
	_, err := tx.Exec(ctx, `UPDATE thread_goals SET status = $2, runs_used = $3, tokens_used = $4,
			active_since = $5, ended_at = $6, judged_run_id = $7, checking = $8, continuation_run_id = $9,
			note = $10, max_runs = $11, max_tokens = $12, max_seconds = $13, version = version + 1, updated_at = now()
		WHERE thread_id = $1`, g.ThreadID, g.Status, g.RunsUsed, g.TokensUsed, g.ActiveSince, g.EndedAt,
		g.JudgedRunID, g.Checking, g.ContinuationRunID, noNUL(g.Note), g.MaxRuns, g.MaxTokens, g.MaxSeconds)
	if err != nil {
		return Goal{}, err
	}
	return lockGoal(ctx, tx, user, g.ThreadID)
}

// endGoal stops the goal being active (time used stands still).
func endGoal(g *Goal, status, note string, now time.Time) {
	if g.EndedAt == nil {
		g.EndedAt = &now
	}
	g.Status, g.Note, g.Checking = status, note, false
}

// dbNow is the database's clock, which active_since and ended_at use.
func dbNow(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var now time.Time
	err := tx.QueryRow(ctx, "SELECT now()").Scan(&now)
	return now, err
}

// SetGoal gives one of the user's threads a goal, replacing the one it had
// (a replaced goal's budget settings are kept, what it used starts again).
func (d *DB) SetGoal(ctx context.Context, user, thread int64, text string) (Goal, error) {
	var g Goal
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO thread_goals (thread_id, goal, max_runs, max_tokens, max_seconds)
			SELECT t.id, $3, $4, $5, $6 FROM threads t WHERE t.id = $1 AND t.owner_id = $2
			ON CONFLICT (thread_id) DO UPDATE SET goal = EXCLUDED.goal, status = 'active', runs_used = 0,
				tokens_used = 0, active_since = now(), ended_at = NULL, checking = false,
				continuation_run_id = NULL, note = '', version = thread_goals.version + 1, updated_at = now()`,
			thread, user, noNUL(text), DefaultGoalRuns, DefaultGoalTokens, DefaultGoalSeconds)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		g, err = lockGoal(ctx, tx, user, thread)
		return err
	})
	return g, mapErr(err)
}

// GoalBudget changes a goal's budget; a nil field stays as it is.
type GoalBudget struct {
	Runs, Tokens, Seconds *int
}

// SetGoalBudget changes the budget of the goal of one of the user's
// threads (values are checked by the caller; the table's bounds refuse the
// rest).
func (d *DB) SetGoalBudget(ctx context.Context, user, thread int64, b GoalBudget) (Goal, error) {
	var g Goal
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if g, err = lockGoal(ctx, tx, user, thread); err != nil {
			return err
		}
		if b.Runs != nil {
			g.MaxRuns = *b.Runs
		}
		if b.Tokens != nil {
			g.MaxTokens = *b.Tokens
		}
		if b.Seconds != nil {
			g.MaxSeconds = *b.Seconds
		}
		g, err = updateGoal(ctx, tx, user, g)
		return err
	})
	return g, mapErr(err)
}

// PauseGoal pauses the active goal of one of the user's threads: no
// judgement, no continuation until it is resumed (a judgement under way is
// dropped). ErrGoalNotActive when it is not active.
func (d *DB) PauseGoal(ctx context.Context, user, thread int64, note string) (Goal, error) {
	var g Goal
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if g, err = lockGoal(ctx, tx, user, thread); err != nil {
			return err
		}
		if g.Status != GoalActive {
			return ErrGoalNotActive
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		endGoal(&g, GoalPaused, note, now)
		g, err = updateGoal(ctx, tx, user, g)
		return err
	})
	return g, mapErr(err)
}

// ResumeGoal makes a paused or stopped goal of one of the user's threads
// active again; its time starts again from now. When the thread is idle and
// its agent is on, a continuation (content(g) as the user message) is
// queued in the same transaction and returned: resuming goes on at once.
// ErrGoalMet for a met goal, ErrGoalBudgetUsed when its runs or tokens are
// used up; resuming an active goal changes nothing.
func (d *DB) ResumeGoal(ctx context.Context, user, thread int64, content func(Goal) string, route Router) (Goal, *Sent, error) {
	var g Goal
	var sent *Sent
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if g, err = lockGoal(ctx, tx, user, thread); err != nil {
			return err
		}
		switch g.Status {
		case GoalActive:
			return nil
		case GoalMet:
			return ErrGoalMet
		}
		if g.RunsUsed >= g.MaxRuns || g.TokensUsed >= int64(g.MaxTokens) {
			return ErrGoalBudgetUsed
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		g.Status, g.ActiveSince, g.EndedAt, g.Checking, g.Note = GoalActive, now, nil, false, "Resumed."
		g.ContinuationRunID = nil
		var idle, agent bool
		if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM runs WHERE thread_id = $1 AND status IN ('queued', 'running', 'waiting')),
				t.agent_enabled FROM threads t WHERE t.id = $1`, thread).Scan(&idle, &agent); err != nil {
			return err
		}
		if idle && agent {
			s, err := insertContinuation(ctx, tx, &g, content(g), route)
			if err != nil {
				return err
			}
			sent = &s
			g.RunsUsed++
		}
		g, err = updateGoal(ctx, tx, user, g)
		return err
	})
	return g, sent, mapErr(err)
}

// ClearGoal removes the goal of one of the user's threads (ErrNotFound:
// none).
func (d *DB) ClearGoal(ctx context.Context, user, thread int64) error {
	tag, err := d.q().Exec(ctx, `DELETE FROM thread_goals g USING threads t
		WHERE g.thread_id = $1 AND t.id = g.thread_id AND t.owner_id = $2`, thread, user)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// GoalSettled is a run of a thread with a goal that settled, as the
// runtime reports it where it settled.
type GoalSettled struct {
	User, Thread, Run int64
	Status            string // the run's final status
	Tokens            int64  // its usage: prompt + output tokens
}

// GoalAfterRun is what a settled run meant for its thread's goal.
type GoalAfterRun struct {
	Goal Goal
	// Judge: the run completed while the goal was active, and this caller
	// (the only one, for this run) is to judge it and report the verdict
	// with GoalVerdict.
	Judge bool
	// Paused: the run was the goal's continuation and it was stopped or
	// failed; the goal is paused (Goal.Note says why).
	Paused bool
}

// GoalRunSettled records a settled run against its thread's goal
// (ErrNotFound: the thread has no goal): a continuation's tokens count
// against the budget; a continuation stopped by its user or failed pauses
// the goal; a completed run of an active goal is claimed for judgement —
// once per run, whichever instance asks — unless the thread has queued runs
// (the user's next message goes first, and its run is judged) or the run
// ended before the goal was set or last resumed.
func (d *DB) GoalRunSettled(ctx context.Context, s GoalSettled) (GoalAfterRun, error) {
	var out GoalAfterRun
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		g, err := lockGoal(ctx, tx, s.User, s.Thread)
		if err != nil {
			return err
		}
		cont := g.ContinuationRunID != nil && *g.ContinuationRunID == s.Run
		changed := false
		// An interrupted run is resumed as the same run, its usage kept
		// and counted when it settles for good.
		if cont && s.Tokens > 0 && s.Status != RunInterrupted {
			g.TokensUsed += s.Tokens
			changed = true
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		switch {
		case cont && g.Status == GoalActive && s.Status == RunCancelled:
			endGoal(&g, GoalPaused, "Stopped: the goal is paused. /goal resume goes on.", now)
			out.Paused, changed = true, true
		case cont && g.Status == GoalActive && s.Status == RunFailed:
			endGoal(&g, GoalPaused, "The continuation failed: the goal is paused. /goal resume tries again.", now)
			out.Paused, changed = true, true
		case s.Status == RunCompleted && g.Status == GoalActive && (g.JudgedRunID == nil || *g.JudgedRunID < s.Run):
			// A run that ended before the goal was set or resumed is not
			// judged (its goroutine may come late), nor one with runs
			// queued behind it.
			var queued, before bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE thread_id = $1 AND status = 'queued'),
					COALESCE((SELECT finished_at < $3 FROM runs WHERE id = $2), false)`, s.Thread, s.Run, g.ActiveSince).Scan(&queued, &before); err != nil {
				return err
			}
			if !queued && !before {
				run := s.Run
				g.JudgedRunID, g.Checking = &run, true
				out.Judge, changed = true, true
			}
		}
		if changed {
			g, err = updateGoal(ctx, tx, s.User, g)
		}
		out.Goal = g
		return err
	})
	return out, mapErr(err)
}

// Goal verdict outcomes (GoalOutcome.Result).
const (
	GoalResultMet       = "met"
	GoalResultStopped   = "stopped"   // not met, and the budget is used up
	GoalResultContinued = "continued" // not met: a continuation was queued
	GoalResultDropped   = "dropped"   // the goal changed meanwhile (paused, cleared, replaced): nothing done
)

// GoalVerdict is the judge's verdict on a run claimed by GoalRunSettled.
type GoalVerdict struct {
	User, Thread, Run int64
	Met               bool
	Note              string // what the panel says of the verdict
	// Continue is the continuation's user message, when one is sent.
	Continue func(Goal) string
	// StoppedNote is what the panel says when the budget is used up.
	StoppedNote func(Goal) string
	Route       Router
}

// GoalOutcome is what a verdict did.
type GoalOutcome struct {
	Goal   Goal
	Result string
	Sent   *Sent // the continuation (GoalResultContinued)
}

// ApplyGoalVerdict applies a verdict: met → the goal is met; not met → a
// continuation is queued (the user message, its answer and run, in this
// transaction, counted against the budget), or, when the budget is used
// up, the goal is stopped. A goal paused, cleared or replaced since the
// claim is left as it is (GoalResultDropped).
func (d *DB) ApplyGoalVerdict(ctx context.Context, v GoalVerdict) (GoalOutcome, error) {
	var out GoalOutcome
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		g, err := lockGoal(ctx, tx, v.User, v.Thread)
		if errors.Is(mapErr(err), ErrNotFound) {
			out.Result = GoalResultDropped
			return nil
		}
		if err != nil {
			return err
		}
		if g.Status != GoalActive || !g.Checking || g.JudgedRunID == nil || *g.JudgedRunID != v.Run {
			out.Goal, out.Result = g, GoalResultDropped
			return nil
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		switch {
		case v.Met:
			endGoal(&g, GoalMet, v.Note, now)
			out.Result = GoalResultMet
		case g.Exhausted() != "":
			endGoal(&g, GoalStopped, v.StoppedNote(g), now)
			out.Result = GoalResultStopped
		default:
			g.RunsUsed++
			g.Checking, g.Note = false, v.Note
			s, err := insertContinuation(ctx, tx, &g, v.Continue(g), v.Route)
			if err != nil {
				return err
			}
			out.Sent, out.Result = &s, GoalResultContinued
		}
		out.Goal, err = updateGoal(ctx, tx, v.User, g)
		return err
	})
	return out, mapErr(err)
}

// insertContinuation queues a goal's continuation in tx: a user message
// under the thread's active leaf, marked as a goal continuation
// (metadata.goal_continuation), its answer and queued run, like a send.
// The run is recorded as the goal's continuation (written by the caller).
func insertContinuation(ctx context.Context, tx pgx.Tx, g *Goal, content string, route Router) (Sent, error) {
	var out Sent
	rows, err := tx.Query(ctx, "SELECT "+threadCols+" FROM threads WHERE id = $1 FOR UPDATE", g.ThreadID)
	if err != nil {
		return out, err
	}
	if out.Thread, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Thread]); err != nil {
		return out, err
	}
	t := out.Thread
	if out.User, err = insertMessage(ctx, tx, t.ID, t.ActiveLeafID, RoleUser, noNUL(content), MsgComplete, MessageMeta{}); err != nil {
		return out, fmt.Errorf("continuation message: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE messages SET metadata = metadata || '{"goal_continuation": true}'::jsonb WHERE id = $1`, out.User.ID); err != nil {
		return out, err
	}
	if out.Assistant, out.Run, err = insertAnswer(ctx, tx, t, out.User.ID, route, ""); err != nil {
		return out, err
	}
	run := out.Run.ID
	g.ContinuationRunID = &run
	return out, nil
}
