package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// A context clear (/clear) starts a new context segment: a node of the
// tree (role "system", kind KindClear, no content) hanging under the
// message that was the thread's active leaf. Model requests whose path runs
// through that message skip every turn up to and including it; the turns
// stay in the thread. Like a compaction node it belongs to one branch: a
// sibling branch does not pass through its message, so it is not cleared.
// Undo deletes the node.

// KindClear marks a context clear node (metadata.kind).
const KindClear = "clear"

// ErrAlreadyCleared is returned when the message already has a clear under
// it: the context is already empty after it.
var ErrAlreadyCleared = errors.New("db: the context is already cleared here")

// AddContextClear hangs a clear node under one of the user's messages (not
// a system node). The thread's visible branch does not change.
func (d *DB) AddContextClear(ctx context.Context, user, after int64) (Message, error) {
	rows, err := d.q().Query(ctx, `INSERT INTO messages (thread_id, parent_id, role, content, status, metadata)
		SELECT m.thread_id, m.id, 'system', '', 'complete', $3 FROM messages m
		JOIN threads t ON t.id = m.thread_id
		WHERE m.id = $1 AND t.owner_id = $2 AND m.role <> 'system'
		  AND NOT EXISTS (SELECT 1 FROM messages c WHERE c.parent_id = m.id AND c.role = 'system' AND c.metadata->>'kind' = 'clear')
		RETURNING `+messageCols, after, user, MessageMeta{Kind: KindClear})
	if err != nil {
		return Message{}, err
	}
	m, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Message])
	if errors.Is(err, pgx.ErrNoRows) {
		// Not the user's message, or one already cleared.
		var cleared bool
		err = d.q().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages c
			JOIN messages m ON m.id = c.parent_id JOIN threads t ON t.id = m.thread_id
			WHERE m.id = $1 AND t.owner_id = $2 AND c.role = 'system' AND c.metadata->>'kind' = 'clear')`, after, user).Scan(&cleared)
		if err == nil {
			err = ErrNotFound
			if cleared {
				err = ErrAlreadyCleared
			}
		}
		return Message{}, err
	}
	if err != nil {
		return Message{}, mapErr(err)
	}
	d.noteThreadAfter(ctx, m.ThreadID)
	return m, nil
}

// ContextClears returns the clear nodes hanging under any of the given
// messages of one of the user's threads, newest first.
func (d *DB) ContextClears(ctx context.Context, user, thread int64, under []int64) ([]Message, error) {
	if len(under) == 0 {
		return nil, nil
	}
	rows, err := d.q().Query(ctx, `SELECT `+liveCols("m.")+` FROM messages m
		JOIN threads t ON t.id = m.thread_id
		WHERE m.thread_id = $1 AND t.owner_id = $2 AND m.role = 'system' AND m.parent_id = ANY($3)
		  AND m.metadata->>'kind' = 'clear'
		ORDER BY m.id DESC`, thread, user, under)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Message])
}

// UndoContextClear deletes one of the user's clear nodes (the turns before
// it are sent again) and returns it.
func (d *DB) UndoContextClear(ctx context.Context, user, id int64) (Message, error) {
	rows, err := d.q().Query(ctx, `DELETE FROM messages m USING threads t
		WHERE m.id = $1 AND t.id = m.thread_id AND t.owner_id = $2 AND m.role = 'system' AND m.metadata->>'kind' = 'clear'
		RETURNING `+prefixed("m.", messageCols), id, user)
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
