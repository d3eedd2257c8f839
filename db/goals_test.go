package db_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

// agentThread is a thread of user with the agent on, its first run queued.
func agentThread(t *testing.T, store *db.DB, user int64, ws db.Workspace) db.Sent {
	t.Helper()
	return send(t, store, user, db.Send{WorkspaceID: ws.ID, Title: "t", Content: "hi", Kind: db.RouteAgent, SetAgent: true, Agent: true})
}

// complete ends a run of sent as completed.
func complete(t *testing.T, store *db.DB, sent db.Sent) {
	t.Helper()
	if _, err := store.FinishRun(context.Background(), sent.Run.ID, sent.Assistant.ID, db.Finish{RunStatus: db.RunCompleted, MsgStatus: db.MsgComplete, Content: "hello"}); err != nil {
		t.Fatal(err)
	}
}

func verdict(user, thread, run int64, met bool) db.GoalVerdict {
	return db.GoalVerdict{User: user, Thread: thread, Run: run, Met: met, Note: "note",
		Continue:    func(g db.Goal) string { return "Continue toward the goal: " + g.Text },
		StoppedNote: func(db.Goal) string { return "stopped" }, Route: db.Fixed(db.RouteAgent)}
}

// A goal is its thread owner's alone: every goal query of another user
// finds nothing and changes nothing.
func TestAGoalIsItsThreadOwnersAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	alice, aws := newUser(t, store, "goal-alice@example.com")
	bob, _ := newUser(t, store, "goal-bob@example.com")
	sent := agentThread(t, store, alice.ID, aws)
	complete(t, store, sent)
	th := sent.Thread.ID
	g, err := store.SetGoal(ctx, alice.ID, th, "ship it")
	if err != nil || g.Status != db.GoalActive || g.MaxRuns != db.DefaultGoalRuns || g.MaxTokens != db.DefaultGoalTokens || g.MaxSeconds != db.DefaultGoalSeconds {
		t.Fatalf("SetGoal = %+v %v", g, err)
	}
	five := 5
	checks := map[string]error{}
	_, checks["Goal"] = store.Goal(ctx, bob.ID, th)
	_, checks["SetGoal"] = store.SetGoal(ctx, bob.ID, th, "take over")
	_, checks["SetGoalBudget"] = store.SetGoalBudget(ctx, bob.ID, th, db.GoalBudget{Runs: &five})
	_, checks["PauseGoal"] = store.PauseGoal(ctx, bob.ID, th, "x")
	_, _, checks["ResumeGoal"] = store.ResumeGoal(ctx, bob.ID, th, func(db.Goal) string { return "x" }, db.Fixed(db.RouteAgent))
	checks["ClearGoal"] = store.ClearGoal(ctx, bob.ID, th)
	_, checks["GoalRunSettled"] = store.GoalRunSettled(ctx, db.GoalSettled{User: bob.ID, Thread: th, Run: sent.Run.ID, Status: db.RunCompleted})
	_, checks["ApplyGoalVerdict"] = store.ApplyGoalVerdict(ctx, verdict(bob.ID, th, sent.Run.ID, true))
	for name, err := range checks {
		if name == "ApplyGoalVerdict" {
			continue // answers "dropped", checked below
		}
		if !errors.Is(err, db.ErrNotFound) {
			t.Errorf("%s as another user: %v", name, err)
		}
	}
	after, err := store.Goal(ctx, alice.ID, th)
	if err != nil || after.Version != g.Version || after.Text != "ship it" || after.Status != db.GoalActive || after.MaxRuns != db.DefaultGoalRuns {
		t.Errorf("another user changed the goal: %+v %v", after, err)
	}
}

// Each settled run is claimed for judgement once, however many instances
// ask at once; a verdict queues one continuation (counted, marked, its run
// recorded) and is applied once; a verdict for a goal paused meanwhile is
// dropped.
func TestARunIsJudgedOnceAndItsVerdictAppliedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "goal-once@example.com")
	sent := agentThread(t, store, u.ID, ws)
	th, run := sent.Thread.ID, sent.Run.ID
	if _, err := store.GoalRunSettled(ctx, db.GoalSettled{User: u.ID, Thread: th, Run: run, Status: db.RunCompleted}); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a thread without a goal: %v", err)
	}
	if _, err := store.SetGoal(ctx, u.ID, th, "ship it"); err != nil {
		t.Fatal(err)
	}
	// A run that ended before the goal was set is not judged.
	early := agentThread(t, store, u.ID, ws)
	complete(t, store, early)
	if _, err := store.SetGoal(ctx, u.ID, early.Thread.ID, "ship it"); err != nil {
		t.Fatal(err)
	}
	if out, err := store.GoalRunSettled(ctx, db.GoalSettled{User: u.ID, Thread: early.Thread.ID, Run: early.Run.ID, Status: db.RunCompleted}); err != nil || out.Judge {
		t.Errorf("a run that ended before the goal was claimed: %+v %v", out, err)
	}
	complete(t, store, sent)
	var wg sync.WaitGroup
	var mu sync.Mutex
	judges := 0
	for range 4 {
		wg.Go(func() {
			out, err := store.GoalRunSettled(ctx, db.GoalSettled{User: u.ID, Thread: th, Run: run, Status: db.RunCompleted, Tokens: 100})
			if err != nil {
				t.Error(err)
				return
			}
			if out.Judge {
				mu.Lock()
				judges++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if judges != 1 {
		t.Fatalf("the run was claimed for judgement %d times, want 1", judges)
	}
	g, err := store.Goal(ctx, u.ID, th)
	if err != nil || !g.Checking || g.TokensUsed != 0 {
		t.Fatalf("after the claim: %+v %v (the user's own run's tokens do not count)", g, err)
	}
	out, err := store.ApplyGoalVerdict(ctx, verdict(u.ID, th, run, false))
	if err != nil || out.Result != db.GoalResultContinued || out.Sent == nil || out.Goal.RunsUsed != 1 ||
		out.Goal.ContinuationRunID == nil || *out.Goal.ContinuationRunID != out.Sent.Run.ID || out.Goal.Checking {
		t.Fatalf("verdict not met = %+v %v", out, err)
	}
	cont := out.Sent
	if cont.Run.Status != db.RunQueued || cont.Run.Kind != db.RouteAgent || cont.User.Content != "Continue toward the goal: ship it" ||
		cont.User.ParentID == nil || *cont.User.ParentID != sent.Assistant.ID {
		t.Errorf("the continuation: run %+v, message %+v", cont.Run, cont.User)
	}
	m, err := store.Message(ctx, u.ID, cont.User.ID)
	if err != nil || !strings.Contains(string(m.Metadata.Raw), `"goal_continuation": true`) {
		t.Errorf("the continuation is not marked: %s %v", m.Metadata.Raw, err)
	}
	if again, err := store.ApplyGoalVerdict(ctx, verdict(u.ID, th, run, false)); err != nil || again.Result != db.GoalResultDropped || again.Goal.RunsUsed != 1 {
		t.Errorf("the verdict applied twice: %+v %v", again, err)
	}

	// The continuation's tokens count against the budget.
	if _, err := store.FinishRun(ctx, cont.Run.ID, cont.Assistant.ID, db.Finish{RunStatus: db.RunCompleted, MsgStatus: db.MsgComplete}); err != nil {
		t.Fatal(err)
	}
	claim, err := store.GoalRunSettled(ctx, db.GoalSettled{User: u.ID, Thread: th, Run: cont.Run.ID, Status: db.RunCompleted, Tokens: 700})
	if err != nil || !claim.Judge || claim.Goal.TokensUsed != 700 {
		t.Fatalf("the continuation settled: %+v %v", claim, err)
	}
	if _, err := store.PauseGoal(ctx, u.ID, th, "Paused by you."); err != nil {
		t.Fatal(err)
	}
	if out, err := store.ApplyGoalVerdict(ctx, verdict(u.ID, th, cont.Run.ID, false)); err != nil || out.Result != db.GoalResultDropped || out.Goal.Status != db.GoalPaused {
		t.Errorf("a verdict after a pause: %+v %v", out, err)
	}
}

// The budget stops a goal (runs, then tokens), a continuation stopped
// while still queued reads as paused, and resuming needs room in the
// budget and queues a continuation when the thread is idle.
func TestTheBudgetStopsAGoalAndResumeNeedsRoom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "goal-budget@example.com")
	sent := agentThread(t, store, u.ID, ws)
	th := sent.Thread.ID
	if _, err := store.SetGoal(ctx, u.ID, th, "ship it"); err != nil {
		t.Fatal(err)
	}
	complete(t, store, sent)
	zero := 0
	if _, err := store.SetGoalBudget(ctx, u.ID, th, db.GoalBudget{Runs: &zero}); err != nil {
		t.Fatal(err)
	}
	if c, err := store.GoalRunSettled(ctx, db.GoalSettled{User: u.ID, Thread: th, Run: sent.Run.ID, Status: db.RunCompleted}); err != nil || !c.Judge {
		t.Fatalf("claim: %+v %v", c, err)
	}
	out, err := store.ApplyGoalVerdict(ctx, verdict(u.ID, th, sent.Run.ID, false))
	if err != nil || out.Result != db.GoalResultStopped || out.Goal.Status != db.GoalStopped || out.Goal.Note != "stopped" || out.Goal.EndedAt == nil || out.Sent != nil {
		t.Fatalf("a verdict at the budget: %+v %v", out, err)
	}
	content := func(g db.Goal) string { return "Continue toward the goal: " + g.Text }
	if _, _, err := store.ResumeGoal(ctx, u.ID, th, content, db.Fixed(db.RouteAgent)); !errors.Is(err, db.ErrGoalBudgetUsed) {
		t.Errorf("resume at the budget: %v", err)
	}
	one := 1
	if _, err := store.SetGoalBudget(ctx, u.ID, th, db.GoalBudget{Runs: &one}); err != nil {
		t.Fatal(err)
	}
	g, cont, err := store.ResumeGoal(ctx, u.ID, th, content, db.Fixed(db.RouteAgent))
	if err != nil || cont == nil || g.Status != db.GoalActive || g.RunsUsed != 1 || g.EndedAt != nil {
		t.Fatalf("resume: %+v %+v %v", g, cont, err)
	}
	// Stop before it started: the queued run is cancelled and never settles.
	if _, err := store.CancelRun(ctx, u.ID, cont.Run.ID); err != nil {
		t.Fatal(err)
	}
	if g, err = store.Goal(ctx, u.ID, th); err != nil || g.Status != db.GoalPaused || !strings.Contains(g.Note, "Stopped before it started") {
		t.Errorf("after stopping the queued continuation: %+v %v", g, err)
	}
	if _, _, err := store.ResumeGoal(ctx, u.ID, th, content, db.Fixed(db.RouteAgent)); !errors.Is(err, db.ErrGoalBudgetUsed) {
		t.Errorf("resume with its one run used: %v", err)
	}
	// Tokens: a continuation's usage past the budget stops the next verdict.
	three, tokens := 3, db.MinGoalTokens
	if _, err := store.SetGoalBudget(ctx, u.ID, th, db.GoalBudget{Runs: &three, Tokens: &tokens}); err != nil {
		t.Fatal(err)
	}
	if g, cont, err = store.ResumeGoal(ctx, u.ID, th, content, db.Fixed(db.RouteAgent)); err != nil || cont == nil || g.Status != db.GoalActive {
		t.Fatalf("resume after raising the budget: %+v %v", g, err)
	}
	if _, err := store.FinishRun(ctx, cont.Run.ID, cont.Assistant.ID, db.Finish{RunStatus: db.RunCompleted, MsgStatus: db.MsgComplete}); err != nil {
		t.Fatal(err)
	}
	if c, err := store.GoalRunSettled(ctx, db.GoalSettled{User: u.ID, Thread: th, Run: cont.Run.ID, Status: db.RunCompleted, Tokens: int64(tokens)}); err != nil || !c.Judge {
		t.Fatalf("claim: %+v %v", c, err)
	}
	if out, err := store.ApplyGoalVerdict(ctx, verdict(u.ID, th, cont.Run.ID, false)); err != nil || out.Result != db.GoalResultStopped || out.Goal.Exhausted() != "tokens" {
		t.Errorf("a verdict past the tokens: %+v %v", out, err)
	}
	if err := store.ClearGoal(ctx, u.ID, th); err != nil {
		t.Fatal(err)
	}
	if err := store.ClearGoal(ctx, u.ID, th); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("clearing twice: %v", err)
	}
}
