package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// CommandEntry is a slash command typed into a thread and its reply. It is
// shown after AfterMessageID (the thread's active leaf when it ran) and is
// never part of what the model receives.
type CommandEntry struct {
	ID             int64     `db:"id"`
	ThreadID       int64     `db:"thread_id"`
	AfterMessageID *int64    `db:"after_message_id"`
	Command        string    `db:"command"`
	Reply          string    `db:"reply"`
	Failed         bool      `db:"failed"`
	CreatedAt      time.Time `db:"created_at"`
}

const commandCols = "id, thread_id, after_message_id, command, reply, failed, created_at"

// AddCommandEntry keeps a command typed into one of the user's threads,
// after one of its messages (the active leaf when the command was typed;
// nil: shown nowhere).
func (d *DB) AddCommandEntry(ctx context.Context, user, thread int64, after *int64, command, reply string, failed bool) (CommandEntry, error) {
	rows, err := d.q().Query(ctx, `INSERT INTO thread_commands (thread_id, after_message_id, command, reply, failed)
		SELECT t.id, m.id, $4, $5, $6 FROM threads t
		LEFT JOIN messages m ON m.id = $3 AND m.thread_id = t.id
		WHERE t.id = $1 AND t.owner_id = $2
		RETURNING `+commandCols, thread, user, after, command, reply, failed)
	if err != nil {
		return CommandEntry{}, err
	}
	e, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[CommandEntry])
	return e, mapErr(err)
}

// CommandEntries lists the command entries of one of the user's threads
// kept after the given messages, oldest first.
func (d *DB) CommandEntries(ctx context.Context, user, thread int64, after []int64) ([]CommandEntry, error) {
	rows, err := d.q().Query(ctx, "SELECT "+prefixed("c.", commandCols)+` FROM thread_commands c
		JOIN threads t ON t.id = c.thread_id
		WHERE c.thread_id = $1 AND t.owner_id = $2 AND c.after_message_id = ANY($3) ORDER BY c.id`, thread, user, after)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[CommandEntry])
}
