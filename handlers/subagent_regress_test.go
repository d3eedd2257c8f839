package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"weft/agent"
	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// A child that spends its time budget working fails with that reason and
// its parent goes on to answer; a child waiting for its user's decision
// does not spend its budget: it still waits after the budget's time, and
// Stop then cancels it, leaving no running or pending step and the parent
// not shown waiting.
func TestASubAgentsTimeBudgetCountsWorkNotTheUsersDecision(t *testing.T) {
	t.Parallel()
	const budget = time.Second
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{SubagentTime: budget}})
	thread := e.start(delegation(agent.ToolDelegateTask, map[string]any{"task": "Think forever. [[hang]]"}))
	r, _ := e.finished(thread)
	subs := e.subRuns(r.ID)
	if r.Status != db.RunCompleted || len(subs) != 1 || subs[0].Status != db.RunFailed || !strings.Contains(subs[0].Error, "time budget") {
		t.Fatalf("parent %s, children %+v", r.Status, subs)
	}

	e.send(thread, delegation(agent.ToolDelegateTask, map[string]any{"task": `Write. [[tool:write_file {"path":"a.txt","content":"x"}]]`}))
	var parent db.Run
	var child db.SubRun
	var since time.Time
	// Observed for twice the budget while the approval waits.
	if !testwait.Until(30*time.Second, func() bool {
		parent = e.lastRun(thread)
		cs := e.subRuns(parent.ID)
		if len(cs) != 1 {
			return false
		}
		child = cs[0]
		if child.Status != db.RunWaiting {
			if child.Status != db.RunRunning {
				t.Fatalf("the waiting child ended %s: %s", child.Status, child.Error)
			}
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) > 2*budget
	}) {
		t.Fatalf("the child never waited: %+v", child)
	}
	if snap, _, unsub, ok := e.app.RT.Subscribe(parent.ID); !ok || snap.Status != db.RunWaiting {
		t.Errorf("the parent is not shown waiting while its child waits (%v %q)", ok, snap.Status)
	} else {
		unsub()
	}
	if r := e.c.Post(fmt.Sprintf("/runs/%d/cancel", parent.ID), nil); r.StatusCode != 303 {
		t.Fatalf("stop: %d", r.StatusCode)
	}
	r, _ = e.finished(thread)
	if r.Status != db.RunCancelled {
		t.Errorf("parent %s", r.Status)
	}
	for _, c := range e.subRuns(parent.ID) {
		if c.Status != db.RunCancelled {
			t.Errorf("child %s after Stop", c.Status)
		}
		for _, s := range c.Steps {
			if s.Status == db.StepRunning || s.Status == db.StepPending {
				t.Errorf("child %d keeps a %s %s step after it ended", c.ID, s.Status, s.Kind)
			}
		}
	}
	if page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body; strings.Contains(page, "running…") {
		t.Errorf("the finished page still shows a running… step")
	}
}

// Children start in task order (with one slot: one after the other).
func TestChildrenStartInTaskOrder(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{SubagentConcurrency: 1}})
	var tasks []map[string]any
	for i := range 6 {
		tasks = append(tasks, map[string]any{"task": fmt.Sprintf("Task %d.", i)})
	}
	thread := e.start(delegation(agent.ToolDelegateParallel, tasks...))
	r, _ := e.finished(thread)
	subs := e.subRuns(r.ID)
	if len(subs) != 6 {
		t.Fatalf("%d subs", len(subs))
	}
	for i := 1; i < len(subs); i++ {
		if subs[i].StartedAt.Before(*subs[i-1].StartedAt) {
			var order []string
			for _, s := range subs {
				order = append(order, fmt.Sprintf("%d@%s", s.Sub.Index, s.StartedAt.Format("05.000000")))
			}
			t.Fatalf("children did not start in task order: %s", strings.Join(order, " "))
		}
	}
}

// A graceful shutdown while a read-only child works: the resumed parent
// does not delegate again under the same tool call (its card keeps one
// batch), it reports the delegation's outcome as unknown.
func TestAResumedParentNeverDelegatesAgainUnderTheSameCall(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	o := testenv.Options{DefaultModel: "toolie", Agent: agent.Config{DataDir: t.TempDir()}}
	o.Chat.Instance = "rev1-" + t.Name()
	first := agentEnvOn(t, store, o, "rev1@example.com", true)
	thread := first.start(delegation(agent.ToolDelegateTask, map[string]any{"task": "Think long. [[hang]]"}))
	var parent db.Run
	if !testwait.Until(20*time.Second, func() bool {
		parent = first.lastRun(thread)
		subs := first.subRuns(parent.ID)
		return len(subs) == 1 && subs[0].StartedAt != nil && subs[0].Sub.Live != ""
	}) {
		t.Fatal("child never worked")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	first.app.RT.Shutdown(ctx)
	cancel()
	if r := first.lastRun(thread); r.Status != db.RunInterrupted {
		t.Fatalf("parent %s", r.Status)
	}
	o.Fake = first.app.Fake
	second := agentEnvOn(t, store, o, "rev1@example.com", false)
	if r := second.c.Post(fmt.Sprintf("/runs/%d/resume", parent.ID), nil); r.StatusCode != 303 {
		t.Fatalf("resume: %d %s", r.StatusCode, r.Body)
	}
	// The resumed child hangs again; look at the card meanwhile.
	var subs []db.SubRun
	testwait.Until(10*time.Second, func() bool {
		subs = second.subRuns(parent.ID)
		return len(subs) >= 2
	})
	page := second.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	n := strings.Count(page, `data-testid="subagent"`)
	var st []string
	for _, s := range subs {
		st = append(st, fmt.Sprintf("run %d index %d %s", s.ID, s.Sub.Index, s.Status))
	}
	if len(subs) != 1 || n != 1 {
		t.Errorf("one task delegated, but the call carries %d children (%s) and the page %d cards", len(subs), strings.Join(st, "; "), n)
	}
	second.c.Post(fmt.Sprintf("/runs/%d/cancel", parent.ID), nil)
	second.finished(thread)
}

// A child row left active after its parent ended (its result could not
// be recorded) never blocks the thread's later runs.
func TestAChildRowLeftActiveNeverBlocksTheThread(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	thread := e.start(delegation(agent.ToolDelegateTask, map[string]any{"task": "Quick."}))
	r, _ := e.finished(thread)
	subs := e.subRuns(r.ID)
	if len(subs) != 1 {
		t.Fatalf("%d subs", len(subs))
	}
	// What a failed FinishSubRun leaves.
	if _, err := e.app.Store.Pool.Exec(context.Background(), "UPDATE runs SET status = 'running', finished_at = NULL WHERE id = $1", subs[0].ID); err != nil {
		t.Fatal(err)
	}
	e.send(thread, "next")
	if !testwait.Until(8*time.Second, func() bool {
		lr := e.lastRun(thread)
		return lr.ID != r.ID && lr.Status != db.RunQueued
	}) {
		t.Errorf("the next run of the thread stays queued behind a stale child row")
	}
}
