package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/db"
	"weft/internal/testenv"
)

func TestWorkspaceHooksAreTheirOwnersAndTheOutboxKeepsOneDeliveryPerEventAndHook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	owner, ws := newUser(t, store, "hooks-owner@example.com")
	other, _ := newUser(t, store, "hooks-other@example.com")
	if _, err := store.AddWorkspaceHook(ctx, other.ID, db.WorkspaceHook{WorkspaceID: ws.ID, Event: "*", URL: "https://x.example/", Secret: "s", TimeoutMS: 1000}); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a hook on another user's workspace: %v", err)
	}
	h, err := store.AddWorkspaceHook(ctx, owner.ID, db.WorkspaceHook{WorkspaceID: ws.ID, Event: "agent_end", URL: "https://x.example/", Secret: "s", TimeoutMS: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < db.MaxWorkspaceHooks; i++ {
		if _, err := store.AddWorkspaceHook(ctx, owner.ID, db.WorkspaceHook{WorkspaceID: ws.ID, Event: "*", URL: "https://x.example/", Secret: "s", TimeoutMS: 1000}); err != nil {
			t.Fatalf("hook %d: %v", i+1, err)
		}
	}
	if _, err := store.AddWorkspaceHook(ctx, owner.ID, db.WorkspaceHook{WorkspaceID: ws.ID, Event: "*", URL: "https://x.example/", Secret: "s", TimeoutMS: 1000}); !errors.Is(err, db.ErrHookLimit) {
		t.Fatalf("a hook past the limit: %v", err)
	}
	if hs, err := store.WorkspaceHooks(ctx, owner.ID, ws.ID); err != nil || len(hs) != db.MaxWorkspaceHooks {
		t.Fatalf("the owner lists %d hooks %v", len(hs), err)
	}
	if hs, err := store.WorkspaceHooks(ctx, other.ID, ws.ID); err != nil || len(hs) != 0 {
		t.Fatalf("another user lists %v %v", hs, err)
	}
	if _, err := store.DeleteWorkspaceHook(ctx, other.ID, h.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("another user deletes: %v", err)
	}

	run := send(t, store, owner.ID, db.Send{WorkspaceID: ws.ID, Title: "t", Content: "hi"}).Run
	d := db.HookDelivery{EventID: "evt_1", Event: "agent_end", RunID: &run.ID, HookKey: "workspace:1", WorkspaceHookID: &h.ID, Body: `{"id":"evt_1"}`}
	var jobs []int64
	enqueue := func(_ pgx.Tx, d db.HookDelivery) error { jobs = append(jobs, d.ID); return nil }
	for range 2 {
		if err := store.AddHookDeliveries(ctx, []db.HookDelivery{d}, enqueue); err != nil {
			t.Fatal(err)
		}
	}
	if len(jobs) != 1 {
		t.Fatalf("the same event for the same hook made %d jobs, want 1", len(jobs))
	}
	got, err := store.HookAttempted(ctx, jobs[0], false, false, "the server answered 500", 0)
	if err != nil || got.Attempts != 1 || got.LastError != "the server answered 500" || got.DeliveredAt != nil {
		t.Fatalf("a failed attempt: %+v %v", got, err)
	}
	if fails, _ := store.UnreportedHookFailures(ctx, run.ID, nil); len(fails) != 1 {
		t.Fatalf("unreported failures = %v", fails)
	}
	if fails, err := store.UnreportedHookFailures(ctx, run.ID, []string{"message_update", "agent_end"}); err != nil || len(fails) != 0 {
		t.Fatalf("unreported failures of events not shown = %v %v", fails, err)
	}
	if got, err = store.HookAttempted(ctx, jobs[0], true, false, "", 0); err != nil || got.Attempts != 2 || got.DeliveredAt == nil {
		t.Fatalf("the retry: %+v %v", got, err)
	}
	if n, err := store.PruneHookDeliveries(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned a recent delivery: %d %v", n, err)
	}
	if n, err := store.PruneHookDeliveries(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("pruned %d %v, want the delivered one", n, err)
	}

	// A delivery whose job ended without an outcome (its last attempt
	// interrupted) is neither made nor given up: it still goes, once old.
	stuck := d
	stuck.EventID = "evt_stuck"
	jobs = nil
	if err := store.AddHookDeliveries(ctx, []db.HookDelivery{stuck}, enqueue); err != nil || len(jobs) != 1 {
		t.Fatalf("a second delivery: %v %v", jobs, err)
	}
	if _, err := store.HookAttempted(ctx, jobs[0], false, false, "no answer within 10s", 0); err != nil {
		t.Fatal(err)
	}
	if n, err := store.PruneHookDeliveries(ctx, time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned a recent delivery still being retried: %d %v", n, err)
	}
	if _, err := store.Pool.Exec(ctx, "UPDATE hook_deliveries SET created_at = now() - interval '15 days' WHERE id = $1", jobs[0]); err != nil {
		t.Fatal(err)
	}
	if n, err := store.PruneHookDeliveries(ctx, time.Now().Add(-7*24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("pruned %d %v, want the delivery left without an outcome", n, err)
	}
	if _, err := store.DeleteWorkspaceHook(ctx, owner.ID, h.ID); err != nil {
		t.Fatal(err)
	}
}

func TestStepsAddedAtOnceByTheRunAndHookJobsTakeSeqOneAfterTheOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	owner, ws := newUser(t, store, "hooks-steps@example.com")
	run := send(t, store, owner.ID, db.Send{WorkspaceID: ws.ID, Title: "t", Content: "hi"}).Run
	const n = 8
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			_, err := store.AddStep(ctx, run.ID, db.StepHook, db.StepError, db.StepData{Content: "agent_end", Error: "Delivery failed"}, nil)
			errs <- err
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("a step added at the same time as others: %v", err)
		}
	}
	steps, err := store.Steps(ctx, owner.ID, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	hooks := 0
	for i, s := range steps {
		if s.Kind == db.StepHook {
			hooks++
		}
		if i > 0 && s.Seq != steps[i-1].Seq+1 {
			t.Errorf("seq %d after %d", s.Seq, steps[i-1].Seq)
		}
	}
	if hooks != n {
		t.Errorf("%d hook steps, want %d", hooks, n)
	}
}

func TestAStepsOutcomeAndItsHookDeliveriesAreRecordedTogetherOrNeither(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	owner, ws := newUser(t, store, "hooks-tx@example.com")
	run := send(t, store, owner.ID, db.Send{WorkspaceID: ws.ID, Title: "t", Content: "hi"}).Run
	s, err := store.AddStep(ctx, run.ID, db.StepToolCall, db.StepRunning, db.StepData{Tool: "list_files"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := db.HookDelivery{EventID: "evt_end", Event: "tool_execution_end", RunID: &run.ID, HookKey: "url:https://x.example/", Body: `{}`}
	broken := errors.New("the job queue is down")
	_, err = store.UpdateStep(ctx, s.ID, db.StepOK, db.StepData{Tool: "list_files", Output: "a.txt"}, db.WithDeliveries{
		Checkpoint: map[string]int{"round": 1}, Deliveries: []db.HookDelivery{d},
		Enqueue: func(pgx.Tx, db.HookDelivery) error { return broken }})
	if !errors.Is(err, broken) {
		t.Fatalf("the update with a job that could not be queued: %v", err)
	}
	if got, _ := store.StepByID(ctx, run.ID, s.ID); got.Status != db.StepRunning {
		t.Errorf("the step's outcome was kept without its deliveries: %s", got.Status)
	}
	if ds, _ := store.HookDeliveries(ctx, run.ID); len(ds) != 0 {
		t.Errorf("deliveries kept without the step's outcome: %v", ds)
	}
	var jobs int
	got, err := store.UpdateStep(ctx, s.ID, db.StepOK, db.StepData{Tool: "list_files", Output: "a.txt"}, db.WithDeliveries{
		Checkpoint: map[string]int{"round": 1}, Deliveries: []db.HookDelivery{d},
		Enqueue: func(pgx.Tx, db.HookDelivery) error { jobs++; return nil }})
	if err != nil || got.Status != db.StepOK {
		t.Fatalf("the update: %+v %v", got, err)
	}
	if ds, _ := store.HookDeliveries(ctx, run.ID); len(ds) != 1 || jobs != 1 {
		t.Errorf("%d deliveries, %d jobs, want 1 and 1", len(ds), jobs)
	}
	var cp string
	if err := store.Pool.QueryRow(ctx, "SELECT checkpoint::text FROM runs WHERE id = $1", run.ID).Scan(&cp); err != nil || cp != `{"round": 1}` {
		t.Errorf("the checkpoint saved = %s %v", cp, err)
	}
	// AddStep too, with a StepCheckpoint inside.
	var seen int64
	added, err := store.AddStep(ctx, run.ID, db.StepHook, db.StepError, db.StepData{}, db.WithDeliveries{
		Checkpoint: db.StepCheckpoint(func(s db.Step) any { seen = s.ID; return map[string]int{"round": 2} }),
		Deliveries: []db.HookDelivery{{EventID: "evt_2", Event: "turn_end", RunID: &run.ID, HookKey: "url:https://x.example/", Body: `{}`}},
		Enqueue:    func(pgx.Tx, db.HookDelivery) error { jobs++; return nil }})
	if err != nil || seen != added.ID || jobs != 2 {
		t.Errorf("AddStep with deliveries: %v, checkpoint saw step %d of %d, %d jobs", err, seen, added.ID, jobs)
	}
}
