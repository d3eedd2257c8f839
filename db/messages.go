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
	// Who spoke in a room (issue 20): a member (AuthorID) or an agent
	// (RoomAgentID), and Speaker, the name as it was then (kept when the
	// member or the agent is gone). Empty in a thread.
	AuthorID    *int64 `db:"author_id"`
	RoomAgentID *int64 `db:"room_agent_id"`
	Speaker     string `db:"speaker"`
}

const messageCols = "id, thread_id, parent_id, role, content, parts, metadata, status, error, created_at, updated_at, author_id, room_agent_id, speaker"

// liveCols are messageCols for a SELECT from the table (or row set) named
// by prefix p ("m."): a streaming message's content is the row's followed
// by its progress (migration 016), and its thinking, when the progress
// carries some, is the progress's. Every read of a message goes through
// it, so a page, a follower on another instance, an export or a fork sees
// the text flushed so far.
func liveCols(p string) string { return liveColsWith(p, liveMetadata(p)) }

// liveTurnCols are liveCols with an empty metadata: the path of a model
// request needs none of it, and decoding each message's metadata (a
// thinking model's reasoning included) doubled the cost of a long path.
func liveTurnCols(p string) string { return liveColsWith(p, "'{}'::jsonb AS metadata") }

func liveColsWith(p, metadata string) string {
	var out []string
	for _, c := range splitCols(messageCols) {
		switch c {
		case "content":
			c = `CASE WHEN ` + p + `status = 'streaming' THEN ` + p + `content || COALESCE((SELECT string_agg(mp.content, '' ORDER BY mp.seq)
				FROM message_progress mp WHERE mp.message_id = ` + p + `id), '') ELSE ` + p + `content END AS content`
		case "metadata":
			c = metadata
		default:
			c = p + c
		}
		out = append(out, c)
	}
	return strings.Join(out, ", ")
}

func liveMetadata(p string) string {
	return `CASE WHEN ` + p + `status = 'streaming' THEN COALESCE((SELECT jsonb_set(` + p + `metadata, '{thinking}', to_jsonb(string_agg(mp.thinking, '' ORDER BY mp.seq)))
		FROM message_progress mp WHERE mp.message_id = ` + p + `id AND mp.thinking <> ''), ` + p + `metadata) ELSE ` + p + `metadata END AS metadata`
}

func insertMessage(ctx context.Context, q querier, thread int64, parent *int64, role, content, status string, metadata MessageMeta) (Message, error) {
	return insertNewMessage(ctx, q, newMessage{Thread: thread, Parent: parent, Role: role, Content: content, Status: status, Meta: metadata})
}

// newMessage is a message to insert; Author, Agent and Speaker say who
// spoke in a room.
type newMessage struct {
	Thread        int64
	Parent        *int64
	Role, Content string
	Status        string
	Meta          MessageMeta
	Author, Agent *int64
	Speaker       string
}

func insertNewMessage(ctx context.Context, q querier, n newMessage) (Message, error) {
	rows, err := q.Query(ctx, `INSERT INTO messages (thread_id, parent_id, role, content, status, metadata, author_id, room_agent_id, speaker)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING `+messageCols,
		n.Thread, n.Parent, n.Role, n.Content, n.Status, n.Meta, n.Author, n.Agent, n.Speaker)
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

// BranchFrom returns the user and assistant messages of the path from the
// root to one of user's threads' active leaf whose ids are from or more,
// oldest first, at most limit (the oldest ones): what was added to the
// branch after a message shown. A message is newer than its parent, so the
// walk up from the leaf stops at the first older one; when the first
// message returned is from itself, the branch runs through it (a live
// thread's page continues it, a room's line grew).
func (d *DB) BranchFrom(ctx context.Context, user, thread, from int64, limit int) ([]Message, error) {
	rows, err := d.q().Query(ctx, `WITH RECURSIVE up AS (
			SELECT m.*, 0 AS depth FROM messages m JOIN threads t ON t.active_leaf_id = m.id
			WHERE t.id = $1 AND t.owner_id = $2 AND m.id >= $3
			UNION ALL
			SELECT m.*, up.depth + 1 FROM messages m JOIN up ON m.id = up.parent_id WHERE m.id >= $3
		)
		SELECT `+liveCols("up.")+` FROM up WHERE up.role IN ('user', 'assistant') ORDER BY depth DESC LIMIT $4`,
		thread, user, from, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Message])
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
	path, _, err := d.pathUpCols(ctx, liveTurnCols("up."), `SELECT m.*, 0 AS depth FROM messages m
			JOIN threads t ON t.id = m.thread_id
			WHERE m.id = $1 AND t.owner_id = $2`, message, user, limit)
	return path, err
}

// pathUp walks parent links up from the row the start query selects.
func (d *DB) pathUp(ctx context.Context, start string, id, user int64, limit int) (path []Message, more bool, err error) {
	return d.pathUpCols(ctx, liveCols("up."), start, id, user, limit)
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
