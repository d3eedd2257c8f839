package db

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Message is a node of a thread's tree.
type Message struct {
	ID        int64           `db:"id"`
	ThreadID  int64           `db:"thread_id"`
	ParentID  *int64          `db:"parent_id"`
	Role      string          `db:"role"`
	Content   string          `db:"content"`
	Parts     json.RawMessage `db:"parts"`
	Metadata  json.RawMessage `db:"metadata"`
	Status    string          `db:"status"`
	Error     string          `db:"error"`
	CreatedAt time.Time       `db:"created_at"`
	UpdatedAt time.Time       `db:"updated_at"`
}

const messageCols = "id, thread_id, parent_id, role, content, parts, metadata, status, error, created_at, updated_at"

func insertMessage(ctx context.Context, q querier, thread int64, parent *int64, role, content, status string) (Message, error) {
	rows, err := q.Query(ctx, `INSERT INTO messages (thread_id, parent_id, role, content, status)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+messageCols, thread, parent, role, content, status)
	if err != nil {
		return Message{}, err
	}
	m, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Message])
	return m, mapErr(err)
}

// AppendUserMessage adds a user message under the thread's active leaf and
// makes it the new leaf. The thread row is locked so two sends cannot both
// attach to the same leaf.
func (d *DB) AppendUserMessage(ctx context.Context, user, thread int64, content string) (Message, error) {
	var m Message
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var leaf *int64
		err := tx.QueryRow(ctx, "SELECT active_leaf_id FROM threads WHERE id = $1 AND owner_id = $2 FOR UPDATE", thread, user).Scan(&leaf)
		if err != nil {
			return err
		}
		if m, err = insertMessage(ctx, tx, thread, leaf, "user", content, "complete"); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE threads SET active_leaf_id = $2, last_activity_at = now(), updated_at = now()
			WHERE id = $1`, thread, m.ID)
		return err
	})
	return m, mapErr(err)
}

// ActivePath returns the last limit messages of the path from the root to the
// thread's active leaf, oldest first. It walks up from the leaf, so the cost
// depends on limit, not on the size of the tree. more reports whether older
// messages exist above the first one returned.
func (d *DB) ActivePath(ctx context.Context, user, thread int64, limit int) (path []Message, more bool, err error) {
	rows, err := d.Pool.Query(ctx, `WITH RECURSIVE up AS (
			SELECT m.*, 0 AS depth FROM messages m
			JOIN threads t ON t.active_leaf_id = m.id
			WHERE t.id = $1 AND t.owner_id = $2
			UNION ALL
			SELECT m.*, up.depth + 1 FROM messages m JOIN up ON m.id = up.parent_id
		)
		SELECT `+messageCols+` FROM up ORDER BY depth LIMIT $3`, thread, user, limit+1)
	if err != nil {
		return nil, false, err
	}
	path, err = pgx.CollectRows(rows, pgx.RowToStructByName[Message])
	if err != nil {
		return nil, false, err
	}
	if len(path) > limit {
		path, more = path[:limit], true
	}
	slices.Reverse(path)
	return path, more, nil
}
