package db_test

import (
	"context"
	"testing"

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
