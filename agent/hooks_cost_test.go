package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"weft/db"
)

// noJobs is a job queue that must not be used.
type noJobs struct{ t testing.TB }

func (noJobs) Register(func(*river.Workers) error, ...*river.PeriodicJob) error { return nil }
func (j noJobs) InsertTx(context.Context, pgx.Tx, river.JobArgs, *river.InsertOpts) error {
	j.t.Fatalf("a delivery was queued for a run without hooks")
	return nil
}

// hooklessRun is a run whose hooks are loaded and none exists; its Store
// is nil, so any query panics.
func hooklessRun(t testing.TB) *run {
	a := &Agent{}
	a.hooks = newHooks(nil, Config{Jobs: noJobs{t}})
	return &run{a: a, r: db.Run{ID: 1, ThreadID: 1, OwnerID: 1}, ws: db.Workspace{ID: 1}, hk: &runHooks{started: map[int64]bool{}}}
}

// A run with no hook pays no query and no delivery per token, per turn or
// per call: only the one query of loadHooks when the run starts.
func TestARunWithoutHooksMakesNoQueryPerEvent(t *testing.T) {
	ctx := context.Background()
	x := hooklessRun(t)
	x.agentStart(ctx, false)
	for range 3 {
		x.turnStart(ctx)
		for range 1000 {
			x.messageChunk(ctx, "token ")
		}
		x.messageEnd(ctx, db.StepData{Content: strings.Repeat("token ", 1000), Calls: []db.StepCall{{ID: "c", Name: "t"}}})
		x.cp.Pending = []pendingCall{{ID: "c", Name: "t"}}
		s := db.Step{ID: 7}
		if denied, _ := x.toolStart(ctx, s); denied {
			t.Fatal("denied without a hook")
		}
		x.toolRunning(&x.cp.Pending[0])
		x.toolProgress(ctx)("output")
		x.toolRunning(nil)
		if ds := x.toolEnd(s, x.cp.Pending[0], db.StepOK, Result{Output: "ok"}, "", ""); len(ds) != 0 {
			t.Fatalf("deliveries of tool_execution_end without a hook: %v", ds)
		}
		x.turnEnd(ctx)
	}
	x.agentEnd(ctx, db.RunCompleted, chatResult{})
}

func BenchmarkAStreamedTokenWithoutHooks(b *testing.B) {
	ctx := context.Background()
	x := hooklessRun(b)
	x.turnStart(ctx)
	for b.Loop() {
		x.messageChunk(ctx, "token ")
	}
}

func BenchmarkATurnsEventsWithoutHooks(b *testing.B) {
	ctx := context.Background()
	x := hooklessRun(b)
	x.cp.Pending = []pendingCall{{ID: "c", Name: "t"}}
	s := db.Step{ID: 7}
	for b.Loop() {
		x.turnStart(ctx)
		x.messageEnd(ctx, db.StepData{Content: "answer", Calls: []db.StepCall{{ID: "c", Name: "t"}}})
		x.toolStart(ctx, s)
		x.toolEnd(s, x.cp.Pending[0], db.StepOK, Result{Output: "ok"}, "", "")
		x.turnEnd(ctx)
	}
}

// deliveryStore is the outbox of one delivery; any other query panics.
type deliveryStore struct {
	Store
	t testing.TB
	d db.HookDelivery
}

func (s deliveryStore) HookDeliveryByID(context.Context, int64) (db.HookDelivery, error) {
	return s.d, nil
}
func (s deliveryStore) HookAttempted(context.Context, int64, bool, bool, string, int64) (db.HookDelivery, error) {
	s.t.Fatalf("an attempt cut short by the server stopping was recorded")
	return s.d, nil
}

func TestADeliveryCutShortByTheServerStoppingIsMadeAgainWithoutCountingAsAnAttempt(t *testing.T) {
	hk := Hook{Event: "*", Command: []string{"/bin/sh", "-c", "exec sleep 30"}}
	key := adminTarget(hk, time.Second).key
	h := newHooks(deliveryStore{t: t, d: db.HookDelivery{ID: 1, EventID: "evt_1", Event: EventAgentEnd, HookKey: key, Body: "{}"}},
		Config{Hooks: HooksConfig{Hooks: []Hook{hk}, Timeout: 20 * time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the server stopping
	err := h.deliver(ctx, 1, true)
	var snooze *river.JobSnoozeError
	if !errors.As(err, &snooze) || snooze.Duration != 0 {
		t.Fatalf("the last attempt, cut short: %v (it would count, and the delivery be left without an outcome)", err)
	}
}
