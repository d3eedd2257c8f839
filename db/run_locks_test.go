package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
)

// Each test below puts two of the run path's transactions in the order
// that closed a circle of lock waits (a deadlock, 40P01) before the lock
// order of db/run_locks.go: a third transaction (held) holds one row so
// that the first stops at a known statement, the second is started and
// waits for the first, and then held lets go. Waiting for a session to
// wait for a lock is a condition on pg_stat_activity, polled with a
// deadline (waitLockWaiters).

// runLocks is one user's thread with its first answer: U the question, A
// the streaming answer, R its run (queued).
type runLocks struct {
	store *db.DB
	user  int64
	sent  db.Sent
}

func newRunLocks(t *testing.T) runLocks {
	t.Helper()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "runlocks@example.com")
	return runLocks{store: store, user: u.ID, sent: send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "hi"})}
}

// claim starts the thread's run, as the runtime does first.
func (k runLocks) claim(t *testing.T) {
	t.Helper()
	r, ok, err := k.store.ClaimNextRun(context.Background(), k.sent.Thread.ID, "here", 4)
	if err != nil || !ok || r.ID != k.sent.Run.ID {
		t.Fatalf("claim: %v %v %v", r.ID, ok, err)
	}
}

// progress stores the answer's progress rows 0..n-1.
func (k runLocks) progress(t *testing.T, n int) {
	t.Helper()
	for seq := range n {
		if _, _, err := k.store.SaveProgress(context.Background(), []db.Progress{{Message: k.sent.Assistant.ID, Seq: seq, Content: "x"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// hold locks rows in a transaction of its own (sql: a SELECT ... FOR
// mode); release ends it.
func (k runLocks) hold(t *testing.T, sql string, args ...any) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := k.store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	var n int
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil || n == 0 {
		t.Fatalf("hold %q: %d rows, %v", sql, n, err)
	}
	return func() {
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// waitLockWaiters polls until n sessions of the test's database wait for a
// lock; none of ops may finish meanwhile.
func (k runLocks) waitLockWaiters(t *testing.T, n int, ops ...*op) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := k.store.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == n {
			return
		}
		for _, o := range ops {
			select {
			case err := <-o.done:
				t.Fatalf("%s finished (%v) before %d sessions waited for a lock (%d do)", o.name, err, n, waiting)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock, not %d", waiting, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (k runLocks) deleteQuestion() *op {
	return run("delete the question", func() error {
		_, err := k.store.DeleteMessage(context.Background(), k.user, k.sent.User.ID)
		return err
	})
}

func (k runLocks) finish() *op {
	return run("finish the run", func() error {
		_, err := k.store.FinishRun(context.Background(), k.sent.Run.ID, k.sent.Assistant.ID,
			db.Finish{RunStatus: db.RunCompleted, MsgStatus: db.MsgComplete, Content: "xx"})
		return err
	})
}

// A message deleted while the runtime claims its answer's run: the claim
// holds the owner's row (its per-user limit) and waits for the run the
// deletion removed; the deletion, which rewrites the thread's row, must
// not need the owner's row in a mode the claim's lock excludes. Before the
// fix, deleting the thread's only question closed the circle every time
// (the second write to the thread row checked its foreign keys again,
// FOR KEY SHARE on users, which the claim held FOR UPDATE).
func TestAMessageDeletedWhileItsRunIsClaimedIsDeletedAndTheClaimFindsNothing(t *testing.T) {
	t.Parallel()
	k := newRunLocks(t)
	// The deletion stops at the answer (it has removed the run by then).
	release := k.hold(t, "SELECT 1 FROM messages WHERE id = $1 FOR KEY SHARE", k.sent.Assistant.ID)
	del := k.deleteQuestion()
	k.waitLockWaiters(t, 1, del)
	var claimed bool
	claim := run("claim the run", func() error {
		_, ok, err := k.store.ClaimNextRun(context.Background(), k.sent.Thread.ID, "here", 4)
		claimed = ok
		return err
	})
	k.waitLockWaiters(t, 2, del, claim)
	release()
	noDeadlock(t, del)
	noDeadlock(t, claim)
	if claimed {
		t.Error("the claim started a run that was deleted")
	}
	if _, err := k.store.Message(context.Background(), k.user, k.sent.Assistant.ID); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("the answer after the deletion: %v", err)
	}
}

// A message deleted while its answer is being settled: the settling takes
// the run, then the answer (then its progress), as the deletion does.
// Before the fix it wrote the answer first and then waited for the run
// the deletion held, while the deletion waited for the answer.
func TestAMessageDeletedWhileItsAnswerIsSettledIsDeletedAfterIt(t *testing.T) {
	t.Parallel()
	k := newRunLocks(t)
	k.claim(t)
	k.progress(t, 1)
	// The settling stops at the answer's progress.
	release := k.hold(t, "SELECT 1 FROM message_progress WHERE message_id = $1 FOR KEY SHARE", k.sent.Assistant.ID)
	fin := k.finish()
	k.waitLockWaiters(t, 1, fin)
	del := k.deleteQuestion()
	k.waitLockWaiters(t, 2, fin, del)
	release()
	noDeadlock(t, fin)
	noDeadlock(t, del)
	var left int
	if err := k.store.Pool.QueryRow(context.Background(), "SELECT count(*) FROM messages WHERE thread_id = $1",
		k.sent.Thread.ID).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d messages left (%v)", left, err)
	}
}

// A thread deleted while its answer is being settled: the deletion takes
// the thread's runs before its messages (as a message's deletion does),
// not the messages first and the runs last through the foreign keys'
// cascade, which would wait for the settling's run while it waits for
// the answer.
func TestAThreadDeletedWhileItsAnswerIsSettledIsDeleted(t *testing.T) {
	t.Parallel()
	k := newRunLocks(t)
	k.claim(t)
	// Both wait for the answer, the deletion first.
	release := k.hold(t, "SELECT 1 FROM messages WHERE id = $1 FOR SHARE", k.sent.Assistant.ID)
	del := run("delete the thread", func() error {
		_, err := k.store.DeleteThread(context.Background(), k.user, k.sent.Thread.ID)
		return err
	})
	k.waitLockWaiters(t, 1, del)
	fin := k.finish()
	k.waitLockWaiters(t, 2, del, fin)
	release()
	noDeadlock(t, del)
	if err := fin.wait(t); err != nil && !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("finish the run of a deleted thread: %v", err)
	}
}

// A message deleted while a progress round restarts its answer: the round
// takes the answer's row before its progress rows, as the deletion does.
func TestAMessageDeletedWhileItsAnswerRestartsIsDeleted(t *testing.T) {
	t.Parallel()
	k := newRunLocks(t)
	k.claim(t)
	k.progress(t, 2)
	// The round stops at the second progress row (it holds the first).
	release := k.hold(t, "SELECT 1 FROM message_progress WHERE message_id = $1 AND seq = 1 FOR KEY SHARE", k.sent.Assistant.ID)
	var stop []int64
	round := run("restart the answer", func() error {
		var err error
		stop, _, err = k.store.SaveProgress(context.Background(), []db.Progress{
			{Run: k.sent.Run.ID, Message: k.sent.Assistant.ID, Seq: 2, Content: "anew", Restart: true},
		}, []int64{k.sent.Run.ID})
		return err
	})
	k.waitLockWaiters(t, 1, round)
	del := k.deleteQuestion()
	k.waitLockWaiters(t, 2, round, del)
	release()
	noDeadlock(t, round)
	noDeadlock(t, del)
	if len(stop) != 0 {
		t.Errorf("the round, committed before the deletion, stops %v", stop)
	}
}

// A message deleted while its interrupted agent run is resumed: the
// resume takes the thread's row (whose leaf it moves) before the run, as
// the deletion does. Before the fix it took the run and the answer first
// and the thread last, while the deletion held the thread and waited for
// the run.
func TestAMessageDeletedWhileItsRunIsResumedIsDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "resume@example.com")
	k := runLocks{store: store, user: u.ID, sent: send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "hi", Kind: db.RouteAgent})}
	mustExec(t, store, "UPDATE runs SET status = 'interrupted', finished_at = now() WHERE id = $1", k.sent.Run.ID)
	// The resume stops at the answer.
	release := k.hold(t, "SELECT 1 FROM messages WHERE id = $1 FOR SHARE", k.sent.Assistant.ID)
	resume := run("resume the run", func() error {
		_, err := store.ResumeRun(ctx, u.ID, k.sent.Run.ID)
		return err
	})
	k.waitLockWaiters(t, 1, resume)
	del := k.deleteQuestion()
	k.waitLockWaiters(t, 2, resume, del)
	release()
	noDeadlock(t, resume)
	noDeadlock(t, del)
}
