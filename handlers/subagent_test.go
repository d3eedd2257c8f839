package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"weft/agent"
	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// delegation is a parent message whose first round delegates tasks (each
// task's own directives drive its sub-agent in the fake).
func delegation(tool string, tasks ...map[string]any) string {
	var args []byte
	if tool == agent.ToolDelegateTask {
		args, _ = json.Marshal(tasks[0])
	} else {
		args, _ = json.Marshal(map[string]any{"tasks": tasks})
	}
	return fmt.Sprintf("Split the work. [[tool:%s %s]]", tool, args)
}

// subRuns are the sub-agents of a run, in order.
func (e *agentEnv) subRuns(run int64) []db.SubRun {
	e.t.Helper()
	var out []db.SubRun
	for _, s := range e.steps(run) {
		out = append(out, s.Subagents...)
	}
	return out
}

func TestAParallelDelegationRunsTwoChildrenWithTheirOwnRunsStepsAndApprovals(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	thread := e.start(delegation(agent.ToolDelegateParallel,
		map[string]any{"task": `Read the notes. [[tool:list_files {"path":"."}]]`},
		map[string]any{"task": `Write the report. [[tool:write_file {"path":"report.txt","content":"R"}]]`, "tools": []string{"write_file"}},
	))
	// The second child's write asks first (write_file asks by default):
	// the approval is the child's, and the parent shows as waiting.
	var parent db.Run
	var ap db.Step
	if !testwait.Until(20*time.Second, func() bool {
		parent = e.lastRun(thread)
		for _, c := range e.subRuns(parent.ID) {
			for _, s := range c.Steps {
				if s.Kind == db.StepApproval && s.Status == db.StepPending {
					ap = s
					return true
				}
			}
		}
		if !parent.Active() {
			t.Fatalf("the parent ended %s (%s): %s", parent.Status, parent.Error, e.describe(parent.ID))
		}
		return false
	}) {
		t.Fatalf("no sub-agent asked for approval: %s", e.describe(parent.ID))
	}
	subs := e.subRuns(parent.ID)
	if len(subs) != 2 || subs[0].Sub.Index != 0 || subs[1].Sub.Index != 1 {
		t.Fatalf("sub-agents = %+v", subs)
	}
	if ap.RunID != subs[1].ID || ap.Data.Tool != "write_file" {
		t.Fatalf("the approval is run %d's for %s; want the second child's (%d) write_file", ap.RunID, ap.Data.Tool, subs[1].ID)
	}
	if _, ok := e.file("report.txt"); ok {
		t.Fatal("the child wrote before its approval")
	}
	// A child is a run of its own: parent, user, thread, model.
	child, err := e.app.Store.Run(context.Background(), e.user.ID, subs[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if child.ParentRunID == nil || *child.ParentRunID != parent.ID || child.ThreadID != thread || child.Model != parent.Model ||
		child.AssistantMessageID != nil || child.Kind != db.RouteAgent {
		t.Fatalf("child run = %+v (parent %d)", child, parent.ID)
	}
	// The page (a reload in the middle of the delegation) shows both
	// cards, the waiting one naming itself on its approval.
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	if n := strings.Count(page, `data-testid="subagent"`); n != 2 {
		t.Fatalf("the page shows %d sub-agent cards, want 2", n)
	}
	if !strings.Contains(page, `Sub-agent 2 of 2 asks for your decision`) || !strings.Contains(page, fmt.Sprintf(`data-step-id="%d"`, ap.ID)) {
		t.Error("the waiting sub-agent's card does not carry its named approval")
	}
	if parent.Status != db.RunRunning && parent.Status != db.RunWaiting {
		t.Errorf("parent status %s", parent.Status)
	}
	// /status names the child's pending approval.
	e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"/status"}})
	if page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body; !strings.Contains(page, "Sub-agent 2 of 2 waits for your approval: write_file") {
		t.Error("/status does not name the sub-agent's pending approval")
	}
	if r := e.c.Post(fmt.Sprintf("/steps/%d/decide", ap.ID), url.Values{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d %s", r.StatusCode, r.Body)
	}
	r, m := e.finished(thread)
	if r.ID != parent.ID || r.Status != db.RunCompleted {
		t.Fatalf("parent %s (%s): %s", r.Status, r.Error, e.describe(r.ID))
	}
	subs = e.subRuns(parent.ID)
	for i, c := range subs {
		if c.Status != db.RunCompleted || !strings.HasPrefix(c.Sub.Answer, "Done after 1 tool rounds") || c.Sub.Rounds != 1 {
			t.Errorf("child %d: %s %q rounds %d (%s)", i, c.Status, c.Sub.Answer, c.Sub.Rounds, c.Error)
		}
		if len(c.Steps) == 0 || c.Usage.PromptTokens == 0 || c.StartedAt == nil || c.FinishedAt == nil {
			t.Errorf("child %d has no steps or usage: %+v", i, c)
		}
	}
	if !strings.Contains(subs[1].Sub.Summary, "used write_file") || len(subs[1].Sub.Changes) != 1 {
		t.Errorf("second child's evidence: %q %+v", subs[1].Sub.Summary, subs[1].Sub.Changes)
	}
	if got, ok := e.file("report.txt"); !ok || got != "R" {
		t.Errorf("report.txt = %q %v", got, ok)
	}
	// The parent got both results as its tool result, and its evidence
	// lists the file the child changed.
	var result string
	for _, s := range e.steps(parent.ID) {
		if s.Kind == db.StepToolCall && s.Data.Tool == agent.ToolDelegateParallel {
			result = s.Data.Output
		}
	}
	for _, want := range []string{"## Sub-agent 1 of 2", "## Sub-agent 2 of 2", "Status: completed", "Files changed: created report.txt"} {
		if !strings.Contains(result, want) {
			t.Errorf("the parent's tool result lacks %q:\n%s", want, result)
		}
	}
	if !strings.Contains(string(m.Metadata.Raw), `"path": "report.txt"`) {
		t.Errorf("the answer's evidence does not list report.txt: %s", m.Metadata.Raw)
	}
	// Each child's request had its task alone: not the thread's turns.
	var childReqs int
	for _, rec := range trStreamed(e.app.Fake) {
		msgs := rec.Chat.Messages
		if len(msgs) > 0 && strings.Contains(msgs[0].Content, "You are a sub-agent") {
			childReqs++
			for _, mm := range msgs {
				if mm.Role == "user" && strings.Contains(mm.Content, "Split the work") {
					t.Errorf("a child's request carries the thread's turn: %q", mm.Content)
				}
			}
			// The second child was only given write_file; no child may
			// delegate.
			for _, tl := range rec.Chat.Tools {
				if strings.HasPrefix(tl.Function.Name, "delegate_") {
					t.Errorf("a child was offered %s", tl.Function.Name)
				}
			}
		}
	}
	if childReqs != 4 { // two rounds each
		t.Errorf("%d child requests, want 4", childReqs)
	}
	// A second tab (another read of the page) replays the same cards, now
	// completed, with the children's answers.
	page = e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	if n := strings.Count(page, `data-testid="subagent" data-status="completed"`); n != 2 {
		t.Errorf("the reloaded page shows %d completed sub-agents, want 2", n)
	}
	if n := strings.Count(page, `data-testid="subagent-answer"`); n != 2 {
		t.Errorf("the reloaded page shows %d sub-agent answers, want 2", n)
	}
	// A later message's request never carries the children's own turns.
	e.send(thread, "thanks")
	e.finished(thread)
	reqs := trStreamed(e.app.Fake)
	last := reqs[len(reqs)-1].Chat
	for _, mm := range last.Messages {
		if strings.Contains(mm.Content, "You are a sub-agent") || mm.Role == "tool" {
			t.Errorf("a later request carries a sub-agent's context: %q", mm.Content)
		}
	}
	// Only the parent counts as an answer; the thread's usage includes
	// the children's tokens.
	u, err := e.app.Store.ThreadUsage(context.Background(), e.user.ID, thread)
	if err != nil {
		t.Fatal(err)
	}
	if u.Answers != 2 {
		t.Errorf("thread answers = %d, want 2", u.Answers)
	}
}

func TestASubAgentCannotWidenItsToolsOrDelegateAndStopCancelsEveryChild(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	// fetch_url is off in this workspace: a task asking for it is
	// refused before any child starts.
	thread := e.start(delegation(agent.ToolDelegateTask, map[string]any{"task": "Fetch it.", "tools": []string{"fetch_url"}}))
	r, _ := e.finished(thread)
	var call db.Step
	for _, s := range e.steps(r.ID) {
		if s.Kind == db.StepToolCall && s.Data.Tool == agent.ToolDelegateTask {
			call = s
		}
	}
	if call.Status != db.StepError || !strings.Contains(call.Data.Error, `asks for the tool "fetch_url", which you cannot use here`) {
		t.Errorf("widening call: %s %q", call.Status, call.Data.Error)
	}
	if len(call.Subagents) != 0 {
		t.Errorf("a refused delegation started %d sub-agents", len(call.Subagents))
	}
	// An empty tools list is refused too (not read as "every tool").
	e.send(thread, delegation(agent.ToolDelegateTask, map[string]any{"task": "Nothing.", "tools": []string{}}))
	r, _ = e.finished(thread)
	for _, s := range e.steps(r.ID) {
		if s.Kind == db.StepToolCall && s.Data.Tool == agent.ToolDelegateTask &&
			(s.Status != db.StepError || !strings.Contains(s.Data.Error, "tools is empty") || len(s.Subagents) != 0) {
			t.Errorf("empty tools: %s %q (%d children)", s.Status, s.Data.Error, len(s.Subagents))
		}
	}

	// A child that tries to delegate is refused (one level deep); Stop
	// while two children hang cancels both, and the parent.
	e.allow(agent.ToolDelegateParallel, agent.ModeAuto)
	hang := map[string]any{"task": "Think long. [[hang]]"}
	nested := map[string]any{"task": `Delegate again. [[tool:delegate_task {"task":"deeper"}]]`}
	e.send(thread, delegation(agent.ToolDelegateParallel, nested, hang, hang))
	var parent db.Run
	if !testwait.Until(20*time.Second, func() bool {
		parent = e.lastRun(thread)
		subs := e.subRuns(parent.ID)
		if len(subs) != 3 {
			return false
		}
		// The first child finished (refused, then answered); the two
		// hanging ones are working (concurrency 2), their model requests
		// open.
		open := 0
		for _, rec := range e.app.Fake.Requests() {
			if rec.Chat != nil && len(rec.Chat.Messages) > 1 && strings.Contains(rec.Chat.Messages[0].Content, "You are a sub-agent") &&
				strings.Contains(rec.Chat.Messages[len(rec.Chat.Messages)-1].Content, "Think long") {
				open++
			}
		}
		return subs[0].Status == db.RunCompleted && subs[1].StartedAt != nil && subs[2].StartedAt != nil && open == 2
	}) {
		t.Fatalf("children never reached the hanging state: %+v", e.subRuns(parent.ID))
	}
	subs := e.subRuns(parent.ID)
	var refused bool
	for _, s := range subs[0].Steps {
		if s.Kind == db.StepToolCall && s.Data.Tool == agent.ToolDelegateTask && s.Status == db.StepRefused &&
			strings.Contains(s.Data.Reason, "one level deep") {
			refused = true
		}
		if len(s.Subagents) > 0 {
			t.Error("a sub-agent delegated")
		}
	}
	if !refused {
		t.Errorf("the nested delegation was not refused: %+v", subs[0].Steps)
	}
	if r := e.c.Post(fmt.Sprintf("/runs/%d/cancel", parent.ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("stop: %d", r.StatusCode)
	}
	r, _ = e.finished(thread)
	if r.Status != db.RunCancelled {
		t.Errorf("parent %s", r.Status)
	}
	// Another user reads none of it: not the steps, not the children.
	other := agentEnvOn(t, e.app.Store, testenv.Options{Fake: e.app.Fake}, "other@example.com", true)
	if steps, err := e.app.Store.Steps(context.Background(), other.user.ID, parent.ID); err != nil || len(steps) != 0 {
		t.Errorf("another user reads %d steps (%v)", len(steps), err)
	}
	for _, c := range e.subRuns(parent.ID) {
		if _, err := e.app.Store.Run(context.Background(), other.user.ID, c.ID); err == nil {
			t.Errorf("another user reads child run %d", c.ID)
		}
		if steps, _ := e.app.Store.Steps(context.Background(), other.user.ID, c.ID); len(steps) != 0 {
			t.Errorf("another user reads child run %d's steps", c.ID)
		}
	}
	for i, c := range e.subRuns(parent.ID)[1:] {
		if c.Status != db.RunCancelled {
			t.Errorf("hanging child %d is %s after Stop", i+1, c.Status)
		}
	}
	// The model requests of both hanging children were cancelled.
	cancelled := 0
	if !testwait.Until(10*time.Second, func() bool {
		cancelled = 0
		for _, rec := range e.app.Fake.Requests() {
			if rec.Cancelled && rec.Chat != nil && len(rec.Chat.Messages) > 1 && strings.Contains(rec.Chat.Messages[0].Content, "You are a sub-agent") &&
				strings.Contains(rec.Chat.Messages[len(rec.Chat.Messages)-1].Content, "Think long") {
				cancelled++
			}
		}
		return cancelled == 2
	}) {
		t.Errorf("%d hanging child requests were cancelled, want 2", cancelled)
	}
}

func TestASubAgentsTextIsSavedLiveWhileItWorksAndItsAnswerReturns(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	thread := e.start(delegation(agent.ToolDelegateTask, map[string]any{"task": "Tell a story. [[tokens:40]] [[slow:100ms]]"}))
	var parent db.Run
	var live string
	if !testwait.Until(20*time.Second, func() bool {
		parent = e.lastRun(thread)
		subs := e.subRuns(parent.ID)
		if len(subs) == 1 && subs[0].Status == db.RunRunning {
			live = subs[0].Sub.Live
		}
		return strings.HasPrefix(live, "tok1 ")
	}) {
		t.Fatalf("the child's live text never showed: %+v", e.subRuns(parent.ID))
	}
	// The page shows it on the child's card while it works.
	if page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body; !strings.Contains(page, `data-testid="subagent-live"`) {
		t.Error("the page does not show the working child's text")
	}
	r, _ := e.finished(thread)
	subs := e.subRuns(r.ID)
	if r.Status != db.RunCompleted || len(subs) != 1 || subs[0].Sub.Live != "" || !strings.Contains(subs[0].Sub.Answer, "tok40") {
		t.Fatalf("parent %s, child %+v", r.Status, subs)
	}
	if page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body; strings.Contains(page, `data-testid="subagent-live"`) {
		t.Error("a finished child still shows live text")
	}
}
