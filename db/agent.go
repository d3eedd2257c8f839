package db

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kinds of agent steps.
const (
	StepStart     = "start"      // the run began (committed with the send)
	StepModelTurn = "model_turn" // one answer of the model: text and tool calls
	StepToolCall  = "tool_call"  // one tool call and its result
	StepApproval  = "approval"   // a request to run a tool, and its decision
	StepQuestion  = "question"   // questions to the user, and the answers
	StepEvidence  = "evidence"   // files changed and sources used, at the end
	// StepHook is a lifecycle hook that failed or denied a call: Content
	// is the event, Output the hook (its URL or command), Error the
	// failure, Reason a denial's reason, Tool and CallStep the call.
	StepHook = "hook"
	// StepSteer is a message the user sent to a running agent run with
	// /steer (Content): pending until the loop takes it at its next round
	// boundary (ok, moved to the end of the trace, Round set), or
	// StepNotTaken when the run ended first (FinishRun).
	StepSteer = "steer"
	// StepCompaction is a checkpoint of an agent run's own context: its
	// older rounds summarized by the model (Content) so that the next
	// request fits, saved with the checkpoint whose messages it replaced.
	// Covers is how many rounds the summary covers (from the first), Trigger
	// why it was written, Changes the files changed so far; an error status
	// (Error set) means the summary could not be written and older tool
	// results were left out instead.
	StepCompaction = "compaction"
)

// Why a run's checkpoint was written (StepData.Trigger).
const (
	CompactAfterTools = "after_tools" // the run's own rounds passed their share of the window
	CompactOverflow   = "overflow"    // the next request would not have fit
)

// Step statuses (besides the decisions of approvals).
const (
	StepPending   = "pending"
	StepRunning   = "running"
	StepOK        = "ok"
	StepError     = "error"
	StepRefused   = "refused"
	StepCancelled = "cancelled"
	StepAnswered  = "answered"
	StepTimeout   = "timeout"
)

// Approval decisions.
const (
	DecideOnce   = "once"
	DecideThread = "thread"
	DecideAlways = "always"
	DecideDeny   = "deny"
)

// FileChange is one workspace file changed by a successful tool call.
type FileChange struct {
	Path string `json:"path"` // relative to the workspace root, slash-separated
	Op   string `json:"op"`   // created, modified or deleted
}

// StepSource is something the agent read: a workspace file, a
// knowledge-base chunk or a web page.
type StepSource struct {
	Kind       string `json:"kind"`  // file, kb or web
	Label      string `json:"label"` // path, "document › heading", or URL
	DocumentID int64  `json:"document_id,omitempty"`
	ChunkID    int64  `json:"chunk_id,omitempty"`
}

// StepCall is a tool call as the model wrote it.
type StepCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Question is one question of an ask-the-user step.
type Question struct {
	Text    string   `json:"text"`
	Options []string `json:"options"`
	// Recommended is the index of the recommended option (always 0 when
	// set: it is listed first), or -1.
	Recommended int `json:"recommended"`
}

// StepData is the payload of a step; which fields are set depends on its
// kind.
type StepData struct {
	Round int `json:"round,omitempty"`
	// start
	Root string `json:"root,omitempty"`
	// model_turn
	Content      string     `json:"content,omitempty"`
	Thinking     string     `json:"thinking,omitempty"`
	Calls        []StepCall `json:"calls,omitempty"`
	PromptTokens int        `json:"prompt_tokens,omitempty"`
	OutputTokens int        `json:"output_tokens,omitempty"`
	DurationMS   int64      `json:"duration_ms,omitempty"`
	// tool_call (and approval: Tool, Args, CallStep)
	Tool     string          `json:"tool,omitempty"`
	CallID   string          `json:"call_id,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Output   string          `json:"output,omitempty"`
	Error    string          `json:"error,omitempty"`
	Reason   string          `json:"reason,omitempty"` // why a call was refused
	CallStep int64           `json:"call_step,omitempty"`
	// tool_call and evidence
	Changes []FileChange `json:"changes,omitempty"`
	Sources []StepSource `json:"sources,omitempty"`
	// question
	Questions []Question `json:"questions,omitempty"`
	Answers   []string   `json:"answers,omitempty"`
	Deadline  *time.Time `json:"deadline,omitempty"`
	// compaction (Content is the summary, Changes the ledger so far)
	Covers       int    `json:"covers,omitempty"`
	Trigger      string `json:"trigger,omitempty"`
	TokensBefore int    `json:"tokens_before,omitempty"`
	TokensAfter  int    `json:"tokens_after,omitempty"`
}

// Step is one ordered, typed record of an agent run.
type Step struct {
	ID        int64     `db:"id"`
	RunID     int64     `db:"run_id"`
	Seq       int       `db:"seq"`
	Kind      string    `db:"kind"`
	Status    string    `db:"status"`
	Data      StepData  `db:"data"`
	CreatedAt time.Time `db:"created_at"`
	UpdatedAt time.Time `db:"updated_at"`
	// Subagents are the runs a delegating tool call started (Steps and
	// StepsOfMessages fill it in).
	Subagents []SubRun `db:"-"`
}

const stepCols = "id, run_id, seq, kind, status, data, created_at, updated_at"

// ErrDecided is returned when an approval or question was already settled.
var ErrDecided = errors.New("db: already decided")

// StepCheckpoint is a checkpoint that records the id of the step saved with
// it: AddStep calls it with the new step, inside the transaction, and saves
// what it returns.
type StepCheckpoint func(s Step) any

// AddStep appends a step to a run and, when checkpoint is not nil, saves
// the loop's state in the same transaction (a StepCheckpoint is called with
// the new step first).
func (d *DB) AddStep(ctx context.Context, run int64, kind, status string, data StepData, checkpoint any) (Step, error) {
	var s Step
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		s, err = insertStep(ctx, tx, run, kind, status, data)
		if err != nil {
			return err
		}
		if checkpoint, err = outboxed(ctx, tx, checkpoint); err != nil {
			return err
		}
		if f, ok := checkpoint.(StepCheckpoint); ok {
			checkpoint = f(s)
		}
		return saveCheckpoint(ctx, tx, run, checkpoint)
	})
	return s, mapErr(err)
}

func insertStep(ctx context.Context, q querier, run int64, kind, status string, data StepData) (Step, error) {
	// The run's row is locked first, so that two writers (the run, and a
	// hook delivery's job once the run ended or while it is resumed) take
	// seq one after the other instead of colliding on the same max + 1.
	// It must be called in a transaction.
	if _, err := q.Exec(ctx, "SELECT 1 FROM runs WHERE id = $1 FOR NO KEY UPDATE", run); err != nil {
		return Step{}, err
	}
	rows, err := q.Query(ctx, `INSERT INTO run_steps (run_id, seq, kind, status, data)
		VALUES ($1, (SELECT COALESCE(max(seq), 0) + 1 FROM run_steps WHERE run_id = $1), $2, $3, $4)
		RETURNING `+stepCols, run, kind, status, data)
	if err != nil {
		return Step{}, err
	}
	return pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Step])
}

func saveCheckpoint(ctx context.Context, q querier, run int64, checkpoint any) error {
	if checkpoint == nil {
		return nil
	}
	_, err := q.Exec(ctx, "UPDATE runs SET checkpoint = $2 WHERE id = $1", run, checkpoint)
	return err
}

// UpdateStep rewrites a step's status and data and, when checkpoint is not
// nil, saves the loop's state in the same transaction.
func (d *DB) UpdateStep(ctx context.Context, step int64, status string, data StepData, checkpoint any) (Step, error) {
	var s Step
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE run_steps SET status = $2, data = $3, updated_at = now()
			WHERE id = $1 RETURNING `+stepCols, step, status, data)
		if err != nil {
			return err
		}
		if s, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Step]); err != nil {
			return err
		}
		if checkpoint, err = outboxed(ctx, tx, checkpoint); err != nil {
			return err
		}
		return saveCheckpoint(ctx, tx, s.RunID, checkpoint)
	})
	return s, mapErr(err)
}

// StepByID returns a step of a run (for the loop, which owns the run).
func (d *DB) StepByID(ctx context.Context, run, id int64) (Step, error) {
	return oneRow[Step](ctx, d.q(), "SELECT "+stepCols+" FROM run_steps WHERE id = $1 AND run_id = $2", id, run)
}

// Steps lists the steps of one of the user's runs in order.
func (d *DB) Steps(ctx context.Context, user, run int64) ([]Step, error) {
	rows, err := d.q().Query(ctx, "SELECT "+prefixed("s.", stepCols)+` FROM run_steps s
		JOIN runs r ON r.id = s.run_id WHERE s.run_id = $1 AND r.owner_id = $2 ORDER BY s.seq`, run, user)
	if err != nil {
		return nil, err
	}
	steps, err := pgx.CollectRows(rows, pgx.RowToStructByName[Step])
	if err != nil {
		return nil, err
	}
	return steps, withSubRuns(ctx, d.q(), user, steps)
}

// RunSteps is an agent run with its steps.
type RunSteps struct {
	Run   Run
	Steps []Step
}

// StepsOfMessages returns, for each of the given assistant messages that an
// agent run answered, its latest run with its steps.
func (d *DB) StepsOfMessages(ctx context.Context, user int64, msgs []int64) (map[int64]RunSteps, error) {
	out := map[int64]RunSteps{}
	if len(msgs) == 0 {
		return out, nil
	}
	rows, err := d.q().Query(ctx, `SELECT DISTINCT ON (assistant_message_id) `+runCols+` FROM runs
		WHERE assistant_message_id = ANY($1) AND owner_id = $2 AND kind = 'agent'
		ORDER BY assistant_message_id, id DESC`, msgs, user)
	if err != nil {
		return nil, err
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Run])
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return out, nil
	}
	ids := make([]int64, len(runs))
	byRun := map[int64]int64{}
	for i, r := range runs {
		ids[i] = r.ID
		byRun[r.ID] = *r.AssistantMessageID
		out[*r.AssistantMessageID] = RunSteps{Run: r}
	}
	rows, err = d.q().Query(ctx, "SELECT "+stepCols+" FROM run_steps WHERE run_id = ANY($1) ORDER BY run_id, seq", ids)
	if err != nil {
		return nil, err
	}
	steps, err := pgx.CollectRows(rows, pgx.RowToStructByName[Step])
	if err != nil {
		return nil, err
	}
	if err := withSubRuns(ctx, d.q(), user, steps); err != nil {
		return nil, err
	}
	for _, s := range steps {
		m := byRun[s.RunID]
		rs := out[m]
		rs.Steps = append(rs.Steps, s)
		out[m] = rs
	}
	return out, nil
}

// AgentRuns lists the agent runs of one of the user's threads, newest
// first, with their steps (the debug view).
func (d *DB) AgentRuns(ctx context.Context, user, thread int64, limit int) ([]RunSteps, error) {
	rows, err := d.q().Query(ctx, "SELECT "+runCols+` FROM runs
		WHERE thread_id = $1 AND owner_id = $2 AND kind = 'agent' ORDER BY id DESC LIMIT $3`, thread, user, limit)
	if err != nil {
		return nil, err
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Run])
	if err != nil {
		return nil, err
	}
	out := make([]RunSteps, len(runs))
	for i, r := range runs {
		out[i].Run = r
		if out[i].Steps, err = d.Steps(ctx, user, r.ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SetRunWaiting moves a running run to waiting (for the user) and back,
// and reports whether a stop was requested.
func (d *DB) SetRunWaiting(ctx context.Context, run int64, waiting bool) (cancelRequested bool, err error) {
	from, to := RunRunning, RunWaiting
	if !waiting {
		from, to = RunWaiting, RunRunning
	}
	err = d.q().QueryRow(ctx, `UPDATE runs SET status = CASE WHEN status = $2 THEN $3 ELSE status END
		WHERE id = $1 RETURNING cancel_requested`, run, from, to).Scan(&cancelRequested)
	return cancelRequested, mapErr(err)
}

// CancelRequested reports whether someone asked to stop a run.
func (d *DB) CancelRequested(ctx context.Context, run int64) (bool, error) {
	var c bool
	err := d.q().QueryRow(ctx, "SELECT cancel_requested FROM runs WHERE id = $1", run).Scan(&c)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil // deleted with its thread or message: stop
	}
	return c, mapErr(err)
}

// Checkpoint returns the loop state saved by a run's last step (nil when
// none was saved).
func (d *DB) Checkpoint(ctx context.Context, run int64) (json.RawMessage, error) {
	var cp json.RawMessage
	err := d.q().QueryRow(ctx, "SELECT checkpoint FROM runs WHERE id = $1", run).Scan(&cp)
	return cp, mapErr(err)
}

// AdoptWaitingRuns takes over, for instance self, the waiting runs of
// instances silent for staleAfter, and with own (at start-up) also those
// recorded under self (its previous life), so their approvals and questions
// are waited for again.
func (d *DB) AdoptWaitingRuns(ctx context.Context, self string, own bool, staleAfter time.Duration) ([]Run, error) {
	rows, err := d.q().Query(ctx, `UPDATE runs SET instance_id = $1
		WHERE status = 'waiting' AND parent_run_id IS NULL AND (($3 AND instance_id = $1) OR (instance_id <> $1 AND NOT EXISTS (
			SELECT 1 FROM instances i WHERE i.id = runs.instance_id AND i.heartbeat_at > now() - make_interval(secs => $2))))
		RETURNING `+runCols, self, staleAfter.Seconds(), own)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Run])
}

// ErrNotResumable is returned when a run cannot be resumed from a
// checkpoint (it is not an interrupted agent run that saved one).
var ErrNotResumable = errors.New("db: run cannot be resumed")

// ResumeRun queues one of the user's interrupted agent runs again, to go on
// from its last checkpoint (from the start when it was interrupted before
// its first step saved one: nothing ran yet); its answer shows as being
// written again.
func (d *DB) ResumeRun(ctx context.Context, user, run int64) (Run, error) {
	var r Run
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		// The thread's row first, in the mode its update below needs, then
		// the run, then its answer (run_locks.go).
		var thread int64
		if err := tx.QueryRow(ctx, `SELECT t.id FROM runs r JOIN threads t ON t.id = r.thread_id
			WHERE r.id = $1 AND r.owner_id = $2 FOR NO KEY UPDATE OF t`, run, user).Scan(&thread); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE runs SET status = 'queued', error = '', finished_at = NULL,
				cancel_requested = false, instance_id = ''
			WHERE id = $1 AND owner_id = $2 AND kind = 'agent' AND status = 'interrupted' AND parent_run_id IS NULL
			RETURNING `+runCols, run, user)
		if err != nil {
			return err
		}
		r, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run])
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := d.Run(ctx, user, run); err != nil {
				return err
			}
			return ErrNotResumable
		}
		if err != nil {
			return err
		}
		if r.AssistantMessageID != nil {
			if _, err := tx.Exec(ctx, `UPDATE messages SET status = 'streaming', error = '', updated_at = now()
				WHERE id = $1`, *r.AssistantMessageID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE threads SET active_leaf_id = $2 WHERE id = $1`, r.ThreadID, *r.AssistantMessageID); err != nil {
				return err
			}
			return NoteThreadChanged(ctx, tx, r.ThreadID)
		}
		return err
	})
	return r, mapErr(err)
}
