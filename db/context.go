package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// SettingSystemPrompt is the instance setting holding the system prompt
// every request starts with (an admin writes it).
const SettingSystemPrompt = "system_prompt"

// ContextSources is everything besides the conversation itself that goes
// into a model request for a thread.
type ContextSources struct {
	Thread       Thread
	Role         *Role  // nil: the thread has no role
	Instructions string // the user's custom instructions
	SystemPrompt string // the instance's system prompt
}

// ContextSources loads the thread, its role, the user's instructions and the
// instance's system prompt.
func (d *DB) ContextSources(ctx context.Context, user, thread int64) (ContextSources, error) {
	var cs ContextSources
	var err error
	if cs.Thread, err = d.Thread(ctx, user, thread); err != nil {
		return cs, err
	}
	if cs.Thread.RoleID != nil {
		r, err := d.Role(ctx, user, *cs.Thread.RoleID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return cs, err
		}
		if err == nil {
			cs.Role = &r
		}
	}
	err = d.q().QueryRow(ctx, `SELECT u.instructions,
			COALESCE((SELECT value FROM settings WHERE key = $2), '')
		FROM users u WHERE u.id = $1`, user, SettingSystemPrompt).Scan(&cs.Instructions, &cs.SystemPrompt)
	return cs, mapErr(err)
}

// Instructions returns the user's custom instructions.
func (d *DB) Instructions(ctx context.Context, user int64) (string, error) {
	var s string
	err := d.q().QueryRow(ctx, "SELECT instructions FROM users WHERE id = $1", user).Scan(&s)
	return s, mapErr(err)
}

// SetInstructions stores the user's custom instructions.
func (d *DB) SetInstructions(ctx context.Context, user int64, s string) error {
	return execOne(ctx, d.q(), "UPDATE users SET instructions = $2 WHERE id = $1", user, s)
}

// ThreadSettings are the per-thread inputs of context assembly.
type ThreadSettings struct {
	RoleID     *int64 // must be the user's own role; nil: none
	Notes      string
	NumCtx     int // 0: no cap of the thread's own
	Compaction bool
}

// UpdateThreadSettings stores a thread's role, notes and context settings.
func (d *DB) UpdateThreadSettings(ctx context.Context, user, thread int64, s ThreadSettings) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		if err := setThreadRole(ctx, tx, user, thread, s.RoleID); err != nil {
			return err
		}
		return execOne(ctx, tx, `UPDATE threads SET notes = $3, num_ctx = $4, compaction = $5, updated_at = now()
			WHERE id = $1 AND owner_id = $2`, thread, user, s.Notes, s.NumCtx, s.Compaction)
	}))
}

// SetThreadRole gives a thread one of the user's roles (nil: none).
func (d *DB) SetThreadRole(ctx context.Context, user, thread int64, role *int64) error {
	return setThreadRole(ctx, d.q(), user, thread, role)
}

// SetThreadModel changes the model that answers in a thread.
func (d *DB) SetThreadModel(ctx context.Context, user, thread int64, model string) error {
	return execOne(ctx, d.q(), "UPDATE threads SET model = $3, updated_at = now() WHERE id = $1 AND owner_id = $2",
		thread, user, model)
}

// setThreadRole fails with ErrNotFound when the thread or the role is not
// the user's.
func setThreadRole(ctx context.Context, q querier, user, thread int64, role *int64) error {
	return execOne(ctx, q, `UPDATE threads SET role_id = $3, updated_at = now()
		WHERE id = $1 AND owner_id = $2
		  AND ($3::bigint IS NULL OR EXISTS (SELECT 1 FROM roles WHERE id = $3 AND owner_id = $2))`, thread, user, role)
}

// Compactions returns the compaction nodes (role "system") hanging under any
// of the given messages of one of the user's threads, newest first.
func (d *DB) Compactions(ctx context.Context, user, thread int64, under []int64) ([]Message, error) {
	if len(under) == 0 {
		return nil, nil
	}
	rows, err := d.q().Query(ctx, `SELECT `+liveCols("m.")+` FROM messages m
		JOIN threads t ON t.id = m.thread_id
		WHERE m.thread_id = $1 AND t.owner_id = $2 AND m.role = 'system' AND m.parent_id = ANY($3)
		  AND m.metadata->>'kind' = 'compaction'
		ORDER BY m.id DESC`, thread, user, under)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Message])
}

// AddCompaction stores a summary of the path from the root to through as a
// compaction node under it. The thread's visible branch does not change.
func (d *DB) AddCompaction(ctx context.Context, user, through int64, summary string, meta MessageMeta) (Message, error) {
	meta.Kind = KindCompaction
	rows, err := d.q().Query(ctx, `INSERT INTO messages (thread_id, parent_id, role, content, status, metadata)
		SELECT m.thread_id, m.id, 'system', $3, 'complete', $4 FROM messages m
		JOIN threads t ON t.id = m.thread_id
		WHERE m.id = $1 AND t.owner_id = $2 AND m.role <> 'system'
		RETURNING `+messageCols, through, user, summary, meta)
	if err != nil {
		return Message{}, err
	}
	m, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Message])
	if err != nil {
		return Message{}, mapErr(err)
	}
	d.noteThreadAfter(ctx, m.ThreadID)
	return m, nil
}

// Calibration returns how many characters a model's token holds, as learned
// so far (0 and 0 samples when nothing was learned).
func (d *DB) Calibration(ctx context.Context, model string) (charsPerToken float64, samples int, err error) {
	err = d.q().QueryRow(ctx, "SELECT chars_per_token, samples FROM model_calibration WHERE model = $1", model).
		Scan(&charsPerToken, &samples)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil
	}
	return charsPerToken, samples, err
}

// Calibrate folds observations of a model's characters per token into its
// calibration: the mean of the first five, then an exponential moving
// average (weight 0.2 per observation), so the estimate settles quickly
// and then follows slow drift. samples observations with the mean
// charsPerToken come as one batch (chat's calibrator gathers what answers
// finishing together observed) and weigh as they would one by one: those
// up to the fifth sample join the mean (of s samples so far, j joining:
// the estimate moves by j/(s+j) of the way), the rest are steps of the
// moving average (each 0.2 of what remains): in all 1 − s/(s+j)·0.8^(n−j)
// for n samples. The row's lock lasts until the commit, which is
// asynchronous: a sample lost in a crash costs nothing.
func (d *DB) Calibrate(ctx context.Context, model string, charsPerToken float64, samples int) error {
	if samples < 1 {
		return nil
	}
	return d.InTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue("SET LOCAL synchronous_commit = off")
		b.Queue(`INSERT INTO model_calibration (model, chars_per_token, samples) VALUES ($1, $2, $3)
		ON CONFLICT (model) DO UPDATE SET
			chars_per_token = model_calibration.chars_per_token
				+ (EXCLUDED.chars_per_token - model_calibration.chars_per_token)
				* (1 - model_calibration.samples::float8
					/ (model_calibration.samples + least(EXCLUDED.samples, greatest(5 - model_calibration.samples, 0)))
					* power(0.8::float8, EXCLUDED.samples - least(EXCLUDED.samples, greatest(5 - model_calibration.samples, 0)))),
			samples = model_calibration.samples + EXCLUDED.samples, updated_at = now()`, model, charsPerToken, samples)
		return tx.SendBatch(ctx, b).Close()
	})
}

// UsageTotals sums a thread's answers.
type UsageTotals struct {
	Answers      int
	PromptTokens int64
	OutputTokens int64
}

// ThreadUsage sums the token usage of the runs of one of the user's threads.
func (d *DB) ThreadUsage(ctx context.Context, user, thread int64) (UsageTotals, error) {
	var u UsageTotals
	err := d.q().QueryRow(ctx, `SELECT count(*) FILTER (WHERE usage ? 'output_tokens' AND parent_run_id IS NULL),
			COALESCE(sum((usage->>'prompt_tokens')::bigint), 0)::bigint,
			COALESCE(sum((usage->>'output_tokens')::bigint), 0)::bigint
		FROM runs WHERE thread_id = $1 AND owner_id = $2`, thread, user).Scan(&u.Answers, &u.PromptTokens, &u.OutputTokens)
	return u, mapErr(err)
}
