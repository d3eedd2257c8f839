package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Thread is a conversation tree in a workspace.
type Thread struct {
	ID             int64  `db:"id"`
	WorkspaceID    int64  `db:"workspace_id"`
	OwnerID        int64  `db:"owner_id"`
	Title          string `db:"title"`
	Model          string `db:"model"`
	RoleID         *int64 `db:"role_id"`
	AgentEnabled   bool   `db:"agent_enabled"`
	WebSearch      bool   `db:"web_search"` // the composer's "Search the web" (issue 19)
	TTSEnabled     bool   `db:"tts_enabled"`
	ImageEnabled   bool   `db:"image_enabled"`
	ContextSummary string `db:"context_summary"`
	Notes          string `db:"notes"`
	Pinned         bool   `db:"pinned"`
	Archived       bool   `db:"archived"`
	ActiveLeafID   *int64 `db:"active_leaf_id"`
	TitleState     string `db:"title_state"`
	NumCtx         int    `db:"num_ctx"`    // the thread's own context window cap (0: none)
	Compaction     bool   `db:"compaction"` // summarize older turns when the context fills
	// IsRoom marks the thread backing a room (issue 20): it is never listed
	// or opened as a thread, only reached through its room.
	IsRoom         bool      `db:"is_room"`
	CreatedAt      time.Time `db:"created_at"`
	UpdatedAt      time.Time `db:"updated_at"`
	LastActivityAt time.Time `db:"last_activity_at"`
}

const threadCols = `id, workspace_id, owner_id, title, model, role_id, agent_enabled, web_search, tts_enabled, image_enabled,
	context_summary, notes, pinned, archived, active_leaf_id, title_state, num_ctx, compaction, is_room, created_at, updated_at, last_activity_at`

// ThreadSummary is what the sidebar shows of a thread.
type ThreadSummary struct {
	ID             int64     `db:"id"`
	Title          string    `db:"title"`
	Pinned         bool      `db:"pinned"`
	LastActivityAt time.Time `db:"last_activity_at"`
}

// ThreadCursor marks where a sidebar page ended; the next page starts after it.
type ThreadCursor struct {
	Pinned   bool
	Activity time.Time
	ID       int64
}

// Thread returns one of the user's threads.
func (d *DB) Thread(ctx context.Context, user, id int64) (Thread, error) {
	rows, err := d.q().Query(ctx, "SELECT "+threadCols+" FROM threads WHERE id = $1 AND owner_id = $2", id, user)
	if err != nil {
		return Thread{}, err
	}
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Thread])
	return t, mapErr(err)
}

// SidebarThreads lists a page of the workspace's unarchived threads, pinned
// first and then by newest activity, starting after the cursor (nil: from the
// top). It uses threads_sidebar_idx, so its cost does not grow with the
// number of threads. next is nil on the last page.
func (d *DB) SidebarThreads(ctx context.Context, user, workspace int64, after *ThreadCursor, limit int) (page []ThreadSummary, next *ThreadCursor, err error) {
	var rows pgx.Rows
	if after == nil {
		rows, err = d.q().Query(ctx, `SELECT id, title, pinned, last_activity_at FROM threads
			WHERE workspace_id = $1 AND owner_id = $2 AND NOT archived AND NOT is_room
			ORDER BY pinned DESC, last_activity_at DESC, id DESC LIMIT $3`, workspace, user, limit+1)
	} else {
		rows, err = d.q().Query(ctx, `SELECT id, title, pinned, last_activity_at FROM threads
			WHERE workspace_id = $1 AND owner_id = $2 AND NOT archived AND NOT is_room
			  AND (pinned, last_activity_at, id) < ($4, $5, $6)
			ORDER BY pinned DESC, last_activity_at DESC, id DESC LIMIT $3`,
			workspace, user, limit+1, after.Pinned, after.Activity, after.ID)
	}
	if err != nil {
		return nil, nil, err
	}
	page, err = pgx.CollectRows(rows, pgx.RowToStructByName[ThreadSummary])
	if err != nil {
		return nil, nil, err
	}
	if len(page) > limit {
		page = page[:limit]
		last := page[limit-1]
		next = &ThreadCursor{Pinned: last.Pinned, Activity: last.LastActivityAt, ID: last.ID}
	}
	return page, next, nil
}

// RenameThread sets a thread's title; a generated title never replaces it.
func (d *DB) RenameThread(ctx context.Context, user, id int64, title string) error {
	return execOne(ctx, d.q(), `UPDATE threads SET title = $3, title_state = 'user', updated_at = now()
		WHERE id = $1 AND owner_id = $2`, id, user, title)
}

// SetGeneratedTitle stores a model-generated title unless the thread already
// has a generated or user-chosen one. It reports whether it did.
func (d *DB) SetGeneratedTitle(ctx context.Context, user, id int64, title string) (bool, error) {
	tag, err := d.q().Exec(ctx, `UPDATE threads SET title = $3, title_state = 'generated', updated_at = now()
		WHERE id = $1 AND owner_id = $2 AND title_state = 'provisional'`, id, user, title)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// SetThreadPinned pins or unpins a thread.
func (d *DB) SetThreadPinned(ctx context.Context, user, id int64, pinned bool) error {
	return execOne(ctx, d.q(), "UPDATE threads SET pinned = $3, updated_at = now() WHERE id = $1 AND owner_id = $2", id, user, pinned)
}

// SetThreadArchived archives or unarchives a thread.
func (d *DB) SetThreadArchived(ctx context.Context, user, id int64, archived bool) error {
	return execOne(ctx, d.q(), "UPDATE threads SET archived = $3, updated_at = now() WHERE id = $1 AND owner_id = $2", id, user, archived)
}

// DeleteThread removes a thread with its messages, runs, steps, attachments
// and media rows in one transaction (the foreign keys cascade). It returns
// the content hashes of the attachments and media it released so the caller
// can collect blobs no longer referenced.
func (d *DB) DeleteThread(ctx context.Context, user, id int64) (released []string, err error) {
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		// The thread's row first, in the mode its deletion needs, then its
		// runs, then (by the cascade) its messages: the order of
		// run_locks.go. Left to the cascade, the runs would go after the
		// messages (their references set to null), waiting for a run
		// being settled while it waits for its answer.
		if err := execOne(ctx, tx, "SELECT 1 FROM threads WHERE id = $1 AND owner_id = $2 FOR UPDATE", id, user); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT x FROM attachments a JOIN messages m ON m.id = a.message_id,
				LATERAL (VALUES (a.sha256), (a.thumb_sha)) v(x)
			WHERE m.thread_id = $1 AND a.owner_id = $2 AND x <> ''
			UNION SELECT x FROM media md JOIN messages m ON m.id = md.message_id
			JOIN threads t ON t.id = m.thread_id, LATERAL (VALUES (md.sha256), (md.thumb_sha)) v(x)
			WHERE m.thread_id = $1 AND t.owner_id = $2 AND x <> ''`, id, user)
		if err != nil {
			return err
		}
		if released, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		// Clear the leaf pointer first so the cascade does not update the
		// row it is deleting.
		if _, err := tx.Exec(ctx, "UPDATE threads SET active_leaf_id = NULL WHERE id = $1", id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM runs WHERE thread_id = $1", id); err != nil {
			return err
		}
		if err := execOne(ctx, tx, "DELETE FROM threads WHERE id = $1", id); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, id) // its open pages say so
	})
	return released, mapErr(err)
}
