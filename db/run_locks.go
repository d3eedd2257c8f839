package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The order in which a transaction locks the rows of a thread, its runs
// and its answers, so that two of them never wait for each other in a
// circle (a deadlock, 40P01). The runtime claims, streams and settles
// runs while their user edits or deletes the tree they write into:
//
//  1. the threads row, first and in the strongest mode the transaction
//     needs: FOR UPDATE for a tree edit or deletion (lockMessageThread,
//     DeleteThread), which waits for every other writer of the thread and
//     for the foreign-key checks of rows being added to it; FOR NO KEY
//     UPDATE (an UPDATE of the row) for a send or a resume. Transactions
//     of the run path that do not change the tree (claim, progress,
//     finish, cancel) do not lock it at all;
//  2. the users row of the runs' owner, only by ClaimNextRun (its per-user
//     limit), FOR NO KEY UPDATE: claims take turns, and the FOR KEY SHARE
//     of a foreign-key check (any write naming the owner, a second write
//     of a threads row in one transaction) never waits for it;
//  3. then runs rows (DELETE them before the messages they name: left to
//     the cascade, they would be locked after the messages);
//  4. then messages rows (a batch of them in id order), in the strongest
//     mode the transaction needs;
//  5. then what hangs off them: message_progress, run_steps, attachments,
//     media.
//
// A statement's foreign-key checks lock the referenced row FOR KEY SHARE,
// which conflicts only with FOR UPDATE (a deletion): inserting a message
// or a run waits for a tree edit of its thread, never the other way round.
// A row written twice in one transaction has all its foreign keys checked
// again on the second write, which takes rows out of this order: write a
// threads row once (DeleteMessage sets the new leaf before the cascade
// would).
//
// A room (issue 20) adds its own rows after the thread's, because the
// room's deletion (DeleteThread) takes the thread first and the room's
// rows last, through the cascade: a post and a hand-on take the room's
// thread before the member's row, and every change of the owner's takes
// the thread (FOR KEY SHARE, or its UPDATE) before the room's row; an
// agent's deletion then writes the agent's runs before the cascade writes
// its answers.

// lockMessageThread reads one of the user's messages and locks its thread,
// FOR UPDATE: the first lock of a tree edit.
func lockMessageThread(ctx context.Context, tx pgx.Tx, user, message int64, t *Thread) (Message, error) {
	rows, err := tx.Query(ctx, "SELECT "+liveCols("m.")+` FROM messages m
		JOIN threads t ON t.id = m.thread_id WHERE m.id = $1 AND t.owner_id = $2`, message, user)
	if err != nil {
		return Message{}, err
	}
	m, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Message])
	if err != nil {
		return Message{}, err
	}
	rows, err = tx.Query(ctx, "SELECT "+threadCols+" FROM threads WHERE id = $1 FOR UPDATE", m.ThreadID)
	if err != nil {
		return Message{}, err
	}
	*t, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Thread])
	return m, err
}
