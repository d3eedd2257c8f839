package db

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Branch summaries (issue 17): when the user switches away from a branch of
// a thread that has them on, the model writes a short summary of the
// branch left. The summary is a node of the tree hanging under the branch's
// first message, shown where that branch forks off the one being read; it
// lives in branch_summaries, not among the messages, so context assembly
// never sends it to the model.

// Statuses of a branch summary.
const (
	SummaryPending  = "pending"
	SummaryComplete = "complete"
	SummaryError    = "error"
)

// SummaryStallAfter is how long a summary may stay pending: past it, the
// instance writing it is gone (a summary request is bounded well below
// it) and the summary is shown as not finished, to retry.
const SummaryStallAfter = 3 * time.Minute

// BranchSummary is the summary of one branch of a thread.
type BranchSummary struct {
	ID              int64     `db:"id"`
	ThreadID        int64     `db:"thread_id"`
	BranchMessageID int64     `db:"branch_message_id"` // the branch's first message
	ForkID          *int64    `db:"fork_id"`           // its parent, where the branch forks (nil: at the root)
	LeafMessageID   *int64    `db:"leaf_message_id"`   // the last message summarized
	Status          string    `db:"status"`
	Summary         string    `db:"summary"`
	Error           string    `db:"error"`
	Model           string    `db:"model"`
	Attempt         int       `db:"attempt"`
	Snippet         string    `db:"snippet"` // the start of the branch's first message
	CreatedAt       time.Time `db:"created_at"`
	UpdatedAt       time.Time `db:"updated_at"`
}

// Stalled reports whether a pending summary was abandoned (its instance
// stopped while writing it).
func (s BranchSummary) Stalled(now time.Time) bool {
	return s.Status == SummaryPending && now.Sub(s.UpdatedAt) > SummaryStallAfter
}

const summaryCols = `s.id, s.thread_id, s.branch_message_id, b.parent_id AS fork_id, s.leaf_message_id, s.status,
	s.summary, s.error, s.model, s.attempt, left(b.content, 80) AS snippet, s.created_at, s.updated_at`

// summaryFrom joins a summary to its branch's first message and its
// thread; every query filters on t.owner_id.
const summaryFrom = ` FROM branch_summaries s JOIN messages b ON b.id = s.branch_message_id JOIN threads t ON t.id = s.thread_id`

// SummarizeBranches reports whether leaving a branch of one of the user's
// threads writes its summary.
func (d *DB) SummarizeBranches(ctx context.Context, user, thread int64) (bool, error) {
	var on bool
	err := d.q().QueryRow(ctx, "SELECT summarize_branches FROM threads WHERE id = $1 AND owner_id = $2", thread, user).Scan(&on)
	return on, mapErr(err)
}

// SetSummarizeBranches switches branch summaries of one of the user's
// threads on or off.
func (d *DB) SetSummarizeBranches(ctx context.Context, user, thread int64, on bool) error {
	return execOne(ctx, d.q(), "UPDATE threads SET summarize_branches = $3, updated_at = now() WHERE id = $1 AND owner_id = $2",
		thread, user, on)
}

// BranchSwitch is the outcome of LeaveBranch.
type BranchSwitch struct {
	Thread int64
	// Summary is the summary to write of the branch left (nil: none — the
	// thread has summaries off, no branch was left, or the one kept is
	// still current).
	Summary *BranchSummary
}

// LeaveBranch is SelectBranch that also, when the thread has branch
// summaries on, keeps a pending summary of the branch being left: the part
// of the old active path below the point where it forks from the new one.
// A branch summarized before is written anew only when it grew since.
func (d *DB) LeaveBranch(ctx context.Context, user, message int64) (BranchSwitch, error) {
	var out BranchSwitch
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var oldLeaf *int64
		var on bool
		if err := tx.QueryRow(ctx, `SELECT t.id, t.active_leaf_id, t.summarize_branches FROM messages m
			JOIN threads t ON t.id = m.thread_id WHERE m.id = $1 AND t.owner_id = $2 FOR UPDATE OF t`, message, user).
			Scan(&out.Thread, &oldLeaf, &on); err != nil {
			return err
		}
		var leaf, thread int64
		if err := tx.QueryRow(ctx, newestLeafSQL, message, user).Scan(&leaf, &thread); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE threads SET active_leaf_id = $2, updated_at = now() WHERE id = $1", thread, leaf); err != nil {
			return err
		}
		if err := NoteThreadChanged(ctx, tx, thread); err != nil {
			return err
		}
		if !on || oldLeaf == nil || *oldLeaf == leaf {
			return nil
		}
		start, err := branchLeft(ctx, tx, *oldLeaf, leaf)
		if err != nil || start == 0 {
			return err
		}
		// One summary per branch: a new one, or the kept one written anew
		// when the branch grew (or its last write failed or stalled).
		var id int64
		err = tx.QueryRow(ctx, `INSERT INTO branch_summaries (thread_id, branch_message_id, leaf_message_id)
			VALUES ($1, $2, $3)
			ON CONFLICT (branch_message_id) DO UPDATE SET leaf_message_id = EXCLUDED.leaf_message_id,
				status = 'pending', summary = '', error = '', attempt = branch_summaries.attempt + 1, updated_at = now()
			WHERE branch_summaries.leaf_message_id IS DISTINCT FROM EXCLUDED.leaf_message_id
			   OR branch_summaries.status = 'error'
			   OR (branch_summaries.status = 'pending' AND branch_summaries.updated_at < now() - make_interval(secs => $4))
			RETURNING id`, out.Thread, start, *oldLeaf, SummaryStallAfter.Seconds()).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // the kept summary is current
		}
		if err != nil {
			return err
		}
		s, err := oneRow[BranchSummary](ctx, tx, "SELECT "+summaryCols+summaryFrom+" WHERE s.id = $1", id)
		out.Summary = &s
		return err
	})
	return out, mapErr(err)
}

// branchLeft is the first message of the branch that leads from the point
// where the paths to oldLeaf and newLeaf part to oldLeaf (0 when oldLeaf
// is on the new path: nothing is left).
func branchLeft(ctx context.Context, tx pgx.Tx, oldLeaf, newLeaf int64) (int64, error) {
	up := func(leaf int64) ([]int64, error) {
		rows, err := tx.Query(ctx, `WITH RECURSIVE up AS (
				SELECT id, parent_id, 0 AS depth FROM messages WHERE id = $1
				UNION ALL SELECT m.id, m.parent_id, up.depth + 1 FROM messages m JOIN up ON m.id = up.parent_id)
			SELECT id FROM up ORDER BY depth`, leaf)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	oldPath, err := up(oldLeaf) // leaf first
	if err != nil {
		return 0, err
	}
	newPath, err := up(newLeaf)
	if err != nil {
		return 0, err
	}
	for i, id := range oldPath {
		if slices.Contains(newPath, id) {
			if i == 0 {
				return 0, nil
			}
			return oldPath[i-1], nil
		}
	}
	if len(oldPath) == 0 {
		return 0, nil
	}
	return oldPath[len(oldPath)-1], nil // another root
}

// BranchSummary reads one of the user's branch summaries.
func (d *DB) BranchSummary(ctx context.Context, user, id int64) (BranchSummary, error) {
	return oneRow[BranchSummary](ctx, d.q(), "SELECT "+summaryCols+summaryFrom+" WHERE s.id = $1 AND t.owner_id = $2", id, user)
}

// BranchSummariesBeside returns the summaries of the branches forking off
// beside the given messages of one of the user's threads — those whose
// first message is a sibling of one of them — by that message. msgs is a
// path (each fork point has one child on it).
func (d *DB) BranchSummariesBeside(ctx context.Context, user, thread int64, msgs []Message) (map[int64][]BranchSummary, error) {
	var ids, parents []int64
	byParent := map[int64]int64{} // fork point (0: the root) → the message of msgs below it
	for _, m := range msgs {
		ids = append(ids, m.ID)
		var p int64
		if m.ParentID != nil {
			p = *m.ParentID
			parents = append(parents, p)
		}
		byParent[p] = m.ID
	}
	_, roots := byParent[0]
	rows, err := d.q().Query(ctx, "SELECT "+summaryCols+summaryFrom+`
		WHERE s.thread_id = $1 AND t.owner_id = $2 AND NOT (s.branch_message_id = ANY($3))
		  AND (b.parent_id = ANY($4) OR ($5 AND b.parent_id IS NULL))
		ORDER BY s.branch_message_id`, thread, user, ids, parents, roots)
	if err != nil {
		return nil, err
	}
	ss, err := pgx.CollectRows(rows, pgx.RowToStructByName[BranchSummary])
	if err != nil {
		return nil, err
	}
	out := map[int64][]BranchSummary{}
	for _, s := range ss {
		var p int64
		if s.ForkID != nil {
			p = *s.ForkID
		}
		if at, ok := byParent[p]; ok {
			out[at] = append(out[at], s)
		}
	}
	return out, nil
}

// BranchSummaryWork is what writing a summary needs: the summary, the
// thread's model and the branch's messages, first to last.
type BranchSummaryWork struct {
	Summary BranchSummary
	Model   string
	Turns   []Message
}

// maxSummaryPath bounds the path read to summarize a branch.
const maxSummaryPath = 10_000

// BranchSummaryWork reads the work of one of the user's pending summaries
// at the given attempt (ErrNotFound: it was written anew or removed
// meanwhile, or is not pending).
func (d *DB) BranchSummaryWork(ctx context.Context, user, id int64, attempt int) (BranchSummaryWork, error) {
	var w BranchSummaryWork
	var err error
	if w.Summary, err = d.BranchSummary(ctx, user, id); err != nil {
		return w, err
	}
	if w.Summary.Attempt != attempt || w.Summary.Status != SummaryPending || w.Summary.LeafMessageID == nil {
		return w, ErrNotFound
	}
	if err := d.q().QueryRow(ctx, "SELECT model FROM threads WHERE id = $1 AND owner_id = $2", w.Summary.ThreadID, user).Scan(&w.Model); err != nil {
		return w, mapErr(err)
	}
	path, err := d.TurnsTo(ctx, user, *w.Summary.LeafMessageID, maxSummaryPath)
	if err != nil {
		return w, err
	}
	i := slices.IndexFunc(path, func(m Message) bool { return m.ID == w.Summary.BranchMessageID })
	if i < 0 {
		return w, ErrNotFound // the leaf is no longer below the branch's start
	}
	for _, m := range path[i:] {
		if (m.Role == RoleUser || m.Role == RoleAssistant) && m.Content != "" {
			w.Turns = append(w.Turns, m)
		}
	}
	return w, nil
}

// FinishBranchSummary stores the outcome of one attempt at a summary: the
// text, or the error shown on the node. A later attempt (the branch was
// left again meanwhile) wins: an older one's outcome is dropped.
func (d *DB) FinishBranchSummary(ctx context.Context, user, id int64, attempt int, model, summary, errText string) error {
	status := SummaryComplete
	if errText != "" {
		status = SummaryError
	}
	return execOne(ctx, d.q(), `UPDATE branch_summaries s SET status = $4, summary = $5, error = $6, model = $7, updated_at = now()
		FROM threads t WHERE s.id = $1 AND t.id = s.thread_id AND t.owner_id = $2 AND s.attempt = $3 AND s.status = 'pending'`,
		id, user, attempt, status, summary, errText, model)
}

// RetryBranchSummary makes one of the user's failed or stalled summaries
// pending again, as a new attempt, and returns it.
func (d *DB) RetryBranchSummary(ctx context.Context, user, id int64) (BranchSummary, error) {
	if err := execOne(ctx, d.q(), `UPDATE branch_summaries s SET status = 'pending', error = '', attempt = s.attempt + 1, updated_at = now()
		FROM threads t WHERE s.id = $1 AND t.id = s.thread_id AND t.owner_id = $2 AND s.leaf_message_id IS NOT NULL
		  AND (s.status = 'error' OR (s.status = 'pending' AND s.updated_at < now() - make_interval(secs => $3)))`,
		id, user, SummaryStallAfter.Seconds()); err != nil {
		return BranchSummary{}, err
	}
	return d.BranchSummary(ctx, user, id)
}

// DeleteBranchSummary removes one of the user's branch summaries and
// returns its thread.
func (d *DB) DeleteBranchSummary(ctx context.Context, user, id int64) (int64, error) {
	var thread int64
	err := d.q().QueryRow(ctx, `DELETE FROM branch_summaries s USING threads t
		WHERE s.id = $1 AND t.id = s.thread_id AND t.owner_id = $2 RETURNING s.thread_id`, id, user).Scan(&thread)
	return thread, mapErr(err)
}
