package db

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
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
	Metadata  MessageMeta     `db:"metadata"`
	Status    string          `db:"status"`
	Error     string          `db:"error"`
	CreatedAt time.Time       `db:"created_at"`
	UpdatedAt time.Time       `db:"updated_at"`
}

const messageCols = "id, thread_id, parent_id, role, content, parts, metadata, status, error, created_at, updated_at"

func insertMessage(ctx context.Context, q querier, thread int64, parent *int64, role, content, status string, metadata MessageMeta) (Message, error) {
	rows, err := q.Query(ctx, `INSERT INTO messages (thread_id, parent_id, role, content, status, metadata)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+messageCols, thread, parent, role, content, status, metadata)
	if err != nil {
		return Message{}, err
	}
	m, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Message])
	return m, mapErr(err)
}

// ActivePath returns the last limit messages of the path from the root to the
// thread's active leaf, oldest first. It walks up from the leaf, so the cost
// depends on limit, not on the size of the tree. more reports whether older
// messages exist above the first one returned.
func (d *DB) ActivePath(ctx context.Context, user, thread int64, limit int) (path []Message, more bool, err error) {
	return d.pathUp(ctx, `SELECT m.*, 0 AS depth FROM messages m
			JOIN threads t ON t.active_leaf_id = m.id
			WHERE t.id = $1 AND t.owner_id = $2`, thread, user, limit)
}

// PathTo returns the path from the root to message (inclusive), oldest
// first, at most limit messages (the newest ones).
func (d *DB) PathTo(ctx context.Context, user, message int64, limit int) (path []Message, more bool, err error) {
	return d.pathUp(ctx, `SELECT m.*, 0 AS depth FROM messages m
			JOIN threads t ON t.id = m.thread_id
			WHERE m.id = $1 AND t.owner_id = $2`, message, user, limit)
}

// TurnsTo is PathTo for a model request: the same messages with their
// metadata left empty. The assembler reads up to the whole thread for every
// answer and needs none of it, and decoding each message's metadata (a
// thinking model's reasoning included) doubled the cost of a long path.
func (d *DB) TurnsTo(ctx context.Context, user, message int64, limit int) ([]Message, error) {
	path, _, err := d.pathUpCols(ctx, turnCols, `SELECT m.*, 0 AS depth FROM messages m
			JOIN threads t ON t.id = m.thread_id
			WHERE m.id = $1 AND t.owner_id = $2`, message, user, limit)
	return path, err
}

// turnCols are messageCols with an empty metadata.
var turnCols = strings.Replace(messageCols, "metadata", "'{}'::jsonb AS metadata", 1)

// pathUp walks parent links up from the row the start query selects.
func (d *DB) pathUp(ctx context.Context, start string, id, user int64, limit int) (path []Message, more bool, err error) {
	return d.pathUpCols(ctx, messageCols, start, id, user, limit)
}

func (d *DB) pathUpCols(ctx context.Context, cols, start string, id, user int64, limit int) (path []Message, more bool, err error) {
	rows, err := d.q().Query(ctx, `WITH RECURSIVE up AS (
			`+start+`
			UNION ALL
			SELECT m.*, up.depth + 1 FROM messages m JOIN up ON m.id = up.parent_id
		)
		SELECT `+cols+` FROM up ORDER BY depth LIMIT $3`, id, user, limit+1)
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
