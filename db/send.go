package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Send is one message from the composer.
type Send struct {
	ThreadID    int64 // 0: start a new thread in WorkspaceID
	WorkspaceID int64
	Title       string // provisional title of a new thread
	Model       string // "" keeps the thread's model
	Content     string
	// Kind forces the route that will answer (chat, rag or agent); "":
	// Route chooses it.
	Kind  string
	Route Router
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
	// SetWeb turns the thread's web search to Web before the route is
	// chosen.
	SetWeb bool
	Web    bool
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
		if s.SetWeb && s.Web != out.Thread.WebSearch {
			if _, err := tx.Exec(ctx, "UPDATE threads SET web_search = $2 WHERE id = $1", out.Thread.ID, s.Web); err != nil {
				return err
			}
			out.Thread.WebSearch = s.Web
		}
		t := out.Thread
		if out.User, err = insertMessage(ctx, tx, t.ID, t.ActiveLeafID, RoleUser, s.Content, MsgComplete, MessageMeta{}); err != nil {
			return err
		}
		if err := insertAttachments(ctx, tx, user, out.User.ID, s.Attachments, s.Media); err != nil {
			return err
		}
		route := s.Route
		if s.Kind != "" {
			route = Fixed(s.Kind)
		}
		out.Assistant, out.Run, err = insertAnswer(ctx, tx, t, out.User.ID, route, "")
		return err
	})
	return out, mapErr(err)
}

// insertAnswer adds a streaming assistant message under userMsg with its
// queued run and makes it the thread's active leaf, noting the thread's
// change (NoteThreadChanged); route chooses the run's route from the
// thread's state, read here, in the transaction that creates the answer.
// model "" means the thread's model.
func insertAnswer(ctx context.Context, tx pgx.Tx, t Thread, userMsg int64, route Router, model string) (Message, Run, error) {
	if model == "" {
		model = t.Model
	}
	if route == nil {
		return Message{}, Run{}, errors.New("db: no route chooser")
	}
	facts, err := routeFacts(ctx, tx, t, userMsg)
	if err != nil {
		return Message{}, Run{}, err
	}
	kind, note := route(facts)
	m, r, err := insertAnswerRow(ctx, tx, t, answerRow{Parent: userMsg, UserMsg: userMsg, Kind: kind, Note: note, Model: model})
	if err != nil {
		return Message{}, Run{}, err
	}
	// The thread's other tabs show the new branch end (a live thread).
	return m, r, NoteThreadChanged(ctx, tx, t.ID)
}

// answerRow is an answer to insert: where it hangs, the message it
// answers (the run's user_message_id), its route and model and, in a room,
// the agent that speaks and for whom.
type answerRow struct {
	Parent, UserMsg   int64
	Kind, Note, Model string
	Room              *roomAnswer // nil in a thread
}

// roomAnswer is who answers in a room (issue 20).
type roomAnswer struct {
	Agent   int64  // room_agents.id
	Speaker string // the agent's name now
	AskedBy *int64 // the member whose message started the chain (nil: their account is gone)
	Depth   int    // agent-to-agent mentions that led here
}

// insertAnswerRow adds the streaming answer a with its queued run and
// makes it the thread's active leaf.
func insertAnswerRow(ctx context.Context, tx pgx.Tx, t Thread, a answerRow) (Message, Run, error) {
	nm := newMessage{Thread: t.ID, Parent: &a.Parent, Role: RoleAssistant, Status: MsgStreaming,
		Meta: MessageMeta{Route: a.Kind, Model: a.Model, RouteNote: a.Note}}
	var agent, askedBy *int64
	depth := 0
	if a.Room != nil {
		agent, askedBy, depth = &a.Room.Agent, a.Room.AskedBy, a.Room.Depth
		nm.Agent, nm.Speaker = agent, a.Room.Speaker
	}
	m, err := insertNewMessage(ctx, tx, nm)
	if err != nil {
		return Message{}, Run{}, err
	}
	rows, err := tx.Query(ctx, `INSERT INTO runs (thread_id, owner_id, kind, user_message_id, assistant_message_id, model,
			room_agent_id, asked_by, mention_depth)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING `+runCols,
		t.ID, t.OwnerID, a.Kind, a.UserMsg, m.ID, a.Model, agent, askedBy, depth)
	if err != nil {
		return Message{}, Run{}, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run])
	if err != nil {
		return Message{}, Run{}, err
	}
	if a.Kind == RouteAgent {
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
// which becomes the active leaf; route chooses its route, and model "" uses
// the thread's model. The old answer stays in the tree.
func (d *DB) RetryAnswer(ctx context.Context, user, assistantMsg int64, route Router, model string) (Sent, error) {
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
		if role != RoleAssistant || parent == nil || status == MsgStreaming {
			return ErrNotRetryable
		}
		rows, err := tx.Query(ctx, "SELECT "+threadCols+" FROM threads WHERE id = $1 FOR UPDATE", threadID)
		if err != nil {
			return err
		}
		if out.Thread, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Thread]); err != nil {
			return err
		}
		out.Assistant, out.Run, err = insertAnswer(ctx, tx, out.Thread, *parent, route, model)
		return err
	})
	return out, mapErr(err)
}

// Routes that answer a message (runs.kind, metadata.route).
const (
	RouteChat  = "chat"
	RouteRAG   = "rag"
	RouteAgent = "agent"
)

// RouteNoteNoText explains a chat answer in a thread with knowledge bases:
// the message had no text to search for (files only).
const RouteNoteNoText = "no-text"

// RouteFacts are the thread's state a new answer's route is chosen from.
type RouteFacts struct {
	Agent   bool // the thread's agent mode is on
	HasKBs  bool // knowledge bases are attached to the thread
	HasText bool // the user message has text (not only files)
	Web     bool // the thread searches the web (issue 19)
}

// Router chooses the route of a new answer, and a note on the answer when
// the route is not the one the user may expect (chat.ChooseRoute decides;
// db stores).
type Router func(RouteFacts) (route, note string)

// Fixed is a Router that always chooses kind.
func Fixed(kind string) Router {
	return func(RouteFacts) (string, string) { return kind, "" }
}

// routeFacts reads the thread's state in the transaction that creates the
// answer, so that the route matches the state the answer is created in.
func routeFacts(ctx context.Context, tx pgx.Tx, t Thread, userMsg int64) (RouteFacts, error) {
	var f RouteFacts
	err := tx.QueryRow(ctx, `SELECT (SELECT agent_enabled FROM threads WHERE id = $1),
			EXISTS (SELECT 1 FROM thread_kbs WHERE thread_id = $1),
			COALESCE((SELECT btrim(content) <> '' FROM messages WHERE id = $2), false),
			(SELECT web_search FROM threads WHERE id = $1)`, t.ID, userMsg).Scan(&f.Agent, &f.HasKBs, &f.HasText, &f.Web)
	return f, err
}
