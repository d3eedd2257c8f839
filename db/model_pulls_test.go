package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
)

// Pulls answer administrators only, run once per model and server, and a
// pull whose instance stopped beating is interrupted.
func TestModelPullsAreAdminScopedUniqueWhileRunningAndInterruptedWithTheirInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	admin, _ := newUser(t, store, "admin@example.com") // the first account administers
	member, _ := newUser(t, store, "member@example.com")
	if _, err := store.StartModelPull(ctx, member.ID, "llama3.2", "", "i1"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a member's pull: %v", err)
	}
	if err := store.Heartbeat(ctx, "alive"); err != nil {
		t.Fatal(err)
	}
	p, err := store.StartModelPull(ctx, admin.ID, "llama3.2", "", "alive")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.StartModelPull(ctx, admin.ID, "LLAMA3.2", "", "alive"); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("the same model twice at once: %v", err)
	}
	other, err := store.StartModelPull(ctx, admin.ID, "llama3.2", "gpu2", "dead")
	if err != nil {
		t.Fatalf("the same model onto another server: %v", err)
	}
	for _, f := range []func() error{
		func() error { _, err := store.ModelPull(ctx, member.ID, p.ID); return err },
		func() error { _, err := store.CancelModelPull(ctx, member.ID, p.ID); return err },
	} {
		if err := f(); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("a member reached a pull: %v", err)
		}
	}
	if ps, err := store.ModelPulls(ctx, member.ID, 10); err != nil || len(ps) != 0 {
		t.Fatalf("a member's list: %v %v", ps, err)
	}
	if running, err := store.RunningModelPull(ctx, admin.ID, "Llama3.2", "*"); err != nil || !running {
		t.Fatalf("running: %v %v", running, err)
	}
	// "dead" never beat: its pull is interrupted, the live instance's is not.
	ids, err := store.InterruptOrphanedPulls(ctx, "", 20*time.Second)
	if err != nil || len(ids) != 1 || ids[0] != other.ID {
		t.Fatalf("interrupted %v, %v; want [%d]", ids, err, other.ID)
	}
	stop, err := store.SaveModelPull(ctx, other.ID, db.PullProgress{Completed: 1})
	if err != nil || !stop {
		t.Fatalf("progress of an interrupted pull: stop %v, %v", stop, err)
	}
	c, err := store.CancelModelPull(ctx, admin.ID, p.ID)
	if err != nil || !c.CancelRequested {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	if stop, err := store.SaveModelPull(ctx, p.ID, db.PullProgress{Completed: 5, Total: 10}); err != nil || !stop {
		t.Fatalf("a progress write after cancel: stop %v, %v", stop, err)
	}
	if err := store.FinishModelPull(ctx, p.ID, db.PullCancelled, db.PullProgress{Completed: 6, Total: 10}, ""); err != nil {
		t.Fatal(err)
	}
	got, err := store.ModelPull(ctx, admin.ID, p.ID)
	if err != nil || got.Status != db.PullCancelled || got.Completed != 6 || got.FinishedAt == nil {
		t.Fatalf("finished: %+v %v", got, err)
	}
	if _, err := store.StartModelPull(ctx, admin.ID, "llama3.2", "", "alive"); err != nil {
		t.Fatalf("pull again after the end: %v", err)
	}
}
