package db

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Run statuses.
const (
	RunQueued      = "queued"
	RunRunning     = "running"
	RunWaiting     = "waiting"
	RunCompleted   = "completed"
	RunFailed      = "failed"
	RunCancelled   = "cancelled"
	RunInterrupted = "interrupted"
)

// Message statuses.
const (
	MsgStreaming   = "streaming"
	MsgComplete    = "complete"
	MsgError       = "error"
	MsgCancelled   = "cancelled"
	MsgInterrupted = "interrupted"
)

// Run is one execution of a route for one user message.
type Run struct {
	ID                 int64           `db:"id"`
	ThreadID           int64           `db:"thread_id"`
	OwnerID            int64           `db:"owner_id"`
	Kind               string          `db:"kind"`
	Status             string          `db:"status"`
	InstanceID         string          `db:"instance_id"`
	UserMessageID      *int64          `db:"user_message_id"`
	AssistantMessageID *int64          `db:"assistant_message_id"`
	Model              string          `db:"model"`
	Usage              json.RawMessage `db:"usage"`
	Error              string          `db:"error"`
	CancelRequested    bool            `db:"cancel_requested"`
	Continues          bool            `db:"continues"` // goes on writing an existing answer
	CreatedAt          time.Time       `db:"created_at"`
	StartedAt          *time.Time      `db:"started_at"`
	FinishedAt         *time.Time      `db:"finished_at"`
}

// Active reports whether the run is queued, running or waiting.
func (r Run) Active() bool {
	return r.Status == RunQueued || r.Status == RunRunning || r.Status == RunWaiting
}

const runCols = `id, thread_id, owner_id, kind, status, instance_id, user_message_id, assistant_message_id,
	model, usage, error, cancel_requested, continues, created_at, started_at, finished_at`

// Send is one message from the composer.
type Send struct {
	ThreadID    int64 // 0: start a new thread in WorkspaceID
	WorkspaceID int64
	Title       string // provisional title of a new thread
	Model       string // "" keeps the thread's model
	Content     string
	Kind        string // route that will answer: chat, rag or agent
	// SetRole applies RoleID (nil: no role) to the thread; the role must be
	// the user's own.
	SetRole bool
	RoleID  *int64
	// SettingsFrom, for a new thread, copies the model (unless Model is
	// set), role, notes and context settings of one of the user's threads.
	SettingsFrom int64
	// SetKBs attaches exactly KBs (knowledge bases of the thread's
	// workspace) before the route is chosen.
	SetKBs bool
	KBs    []int64
	// SetAgent turns the thread's agent mode to Agent before the route is
	// chosen.
	SetAgent bool
	Agent    bool
	// Attachments are stored files sent with the message; Media are the
	// user's generated media attached to it.
	Attachments []NewAttachment
	Media       []int64
}

// Sent is what a send created.
type Sent struct {
	Thread    Thread
	User      Message
	Assistant Message
	Run       Run
	Created   bool
}

// SendMessage stores a user message under the thread's active leaf (or as
// the first message of a new thread), the assistant message that will hold
// the answer (status streaming) and a queued run, in one transaction, and
// makes the assistant message the active leaf. The thread row is locked so
// two sends cannot attach to the same leaf.
func (d *DB) SendMessage(ctx context.Context, user int64, s Send) (Sent, error) {
	var out Sent
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if s.ThreadID == 0 {
			rows, err := tx.Query(ctx, `INSERT INTO threads (workspace_id, owner_id, title, model, role_id, notes, num_ctx, compaction)
				SELECT w.id, w.owner_id, $3, COALESCE(NULLIF($4, ''), f.model, ''), f.role_id,
					COALESCE(f.notes, ''), COALESCE(f.num_ctx, 0), COALESCE(f.compaction, true)
				FROM workspaces w LEFT JOIN threads f ON f.id = $5 AND f.owner_id = $2
				WHERE w.id = $1 AND w.owner_id = $2 AND w.status = 'active'
				RETURNING `+threadCols, s.WorkspaceID, user, s.Title, s.Model, s.SettingsFrom)
			if err != nil {
				return err
			}
			if out.Thread, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Thread]); err != nil {
				return err
			}
			out.Created = true
			if s.SetRole {
				if err := setThreadRole(ctx, tx, user, out.Thread.ID, s.RoleID); err != nil {
					return err
				}
				out.Thread.RoleID = s.RoleID
			}
		} else {
			rows, err := tx.Query(ctx, `UPDATE threads SET model = CASE WHEN $3 = '' THEN model ELSE $3 END
				WHERE id = $1 AND owner_id = $2 RETURNING `+threadCols, s.ThreadID, user, s.Model)
			if err != nil {
				return err
			}
			if out.Thread, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Thread]); err != nil {
				return err
			}
			if s.SetRole {
				if err := setThreadRole(ctx, tx, user, out.Thread.ID, s.RoleID); err != nil {
					return err
				}
				out.Thread.RoleID = s.RoleID
			}
		}
		if s.SetKBs {
			if err := setThreadKBs(ctx, tx, user, out.Thread.ID, s.KBs); err != nil {
				return err
			}
		}
		if s.SetAgent && s.Agent != out.Thread.AgentEnabled {
			if _, err := tx.Exec(ctx, "UPDATE threads SET agent_enabled = $2 WHERE id = $1", out.Thread.ID, s.Agent); err != nil {
				return err
			}
			out.Thread.AgentEnabled = s.Agent
		}
		t := out.Thread
		if out.User, err = insertMessage(ctx, tx, t.ID, t.ActiveLeafID, "user", s.Content, MsgComplete, nil); err != nil {
			return err
		}
		if err := insertAttachments(ctx, tx, user, out.User.ID, s.Attachments, s.Media); err != nil {
			return err
		}
		out.Assistant, out.Run, err = insertAnswer(ctx, tx, t, out.User.ID, s.Kind, "")
		return err
	})
	return out, mapErr(err)
}

// insertAnswer adds a streaming assistant message under userMsg with its
// queued run and makes it the thread's active leaf. model "" means the
// thread's model.
func insertAnswer(ctx context.Context, tx pgx.Tx, t Thread, userMsg int64, kind, model string) (Message, Run, error) {
	if model == "" {
		model = t.Model
	}
	meta := map[string]any{}
	if kind == "" {
		var err error
		var note string
		if kind, note, err = routeOf(ctx, tx, t, userMsg); err != nil {
			return Message{}, Run{}, err
		}
		if note != "" {
			meta["route_note"] = note
		}
	}
	meta["route"], meta["model"] = kind, model
	m, err := insertMessage(ctx, tx, t.ID, &userMsg, "assistant", "", MsgStreaming, meta)
	if err != nil {
		return Message{}, Run{}, err
	}
	rows, err := tx.Query(ctx, `INSERT INTO runs (thread_id, owner_id, kind, user_message_id, assistant_message_id, model)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+runCols, t.ID, t.OwnerID, kind, userMsg, m.ID, model)
	if err != nil {
		return Message{}, Run{}, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run])
	if err != nil {
		return Message{}, Run{}, err
	}
	if kind == RouteAgent {
		// The agent run's first step is committed with the send.
		if _, err := insertStep(ctx, tx, r.ID, StepStart, StepOK, StepData{}); err != nil {
			return Message{}, Run{}, err
		}
	}
	_, err = tx.Exec(ctx, `UPDATE threads SET active_leaf_id = $2, last_activity_at = now(), updated_at = now()
		WHERE id = $1`, t.ID, m.ID)
	return m, r, err
}

// ErrNotRetryable is returned when a message cannot be answered again (it
// is not an assistant message, or it is still being written).
var ErrNotRetryable = errors.New("db: message cannot be retried")

// RetryAnswer answers the user message above an assistant message again
// (retry, regenerate): a new sibling assistant message with a queued run,
// which becomes the active leaf; model "" uses the thread's model. The old
// answer stays in the tree.
func (d *DB) RetryAnswer(ctx context.Context, user, assistantMsg int64, kind, model string) (Sent, error) {
	var out Sent
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var parent *int64
		var role, status string
		var threadID int64
		err := tx.QueryRow(ctx, `SELECT m.thread_id, m.parent_id, m.role, m.status FROM messages m
			JOIN threads t ON t.id = m.thread_id WHERE m.id = $1 AND t.owner_id = $2`, assistantMsg, user).
			Scan(&threadID, &parent, &role, &status)
		if err != nil {
			return err
		}
		if role != "assistant" || parent == nil || status == MsgStreaming {
			return ErrNotRetryable
		}
		rows, err := tx.Query(ctx, "SELECT "+threadCols+" FROM threads WHERE id = $1 FOR UPDATE", threadID)
		if err != nil {
			return err
		}
		if out.Thread, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Thread]); err != nil {
			return err
		}
		out.Assistant, out.Run, err = insertAnswer(ctx, tx, out.Thread, *parent, kind, model)
		return err
	})
	return out, mapErr(err)
}

// Run returns one of the user's runs.
func (d *DB) Run(ctx context.Context, user, id int64) (Run, error) {
	rows, err := d.q().Query(ctx, "SELECT "+runCols+" FROM runs WHERE id = $1 AND owner_id = $2", id, user)
	if err != nil {
		return Run{}, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run])
	return r, mapErr(err)
}

// ActiveRuns lists the thread's queued, running and waiting runs, oldest
// first.
func (d *DB) ActiveRuns(ctx context.Context, user, thread int64) ([]Run, error) {
	rows, err := d.q().Query(ctx, "SELECT "+runCols+` FROM runs
		WHERE thread_id = $1 AND owner_id = $2 AND status IN ('queued', 'running', 'waiting') ORDER BY id`, thread, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Run])
}

// ClaimNextRun starts the oldest queued run of a thread on this instance,
// unless the thread already has a running one or the owner already has
// userCap active runs (running, or waiting for the user's approval: a run
// waiting holds its slot, or one user could park any number of them). ok is false when nothing was started. The thread and
// the user rows are locked so that concurrent claims, from any instance,
// respect both limits.
func (d *DB) ClaimNextRun(ctx context.Context, thread int64, instance string, userCap int) (r Run, ok bool, err error) {
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		var owner int64
		if err := tx.QueryRow(ctx, "SELECT owner_id FROM threads WHERE id = $1", thread).Scan(&owner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR UPDATE", owner); err != nil {
			return err
		}
		var busy bool
		var running int
		if err := tx.QueryRow(ctx, `SELECT
				EXISTS (SELECT 1 FROM runs WHERE thread_id = $1 AND status IN ('running', 'waiting')),
				(SELECT count(*) FROM runs WHERE owner_id = $2 AND status IN ('running', 'waiting'))`, thread, owner).Scan(&busy, &running); err != nil {
			return err
		}
		if busy || running >= userCap {
			return nil
		}
		rows, err := tx.Query(ctx, `UPDATE runs SET status = 'running', instance_id = $2, started_at = now()
			WHERE id = (SELECT id FROM runs WHERE thread_id = $1 AND status = 'queued' ORDER BY id LIMIT 1)
			RETURNING `+runCols, thread, instance)
		if err != nil {
			return err
		}
		r, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run])
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	return r, ok, mapErr(err)
}

// ThreadsWithQueuedRuns lists threads that have queued runs, oldest queued
// first; owner limits it to one user's threads (0: everyone's).
func (d *DB) ThreadsWithQueuedRuns(ctx context.Context, owner int64) ([]int64, error) {
	rows, err := d.q().Query(ctx, `SELECT thread_id FROM runs WHERE status = 'queued' AND ($1 = 0 OR owner_id = $1)
		GROUP BY thread_id ORDER BY min(id)`, owner)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// FlushAnswer saves the text written so far and reports whether someone
// asked (possibly on another instance) to stop the run.
func (d *DB) FlushAnswer(ctx context.Context, run, msg int64, content, thinking string) (cancelRequested bool, err error) {
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		// A progress flush need not wait for the disk: the run's final
		// write (FinishRun) is synchronous, and a flush lost in a crash
		// costs at most a second of partial text.
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE messages SET content = $2,
				metadata = CASE WHEN $3 = '' THEN metadata ELSE jsonb_set(metadata, '{thinking}', to_jsonb($3::text)) END,
				updated_at = now() WHERE id = $1`, msg, content, thinking); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, "SELECT cancel_requested FROM runs WHERE id = $1", run).Scan(&cancelRequested)
		if errors.Is(err, pgx.ErrNoRows) {
			// The run was deleted with its thread or message (perhaps by
			// another instance): that is a stop too.
			cancelRequested = true
			return nil
		}
		return err
	})
	return cancelRequested, err
}

// CancelThreadRuns stops every run of one of the user's threads, as Stop
// does, before the thread is deleted: queued runs are cancelled (so none
// starts), running and waiting ones get cancel_requested (the instance
// running one stops it at its next flush). It returns the ids of the runs
// that were running or waiting, for the runtime to stop the ones it holds.
func (d *DB) CancelThreadRuns(ctx context.Context, user, thread int64) ([]int64, error) {
	rows, err := d.q().Query(ctx, `UPDATE runs SET
			status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,
			finished_at = CASE WHEN status = 'queued' THEN now() ELSE finished_at END,
			cancel_requested = status IN ('running', 'waiting') OR cancel_requested
		WHERE thread_id = $1 AND owner_id = $2 AND status IN ('queued', 'running', 'waiting')
		RETURNING id, status`, thread, user)
	if err != nil {
		return nil, err
	}
	type cancelled struct {
		ID     int64
		Status string
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[cancelled])
	if err != nil {
		return nil, err
	}
	var active []int64
	for _, c := range all {
		if c.Status != RunCancelled {
			active = append(active, c.ID)
		}
	}
	return active, nil
}

// Finish is how a run ended.
type Finish struct {
	RunStatus string
	MsgStatus string
	Content   string
	Thinking  string
	Error     string
	Usage     map[string]any // also stored on the message's metadata
	Sources   []Source       // rag: the sources, marked as cited or not (nil: unchanged)
	Meta      map[string]any // more metadata keys for the answer (nil: none)
}

// FinishRun records the end of a run and its answer in one transaction and
// returns the final message.
func (d *DB) FinishRun(ctx context.Context, run, msg int64, f Finish) (Message, error) {
	var m Message
	usage := f.Usage
	if usage == nil {
		usage = map[string]any{}
	}
	extra := map[string]any{}
	for k, v := range f.Meta {
		extra[k] = v
	}
	if f.Sources != nil {
		extra["sources"] = f.Sources
	}
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE messages SET content = $2, status = $3, error = $4,
				metadata = metadata || jsonb_build_object('usage', $5::jsonb)
					|| CASE WHEN $6 = '' THEN '{}'::jsonb ELSE jsonb_build_object('thinking', $6::text) END
					|| $7::jsonb,
				updated_at = now()
			WHERE id = $1 RETURNING `+messageCols, msg, f.Content, f.MsgStatus, f.Error, usage, f.Thinking, extra)
		if err != nil {
			return err
		}
		if m, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Message]); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE runs SET status = $2, error = $3, usage = $4, finished_at = now() WHERE id = $1`,
			run, f.RunStatus, f.Error, usage)
		return err
	})
	return m, mapErr(err)
}

// CancelRun stops one of the user's runs. A queued run is cancelled at once
// (with its empty answer); a running one is flagged, and the instance that
// runs it stops it at its next flush (or at once, when it is local).
func (d *DB) CancelRun(ctx context.Context, user, id int64) (Run, error) {
	var r Run
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE runs SET
				status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,
				finished_at = CASE WHEN status = 'queued' THEN now() ELSE finished_at END,
				cancel_requested = status IN ('running', 'waiting') OR cancel_requested
			WHERE id = $1 AND owner_id = $2 RETURNING `+runCols, id, user)
		if err != nil {
			return err
		}
		if r, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run]); err != nil {
			return err
		}
		if r.Status == RunCancelled && r.AssistantMessageID != nil {
			_, err = tx.Exec(ctx, `UPDATE messages SET status = 'cancelled', updated_at = now()
				WHERE id = $1 AND status = 'streaming'`, *r.AssistantMessageID)
		}
		return err
	})
	return r, mapErr(err)
}

// Message returns one of the user's messages.
func (d *DB) Message(ctx context.Context, user, id int64) (Message, error) {
	rows, err := d.q().Query(ctx, "SELECT "+prefixed("m.", messageCols)+` FROM messages m
		JOIN threads t ON t.id = m.thread_id WHERE m.id = $1 AND t.owner_id = $2`, id, user)
	if err != nil {
		return Message{}, err
	}
	m, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Message])
	return m, mapErr(err)
}

// Heartbeat records that an instance is alive.
func (d *DB) Heartbeat(ctx context.Context, instance string) error {
	_, err := d.q().Exec(ctx, `INSERT INTO instances (id) VALUES ($1)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`, instance)
	return err
}

// InterruptOrphanedRuns marks as interrupted every running or waiting run
// whose instance is restarting (self, at start-up: nothing of its old life
// survives) or has not sent a heartbeat for staleAfter. Their answers keep
// the text last flushed. It returns the runs it interrupted.
func (d *DB) InterruptOrphanedRuns(ctx context.Context, self string, staleAfter time.Duration) ([]Run, error) {
	var out []Run
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE runs SET status = 'interrupted', finished_at = now(),
				error = 'The server stopped while this answer was being written.'
			WHERE status = 'running' AND (instance_id = $1 OR NOT EXISTS (
				SELECT 1 FROM instances i WHERE i.id = runs.instance_id AND i.heartbeat_at > now() - make_interval(secs => $2)))
			RETURNING `+runCols, self, staleAfter.Seconds())
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, pgx.RowToStructByName[Run]); err != nil {
			return err
		}
		for _, r := range out {
			if r.AssistantMessageID == nil {
				continue
			}
			if _, err := tx.Exec(ctx, `UPDATE messages SET status = 'interrupted', error = $2, updated_at = now()
				WHERE id = $1 AND status = 'streaming'`, *r.AssistantMessageID, r.Error); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

func prefixed(p, cols string) string {
	out := ""
	for i, c := range splitCols(cols) {
		if i > 0 {
			out += ", "
		}
		out += p + c
	}
	return out
}

// Routes that answer a message.
const (
	RouteChat  = "chat"
	RouteRAG   = "rag"
	RouteAgent = "agent"
)

// RouteNoteNoText explains a chat answer in a thread with knowledge bases:
// the message had no text to search for (files only).
const RouteNoteNoText = "no-text"

// routeOf chooses the route of a new answer from the thread's state, in the
// transaction that creates it: agent mode on → agent; knowledge bases
// attached and the user message has text → rag; otherwise chat (with a
// note when knowledge bases were attached but there was no text to search
// for).
func routeOf(ctx context.Context, tx pgx.Tx, t Thread, userMsg int64) (route, note string, err error) {
	var agent, hasKB, hasText bool
	if err := tx.QueryRow(ctx, `SELECT (SELECT agent_enabled FROM threads WHERE id = $1),
			EXISTS (SELECT 1 FROM thread_kbs WHERE thread_id = $1),
			COALESCE((SELECT btrim(content) <> '' FROM messages WHERE id = $2), false)`, t.ID, userMsg).Scan(&agent, &hasKB, &hasText); err != nil {
		return "", "", err
	}
	switch {
	case agent:
		return RouteAgent, "", nil
	case hasKB && hasText:
		return RouteRAG, "", nil
	case hasKB:
		return RouteChat, RouteNoteNoText, nil
	}
	return RouteChat, "", nil
}
