package db_test

import (
	"context"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// A thread deleted while a progress round is in flight (its transaction
// removed the answer after the round's statement began) must cost only that
// answer's progress: the round holds every live run of the instance, and
// failing it loses the others' save and their Stop check for a round.
func TestAnAnswerDeletedDuringARoundDoesNotFailTheOtherRunsSave(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	u, ws := newUser(t, store, "fk@example.com")
	a := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "a"})
	b := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "b"})
	mustExec(t, store, `UPDATE runs SET status = 'running', instance_id = 'here' WHERE id = ANY($1)`, []int64{a.Run.ID, b.Run.ID})

	// The deletion of a's thread has begun and not committed yet.
	tx, err := store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "DELETE FROM threads WHERE id = $1", a.Thread.ID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		stop []int64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		stop, _, err := store.SaveProgress(ctx, []db.Progress{
			{Message: a.Assistant.ID, Seq: 0, Content: "A"},
			{Message: b.Assistant.ID, Seq: 0, Content: "B"},
		}, []int64{a.Run.ID, b.Run.ID})
		done <- result{stop, err}
	}()
	testwait.For(t, "the round waits for the deletion", 10*time.Second, func() bool {
		var n int
		if err := store.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%message_progress%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the whole round failed because one answer was deleted meanwhile: %v", r.err)
	}
	if got := mustMessage(t, store, u.ID, b.Assistant.ID).Content; got != "B" {
		t.Fatalf("the other run's text: %q", got)
	}
}
