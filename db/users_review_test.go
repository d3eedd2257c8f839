package db_test

import (
	"context"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
)

// An administrator disables an account while one of its sends is still on
// its way (let in before the account was disabled): the run that send
// queues after the account's runs were stopped is cancelled when it is
// claimed, with its answer, and never starts. An enabled account's next
// send starts as usual.
func TestARunQueuedAfterItsAccountWasDisabledNeverStarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	admin, _ := newUser(t, store, "admin@example.com")
	member, ws := newUser(t, store, "member@example.com")
	if _, err := store.SetUserDisabled(ctx, admin.ID, member.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CancelUserRuns(ctx, member.ID); err != nil { // what disabling stops
		t.Fatal(err)
	}
	sent := send(t, store, member.ID, db.Send{WorkspaceID: ws.ID, Title: "late", Content: "sent just before"})
	if r, ok, err := store.ClaimNextRun(ctx, sent.Thread.ID, "A", 10); err != nil || ok {
		t.Fatalf("claim = %+v, %v, %v; want nothing started", r, ok, err)
	}
	r, err := store.Run(ctx, member.ID, sent.Run.ID)
	if err != nil || r.Status != db.RunCancelled {
		t.Fatalf("the disabled account's run = %q (%v), want cancelled", r.Status, err)
	}
	if m, err := store.Message(ctx, member.ID, sent.Assistant.ID); err != nil || m.Status != db.MsgCancelled {
		t.Fatalf("its answer = %q (%v), want cancelled", m.Status, err)
	}

	if _, err := store.SetUserDisabled(ctx, admin.ID, member.ID, false); err != nil {
		t.Fatal(err)
	}
	again := send(t, store, member.ID, db.Send{ThreadID: sent.Thread.ID, Content: "enabled again"})
	if r, ok, err := store.ClaimNextRun(ctx, sent.Thread.ID, "A", 10); err != nil || !ok || r.ID != again.Run.ID {
		t.Fatalf("claim after enabling = %+v, %v, %v; want run %d started", r, ok, err, again.Run.ID)
	}
}

// A run's end tries its thread's next queued run: with nothing queued the
// try neither takes nor waits for its owner's row lock (one user's answers
// ending together queued on it), and with a run queued it still claims it.
func TestAClaimOnAThreadWithNothingQueuedDoesNotWaitForItsOwnersLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "claims@example.com")
	sent := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Title: "t", Content: "first"})
	if _, ok, err := store.ClaimNextRun(ctx, sent.Thread.ID, "A", 10); err != nil || !ok {
		t.Fatalf("first claim: %v, %v", ok, err)
	}
	tx, err := store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR UPDATE", u.ID); err != nil {
		t.Fatal(err)
	}
	// Bounded: a claim that waited for the lock fails here.
	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if r, ok, err := store.ClaimNextRun(bounded, sent.Thread.ID, "A", 10); err != nil || ok {
		t.Fatalf("claim with nothing queued = %+v, %v, %v; want nothing, at once", r, ok, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, store, "UPDATE runs SET status = 'completed' WHERE id = $1", sent.Run.ID)
	next := send(t, store, u.ID, db.Send{ThreadID: sent.Thread.ID, Content: "second"})
	if r, ok, err := store.ClaimNextRun(ctx, sent.Thread.ID, "A", 10); err != nil || !ok || r.ID != next.Run.ID {
		t.Fatalf("claim of the queued run = %+v, %v, %v; want run %d", r, ok, err, next.Run.ID)
	}
}
