package db

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// TreeMessages returns every message of one of the user's threads, parents
// before children (by id).
func (d *DB) TreeMessages(ctx context.Context, user, thread int64) ([]Message, error) {
	rows, err := d.q().Query(ctx, "SELECT "+liveCols("m.")+` FROM messages m
		JOIN threads t ON t.id = m.thread_id WHERE m.thread_id = $1 AND t.owner_id = $2 ORDER BY m.id`, thread, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Message])
}

// ImportedMessage is one node of a thread being imported; Parent is the
// index of its parent in the list (-1 for a root), always earlier.
type ImportedMessage struct {
	Parent    int
	Role      string
	Content   string
	Parts     json.RawMessage
	Metadata  json.RawMessage
	Status    string
	Error     string
	CreatedAt time.Time
}

// ImportedThread is a whole thread to import.
type ImportedThread struct {
	Title      string
	Model      string
	Notes      string
	ActiveLeaf int // index into Messages, -1: the last message
	Messages   []ImportedMessage
	// CreatedAt and UpdatedAt are the conversation's own times (zero: now);
	// UpdatedAt also places it in the sidebar.
	CreatedAt, UpdatedAt time.Time
}

// ImportThread creates a thread in one of the user's active workspaces from
// an imported tree, in one transaction.
func (d *DB) ImportThread(ctx context.Context, user, workspace int64, in ImportedThread) (Thread, error) {
	var t Thread
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		t, err = importThreadTx(ctx, tx, user, workspace, in)
		return err
	})
	return t, mapErr(err)
}

// importThreadTx stores an imported tree in tx (ImportThread, and each
// conversation of a foreign import).
func importThreadTx(ctx context.Context, tx pgx.Tx, user, workspace int64, in ImportedThread) (Thread, error) {
	var t Thread
	err := func() error {
		now := time.Now()
		created, updated := in.CreatedAt, in.UpdatedAt
		if created.IsZero() {
			created = now
		}
		if updated.IsZero() || updated.Before(created) {
			updated = created
		}
		rows, err := tx.Query(ctx, `INSERT INTO threads (workspace_id, owner_id, title, model, notes, title_state,
				created_at, updated_at, last_activity_at)
			SELECT id, owner_id, $3, $4, $5, 'user', $6, $7, $7 FROM workspaces WHERE id = $1 AND owner_id = $2 AND status = 'active'
			RETURNING `+threadCols, workspace, user, in.Title, in.Model, in.Notes, created, updated)
		if err != nil {
			return err
		}
		if t, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Thread]); err != nil {
			return err
		}
		ids := make([]int64, len(in.Messages))
		for i, m := range in.Messages {
			var parent *int64
			if m.Parent >= 0 {
				parent = &ids[m.Parent]
			}
			parts, meta := m.Parts, m.Metadata
			if len(parts) == 0 {
				parts = json.RawMessage("[]")
			}
			if len(meta) == 0 {
				meta = json.RawMessage("{}")
			}
			created := m.CreatedAt
			if created.IsZero() {
				created = time.Now()
			}
			if err := tx.QueryRow(ctx, `INSERT INTO messages (thread_id, parent_id, role, content, parts, metadata, status, error, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
				t.ID, parent, m.Role, m.Content, parts, meta, m.Status, m.Error, created).Scan(&ids[i]); err != nil {
				return err
			}
		}
		if len(ids) == 0 {
			return nil
		}
		// Without a named active message, the last one that is not a
		// compaction node (those hang beside the conversation).
		leaf := ids[len(ids)-1]
		for i := len(in.Messages) - 1; i >= 0; i-- {
			if in.Messages[i].Role != RoleSystem || in.Messages[i].Parent < 0 {
				leaf = ids[i]
				break
			}
		}
		if in.ActiveLeaf >= 0 && in.ActiveLeaf < len(ids) {
			leaf = ids[in.ActiveLeaf]
		}
		t.ActiveLeafID = &leaf
		_, err = tx.Exec(ctx, "UPDATE threads SET active_leaf_id = $2 WHERE id = $1", t.ID, leaf)
		return err
	}()
	return t, err
}
