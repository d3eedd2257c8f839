package db

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"weft/internal/usererr"
)

// Labels (issue 17): a short name a user gives one message of a thread, on
// any branch. A label is a node of the tree hanging under its message; it
// lives in message_labels, not among the messages, so context assembly
// never sends it to the model.

// MaxLabelRunes caps a label's name (the table checks it too).
const MaxLabelRunes = 80

// MaxLabelsPerThread caps the labels of one thread.
const MaxLabelsPerThread = 500

// Errors of a label's name, with the message the user sees.
var (
	ErrLabelEmpty   = usererr.New("a label needs a name")
	ErrLabelTooLong = usererr.New(fmt.Sprintf("a label is at most %d characters", MaxLabelRunes))
	ErrLabelsFull   = usererr.New(fmt.Sprintf("a thread keeps at most %d labels; remove some first", MaxLabelsPerThread))
)

// Label is one label of a thread, with what the thread's list of labels
// shows of its message.
type Label struct {
	ID        int64     `db:"id"`
	ThreadID  int64     `db:"thread_id"`
	MessageID int64     `db:"message_id"`
	Name      string    `db:"name"`
	Role      string    `db:"role"`    // the message's role
	Snippet   string    `db:"snippet"` // the start of the message's text
	CreatedAt time.Time `db:"created_at"`
	UpdatedAt time.Time `db:"updated_at"`
}

const labelCols = `l.id, l.thread_id, l.message_id, l.name, m.role, left(m.content, 80) AS snippet, l.created_at, l.updated_at`

// labelFrom joins a label to its message and thread; every query filters on
// t.owner_id.
const labelFrom = ` FROM message_labels l JOIN messages m ON m.id = l.message_id JOIN threads t ON t.id = l.thread_id`

// NormalizeLabel trims a label's name and collapses its whitespace; it
// fails on an empty name or one over MaxLabelRunes.
func NormalizeLabel(name string) (string, error) {
	name = strings.Join(strings.Fields(name), " ")
	if name == "" {
		return "", ErrLabelEmpty
	}
	if utf8.RuneCountInString(name) > MaxLabelRunes {
		return "", ErrLabelTooLong
	}
	return name, nil
}

// AddLabel gives one of the user's messages a label.
func (d *DB) AddLabel(ctx context.Context, user, message int64, name string) (Label, error) {
	name, err := NormalizeLabel(name)
	if err != nil {
		return Label{}, err
	}
	var l Label
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		var thread int64
		var n int
		// The thread row is locked so that two adds cannot both pass the cap.
		if err := tx.QueryRow(ctx, `SELECT t.id FROM messages m JOIN threads t ON t.id = m.thread_id
			WHERE m.id = $1 AND t.owner_id = $2 AND m.role IN ('user', 'assistant') FOR UPDATE OF t`, message, user).Scan(&thread); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM message_labels WHERE thread_id = $1", thread).Scan(&n); err != nil {
			return err
		}
		if n >= MaxLabelsPerThread {
			return ErrLabelsFull
		}
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO message_labels (thread_id, message_id, name) VALUES ($1, $2, $3) RETURNING id`,
			thread, message, name).Scan(&id); err != nil {
			return err
		}
		l, err = oneRow[Label](ctx, tx, "SELECT "+labelCols+labelFrom+" WHERE l.id = $1", id)
		return err
	})
	return l, mapErr(err)
}

// Label reads one of the user's labels.
func (d *DB) Label(ctx context.Context, user, id int64) (Label, error) {
	return oneRow[Label](ctx, d.q(), "SELECT "+labelCols+labelFrom+" WHERE l.id = $1 AND t.owner_id = $2", id, user)
}

// RenameLabel gives one of the user's labels another name.
func (d *DB) RenameLabel(ctx context.Context, user, id int64, name string) (Label, error) {
	name, err := NormalizeLabel(name)
	if err != nil {
		return Label{}, err
	}
	if err := execOne(ctx, d.q(), `UPDATE message_labels l SET name = $3, updated_at = now() FROM threads t
		WHERE l.id = $1 AND t.id = l.thread_id AND t.owner_id = $2`, id, user, name); err != nil {
		return Label{}, err
	}
	return d.Label(ctx, user, id)
}

// DeleteLabel removes one of the user's labels and returns what it was.
func (d *DB) DeleteLabel(ctx context.Context, user, id int64) (Label, error) {
	l, err := d.Label(ctx, user, id)
	if err != nil {
		return Label{}, err
	}
	err = execOne(ctx, d.q(), `DELETE FROM message_labels l USING threads t
		WHERE l.id = $1 AND t.id = l.thread_id AND t.owner_id = $2`, id, user)
	return l, err
}

// ThreadLabels lists every label of one of the user's threads, on every
// branch, in the order of the messages (then of the labels).
func (d *DB) ThreadLabels(ctx context.Context, user, thread int64) ([]Label, error) {
	rows, err := d.q().Query(ctx, "SELECT "+labelCols+labelFrom+
		" WHERE l.thread_id = $1 AND t.owner_id = $2 ORDER BY l.message_id, l.id", thread, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Label])
}

// MessageLabels returns the labels of the given messages of one of the
// user's threads, by message.
func (d *DB) MessageLabels(ctx context.Context, user, thread int64, msgs []int64) (map[int64][]Label, error) {
	rows, err := d.q().Query(ctx, "SELECT "+labelCols+labelFrom+
		" WHERE l.thread_id = $1 AND t.owner_id = $2 AND l.message_id = ANY($3) ORDER BY l.id", thread, user, msgs)
	if err != nil {
		return nil, err
	}
	ls, err := pgx.CollectRows(rows, pgx.RowToStructByName[Label])
	if err != nil {
		return nil, err
	}
	out := map[int64][]Label{}
	for _, l := range ls {
		out[l.MessageID] = append(out[l.MessageID], l)
	}
	return out, nil
}

// JumpToLabel makes the thread show the branch through the label's
// message: when the saved branch already runs through it nothing changes,
// otherwise the active leaf becomes the newest leaf below it. It returns
// the label.
func (d *DB) JumpToLabel(ctx context.Context, user, id int64) (Label, error) {
	var l Label
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if l, err = oneRow[Label](ctx, tx, "SELECT "+labelCols+labelFrom+" WHERE l.id = $1 AND t.owner_id = $2 FOR UPDATE OF t", id, user); err != nil {
			return err
		}
		var onPath bool
		if err := tx.QueryRow(ctx, `WITH RECURSIVE up AS (
				SELECT m.id, m.parent_id FROM threads t JOIN messages m ON m.id = t.active_leaf_id WHERE t.id = $1
				UNION ALL SELECT p.id, p.parent_id FROM messages p JOIN up ON p.id = up.parent_id)
			SELECT EXISTS (SELECT 1 FROM up WHERE id = $2)`, l.ThreadID, l.MessageID).Scan(&onPath); err != nil {
			return err
		}
		if onPath {
			return nil
		}
		var leaf, thread int64
		if err := tx.QueryRow(ctx, newestLeafSQL, l.MessageID, user).Scan(&leaf, &thread); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE threads SET active_leaf_id = $2, updated_at = now() WHERE id = $1", thread, leaf); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, thread)
	})
	return l, mapErr(err)
}
