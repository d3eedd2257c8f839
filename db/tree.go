package db

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Branch is where a message stands among its siblings (the answers to the
// same message, or the versions of an edited message), oldest first.
type Branch struct {
	Pos, Count int   // 1-based position
	Prev, Next int64 // sibling ids, 0 at the ends
}

// Branches returns the sibling position of each of the given messages of a
// thread (one query for the whole page).
func (d *DB) Branches(ctx context.Context, user, thread int64, msgs []Message) (map[int64]Branch, error) {
	var parents []int64
	roots := false
	for _, m := range msgs {
		if m.ParentID == nil {
			roots = true
		} else {
			parents = append(parents, *m.ParentID)
		}
	}
	rows, err := d.q().Query(ctx, `SELECT m.id, m.parent_id FROM messages m JOIN threads t ON t.id = m.thread_id
		WHERE m.thread_id = $1 AND t.owner_id = $2 AND (m.parent_id = ANY($3) OR ($4 AND m.parent_id IS NULL))
		  AND m.role <> 'system'
		ORDER BY m.id`, thread, user, parents, roots)
	if err != nil {
		return nil, err
	}
	children := map[int64][]int64{} // parent (0: root) → children in order
	for rows.Next() {
		var id int64
		var parent *int64
		if err := rows.Scan(&id, &parent); err != nil {
			return nil, err
		}
		var p int64
		if parent != nil {
			p = *parent
		}
		children[p] = append(children[p], id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make(map[int64]Branch, len(msgs))
	for _, m := range msgs {
		var p int64
		if m.ParentID != nil {
			p = *m.ParentID
		}
		sib := children[p]
		i := slices.Index(sib, m.ID)
		if i < 0 {
			continue
		}
		b := Branch{Pos: i + 1, Count: len(sib)}
		if i > 0 {
			b.Prev = sib[i-1]
		}
		if i < len(sib)-1 {
			b.Next = sib[i+1]
		}
		out[m.ID] = b
	}
	return out, nil
}

// newestLeafSQL selects, for the message $1 owned by $2, the leaf reached by
// always following the newest child: the end of the branch that message
// starts.
const newestLeafSQL = newestLeafHead + newestLeafTail

// newestLeafExceptSQL is newestLeafSQL leaving out the branch that message
// $3 starts (one about to be deleted).
const newestLeafExceptSQL = newestLeafHead + " AND id <> $3" + newestLeafTail

const newestLeafHead = `WITH RECURSIVE down AS (
		SELECT m.id, m.thread_id, 0 AS depth FROM messages m JOIN threads t ON t.id = m.thread_id
		WHERE m.id = $1 AND t.owner_id = $2 AND NOT (m.role = 'system' AND m.metadata->>'kind' IN ('compaction', 'clear'))
		UNION ALL
		SELECT c.id, c.thread_id, down.depth + 1 FROM down
		JOIN LATERAL (SELECT id, thread_id FROM messages WHERE parent_id = down.id AND role <> 'system'`

const newestLeafTail = `
			ORDER BY id DESC LIMIT 1) c ON true
	)
	SELECT id, thread_id FROM down ORDER BY depth DESC LIMIT 1`

// NewestLeafUnder returns the leaf of the branch that message starts, and
// its thread.
func (d *DB) NewestLeafUnder(ctx context.Context, user, message int64) (leaf, thread int64, err error) {
	err = d.q().QueryRow(ctx, newestLeafSQL, message, user).Scan(&leaf, &thread)
	return leaf, thread, mapErr(err)
}

// SelectBranch shows the branch that message starts: the thread's active
// leaf becomes that branch's newest leaf. It returns the thread.
func (d *DB) SelectBranch(ctx context.Context, user, message int64) (int64, error) {
	var thread int64
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var leaf int64
		if err := tx.QueryRow(ctx, newestLeafSQL, message, user).Scan(&leaf, &thread); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE threads SET active_leaf_id = $2, updated_at = now() WHERE id = $1", thread, leaf); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, thread)
	})
	return thread, mapErr(err)
}

// ErrNotEditable is returned when a message cannot be edited (only user
// messages can).
var ErrNotEditable = errors.New("db: only your own messages can be edited")

// EditMessage stores a new version of a user message as its sibling, with
// a streaming answer and a queued run; the old version and its answers stay
// in the tree.
func (d *DB) EditMessage(ctx context.Context, user, message int64, content string, route Router) (Sent, error) {
	var out Sent
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		old, err := lockMessageThread(ctx, tx, user, message, &out.Thread)
		if err != nil {
			return err
		}
		if old.Role != RoleUser {
			return ErrNotEditable
		}
		if out.User, err = insertMessage(ctx, tx, out.Thread.ID, old.ParentID, RoleUser, content, MsgComplete, MessageMeta{}); err != nil {
			return err
		}
		if err := copyAttachments(ctx, tx, old.ID, out.User.ID); err != nil {
			return err
		}
		out.Assistant, out.Run, err = insertAnswer(ctx, tx, out.Thread, out.User.ID, route, "")
		return err
	})
	return out, mapErr(err)
}

// ErrNotContinuable is returned when an answer cannot be continued.
var ErrNotContinuable = errors.New("db: only a stopped or interrupted answer with nothing after it can be continued")

// ContinueAnswer queues a run that goes on writing a cancelled or
// interrupted answer, appending to its text.
func (d *DB) ContinueAnswer(ctx context.Context, user, message int64, kind string) (Sent, error) {
	var out Sent
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		m, err := lockMessageThread(ctx, tx, user, message, &out.Thread)
		if err != nil {
			return err
		}
		var hasChildren bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM messages WHERE parent_id = $1 AND role <> 'system')", m.ID).Scan(&hasChildren); err != nil {
			return err
		}
		if m.Role != RoleAssistant || m.ParentID == nil || hasChildren || (m.Status != MsgCancelled && m.Status != MsgInterrupted) {
			return ErrNotContinuable
		}
		rows, err := tx.Query(ctx, `UPDATE messages SET status = 'streaming', error = '', updated_at = now()
			WHERE id = $1 RETURNING `+messageCols, m.ID)
		if err != nil {
			return err
		}
		if out.Assistant, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Message]); err != nil {
			return err
		}
		model := m.Metadata.Model
		if model == "" {
			model = out.Thread.Model
		}
		if kind == "" {
			// The answer goes on by the route that began it.
			if kind = m.Metadata.Route; kind == "" {
				kind = RouteChat
			}
		}
		if kind == RouteAgent {
			// An agent answer goes on from its checkpoint (ResumeRun).
			return ErrNotContinuable
		}
		rows, err = tx.Query(ctx, `INSERT INTO runs (thread_id, owner_id, kind, user_message_id, assistant_message_id, model, continues)
			VALUES ($1, $2, $3, $4, $5, $6, true) RETURNING `+runCols, out.Thread.ID, user, kind, *m.ParentID, m.ID, model)
		if err != nil {
			return err
		}
		if out.Run, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run]); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE threads SET active_leaf_id = $2, last_activity_at = now() WHERE id = $1`, out.Thread.ID, m.ID); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, out.Thread.ID)
	})
	return out, mapErr(err)
}

// ForkThread copies the path from the root to message into a new thread in
// the same workspace; the copy's last message is its active leaf. Answers
// still being written are copied as they are now, marked interrupted.
func (d *DB) ForkThread(ctx context.Context, user, message int64) (Thread, error) {
	path, _, err := d.PathTo(ctx, user, message, 1_000_000)
	if err != nil {
		return Thread{}, err
	}
	if len(path) == 0 {
		return Thread{}, ErrNotFound
	}
	var t Thread
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `INSERT INTO threads (workspace_id, owner_id, title, model, role_id, notes, num_ctx, compaction, title_state)
			SELECT workspace_id, owner_id, left('Fork of ' || CASE WHEN title = '' THEN 'untitled' ELSE title END, 200),
				model, role_id, notes, num_ctx, compaction, 'user'
			FROM threads WHERE id = $1 AND owner_id = $2 RETURNING `+threadCols, path[0].ThreadID, user)
		if err != nil {
			return err
		}
		if t, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Thread]); err != nil {
			return err
		}
		var parent *int64
		for _, m := range path {
			status := m.Status
			if status == MsgStreaming {
				status = MsgInterrupted
			}
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO messages (thread_id, parent_id, role, content, parts, metadata, status, error, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
				t.ID, parent, m.Role, m.Content, m.Parts, m.Metadata.Raw, status, m.Error, m.CreatedAt).Scan(&id); err != nil {
				return err
			}
			// The copy keeps its files (the same stored content) and media.
			if err := copyAttachments(ctx, tx, m.ID, id); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO media (message_id, kind, sha256, mime, status, error, thumb_sha, prompt, engine, size)
				SELECT $2, kind, sha256, mime, status, error, thumb_sha, prompt, engine, size FROM media
				WHERE message_id = $1 AND status <> 'pending' ORDER BY id`, m.ID, id); err != nil {
				return err
			}
			parent = &id
		}
		t.ActiveLeafID = parent
		_, err = tx.Exec(ctx, "UPDATE threads SET active_leaf_id = $2 WHERE id = $1", t.ID, *parent)
		return err
	})
	return t, mapErr(err)
}

// DeletedSubtree is what deleting a message removed.
type DeletedSubtree struct {
	ThreadID   int64
	Messages   int
	ActiveRuns []int64  // runs that were writing inside it (now cancelled)
	Released   []string // content hashes of attachments and media released
}

// DeleteMessage removes a message and everything below it (answers,
// branches, their runs and steps, attachments and media) in one
// transaction. The ids of runs that were still active inside are returned
// so the runtime can stop them. When the visible branch
// ran through it, the thread shows the parent's newest remaining branch.
func (d *DB) DeleteMessage(ctx context.Context, user, message int64) (DeletedSubtree, error) {
	var out DeletedSubtree
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var t Thread
		m, err := lockMessageThread(ctx, tx, user, message, &t)
		if err != nil {
			return err
		}
		out.ThreadID = t.ID
		rows, err := tx.Query(ctx, `WITH RECURSIVE sub AS (
				SELECT id FROM messages WHERE id = $1
				UNION ALL SELECT c.id FROM messages c JOIN sub ON c.parent_id = sub.id)
			SELECT id FROM sub`, m.ID)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		out.Messages = len(ids)
		rows, err = tx.Query(ctx, `SELECT id FROM runs
			WHERE assistant_message_id = ANY($1) AND status IN ('queued', 'running', 'waiting')`, ids)
		if err != nil {
			return err
		}
		if out.ActiveRuns, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT x FROM attachments a, LATERAL (VALUES (a.sha256), (a.thumb_sha)) v(x)
			WHERE a.message_id = ANY($1) AND x <> ''
			UNION SELECT x FROM media md, LATERAL (VALUES (md.sha256), (md.thumb_sha)) v(x)
			WHERE md.message_id = ANY($1) AND x <> ''`, ids)
		if err != nil {
			return err
		}
		if out.Released, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if t.ActiveLeafID != nil && slices.Contains(ids, *t.ActiveLeafID) {
			// The thread shows the newest remaining branch under the
			// parent (or the newest remaining root), or nothing when it
			// will be empty. Written before the deletion, so that the
			// cascade (active_leaf_id set to null) does not write the
			// row first: a second write of a row this transaction wrote
			// checks all its foreign keys again, FOR KEY SHARE on the
			// owner's row and the workspace's, after the runs are locked
			// (run_locks.go).
			var next *int64
			if m.ParentID != nil {
				next = m.ParentID
			} else if err := tx.QueryRow(ctx, "SELECT max(id) FROM messages WHERE thread_id = $1 AND parent_id IS NULL AND id <> $2",
				t.ID, m.ID).Scan(&next); err != nil {
				return err
			}
			var leaf *int64
			if next != nil {
				var l, th int64
				if err := tx.QueryRow(ctx, newestLeafExceptSQL, *next, user, m.ID).Scan(&l, &th); err != nil {
					return err
				}
				leaf = &l
			}
			if _, err := tx.Exec(ctx, "UPDATE threads SET active_leaf_id = $2, updated_at = now() WHERE id = $1", t.ID, leaf); err != nil {
				return err
			}
		}
		// The runs that asked or answered inside the subtree go too (their
		// steps cascade), then the messages (attachments and media
		// cascade): runs before messages, as everywhere (run_locks.go).
		if _, err := tx.Exec(ctx, `DELETE FROM runs WHERE assistant_message_id = ANY($1) OR user_message_id = ANY($1)`, ids); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM messages WHERE id = $1", m.ID); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, t.ID)
	})
	if err == nil {
		// The instances running them stop them now, their followers end.
		d.sendNotes(ctx, appendNotes(appendNotes(nil, NoteStop, out.ActiveRuns), NoteEnd, out.ActiveRuns))
	}
	return out, mapErr(err)
}

// MoveThread moves one of the user's threads into another of their active
// workspaces.
func (d *DB) MoveThread(ctx context.Context, user, thread, workspace int64) error {
	return execOne(ctx, d.q(), `UPDATE threads SET workspace_id = $3, updated_at = now()
		WHERE id = $1 AND owner_id = $2 AND NOT is_room
		AND EXISTS (SELECT 1 FROM workspaces WHERE id = $3 AND owner_id = $2 AND status = 'active')`, thread, user, workspace)
}

// ArchivedThreads lists a workspace's archived threads, newest activity first.
func (d *DB) ArchivedThreads(ctx context.Context, user, workspace int64, limit int) ([]ThreadSummary, error) {
	rows, err := d.q().Query(ctx, `SELECT id, title, pinned, last_activity_at FROM threads
		WHERE workspace_id = $1 AND owner_id = $2 AND archived AND NOT is_room
		ORDER BY last_activity_at DESC, id DESC LIMIT $3`, workspace, user, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[ThreadSummary])
}
