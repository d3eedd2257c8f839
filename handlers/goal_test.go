package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// goalEnv is an agent app whose fake model answers goal judgements with
// the verdicts a test gives, one per judgement in order (the last one
// repeats), and everything else as usual; continuations may be made to
// hang until stopped.
type goalEnv struct {
	*agentEnv
	mu       sync.Mutex
	verdicts []string
	judged   []string // the answers judged, in order
	hangCont bool
}

func newGoalEnv(t *testing.T, verdicts ...string) *goalEnv {
	t.Helper()
	g := &goalEnv{verdicts: verdicts}
	fake := fakeollama.New(t, fakeollama.WithScript(g.reply))
	g.agentEnv = newAgentEnv(t, testenv.Options{Fake: fake})
	return g
}

func isJudgement(req *api.ChatRequest) bool {
	return len(req.Messages) > 0 && req.Messages[0].Role == "system" && req.Messages[0].Content == chat.GoalJudgePrompt
}

func (g *goalEnv) reply(req *api.ChatRequest) fakeollama.Reply {
	g.mu.Lock()
	defer g.mu.Unlock()
	if isJudgement(req) {
		user := req.Messages[len(req.Messages)-1].Content
		_, answer, _ := strings.Cut(user, "The assistant's latest answer:\n")
		g.judged = append(g.judged, answer)
		v := g.verdicts[min(len(g.judged), len(g.verdicts))-1]
		return fakeollama.Reply{Chunks: []string{v}}
	}
	if g.hangCont && len(req.Tools) > 0 {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Role == "user" {
				if strings.HasPrefix(m.Content, "Continue toward the goal") {
					return fakeollama.Reply{Hang: true}
				}
				break
			}
		}
	}
	return fakeollama.DefaultReply(req)
}

func (g *goalEnv) judgedAnswers() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.judged...)
}

// goal waits until the thread's goal has status and returns it.
func (g *goalEnv) goalIs(thread int64, status string) db.Goal {
	g.t.Helper()
	var goal db.Goal
	var err error
	if !testwait.Until(20*time.Second, func() bool {
		goal, err = g.app.Store.Goal(context.Background(), g.user.ID, thread)
		return err == nil && goal.Status == status && !goal.Checking
	}) {
		g.t.Fatalf("goal of thread %d: %+v %v, want %s", thread, goal, err, status)
	}
	return goal
}

// continuations are the thread's goal continuations (user messages marked
// as such), oldest first.
func (g *goalEnv) continuations(thread int64) []db.Message {
	g.t.Helper()
	rows, err := g.app.Store.Pool.Query(context.Background(), `SELECT id FROM messages
		WHERE thread_id = $1 AND role = 'user' AND metadata @> '{"goal_continuation": true}' ORDER BY id`, thread)
	if err != nil {
		g.t.Fatal(err)
	}
	defer rows.Close()
	var out []db.Message
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			g.t.Fatal(err)
		}
		m, err := g.app.Store.Message(context.Background(), g.user.ID, id)
		if err != nil {
			g.t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func (g *goalEnv) runCount(thread int64) int {
	g.t.Helper()
	var n int
	if err := g.app.Store.Pool.QueryRow(context.Background(), "SELECT count(*) FROM runs WHERE thread_id = $1", thread).Scan(&n); err != nil {
		g.t.Fatal(err)
	}
	return n
}

// command types a slash command into the thread, expecting status.
func (g *goalEnv) command(thread int64, text string, status int) string {
	g.t.Helper()
	r := g.slash(thread, text)
	if r.StatusCode != status {
		g.t.Fatalf("%s: %d %s", text, r.StatusCode, r.Body)
	}
	return r.Body
}

var goalCheckEntries = regexp.MustCompile(`<code class="command-text">goal check</code>\s*<span class="command-reply">([^<]*)</span>`)

// notes are the goal's notes shown on the thread page, in order.
func (g *goalEnv) notes(thread int64) []string {
	g.t.Helper()
	var out []string
	for _, m := range goalCheckEntries.FindAllStringSubmatch(g.c.Get(fmt.Sprintf("/t/%d", thread)).Body, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

const notMet = `{"met": false, "reason": "the report is not written yet"}`

// The acceptance case of goal mode: with a budget of two continuation runs
// and a judge that never finds the goal met, the runtime continues exactly
// twice on its own — ordinary agent runs of the thread — and then stops at
// its budget, saying so in the thread and on the goal panel.
func TestAGoalContinuesTwiceThenStopsAtItsBudget(t *testing.T) {
	t.Parallel()
	e := newGoalEnv(t, notMet)
	thread := e.start("hello")
	e.finished(thread)
	body := e.command(thread, "/goal write the report", http.StatusOK)
	if !strings.Contains(body, "Goal set: write the report.") || !strings.Contains(body, `data-testid="goal" data-status="active"`) {
		t.Fatalf("/goal TEXT: %s", body)
	}
	if body := e.command(thread, "/goal budget runs=2", http.StatusOK); !strings.Contains(body, "Budget set: 2 continuation runs, 50000 tokens, 10 minutes") {
		t.Fatalf("/goal budget: %s", body)
	}
	e.send(thread, "start on the report")
	g := e.goalIs(thread, db.GoalStopped)
	e.finished(thread)

	conts := e.continuations(thread)
	if len(conts) != 2 || g.RunsUsed != 2 {
		t.Fatalf("%d continuations (runs used %d), want 2", len(conts), g.RunsUsed)
	}
	for _, m := range conts {
		if m.Content != "Continue toward the goal: write the report\n\nNot met yet: the report is not written yet" {
			t.Errorf("continuation message = %q", m.Content)
		}
	}
	// The first answer (before the goal), the user's run, two continuations.
	if n := e.runCount(thread); n != 4 {
		t.Errorf("%d runs in the thread, want 4", n)
	}
	last := e.lastRun(thread)
	if last.Kind != db.RouteAgent || last.Status != db.RunCompleted || last.UserMessageID == nil || *last.UserMessageID != conts[1].ID {
		t.Errorf("the last run is not the second continuation, completed by the agent: %+v", last)
	}
	// Three judgements, each of the answer just given: the user's run and
	// both continuations.
	judged := e.judgedAnswers()
	if len(judged) != 3 {
		t.Fatalf("%d judgements, want 3", len(judged))
	}
	if judged[0] != "You said: start on the report" || !strings.HasPrefix(judged[2], "You said: Continue toward the goal") {
		t.Errorf("judged answers = %q", judged)
	}
	if g.TokensUsed <= 0 {
		t.Errorf("the continuations' tokens were not counted: %d", g.TokensUsed)
	}
	notes := e.notes(thread)
	want := []string{
		"Not met yet: the report is not written yet Continuing on its own (continuation 1 of 2).",
		"Not met yet: the report is not written yet Continuing on its own (continuation 2 of 2).",
		"Not met yet: the report is not written yet Stopped: all 2 continuation runs of the budget are used. Raise the budget (/goal budget runs=N tokens=N minutes=N), then /goal resume.",
	}
	if strings.Join(notes, "\n") != strings.Join(want, "\n") {
		t.Errorf("goal notes in the thread:\n%s\nwant:\n%s", strings.Join(notes, "\n"), strings.Join(want, "\n"))
	}
	panel := e.c.Get(fmt.Sprintf("/t/%d/goal", thread)).Body
	if !strings.Contains(panel, `data-testid="goal" data-status="stopped"`) || !strings.Contains(panel, "Continuations 2 of 2") ||
		!strings.Contains(panel, "stopped at its budget") || strings.Contains(panel, "hx-trigger") {
		t.Errorf("the goal panel: %s", panel)
	}
	if body := e.command(thread, "/goal", http.StatusOK); !strings.Contains(body, "Goal (stopped): write the report. Used: 2 of 2 continuation runs") ||
		!strings.Contains(body, "left: 0 runs") {
		t.Errorf("/goal: %s", body)
	}
	// Resuming needs room in the budget.
	if body := e.command(thread, "/goal resume", http.StatusUnprocessableEntity); !strings.Contains(body, "budget is used up") {
		t.Errorf("/goal resume at the budget: %s", body)
	}
}

// A goal judged met after one continuation is marked met, says so, and
// nothing continues.
func TestAGoalMetAfterOneContinuationIsMarkedMet(t *testing.T) {
	t.Parallel()
	e := newGoalEnv(t, notMet, `Sure! {"met": true, "reason": "the report is written"}`)
	thread := e.start("hello")
	e.finished(thread)
	e.command(thread, "/goal write the report", http.StatusOK)
	e.send(thread, "start on the report")
	g := e.goalIs(thread, db.GoalMet)
	e.finished(thread)
	if n := len(e.continuations(thread)); n != 1 || g.RunsUsed != 1 {
		t.Fatalf("%d continuations (runs used %d), want 1", n, g.RunsUsed)
	}
	if n := len(e.judgedAnswers()); n != 2 {
		t.Errorf("%d judgements, want 2", n)
	}
	if n := e.runCount(thread); n != 3 {
		t.Errorf("%d runs, want 3", n)
	}
	notes := e.notes(thread)
	if len(notes) != 2 || !strings.HasSuffix(notes[0], "(continuation 1 of 3).") || notes[1] != "Goal met: the report is written" {
		t.Errorf("goal notes: %q", notes)
	}
	if panel := e.c.Get(fmt.Sprintf("/t/%d/goal", thread)).Body; !strings.Contains(panel, `data-status="met"`) || !strings.Contains(panel, "Goal met: the report is written") {
		t.Errorf("the goal panel: %s", panel)
	}
}

// An unreadable judgement counts as not met, with a note that says so.
func TestAnUnreadableJudgementCountsAsNotMet(t *testing.T) {
	t.Parallel()
	e := newGoalEnv(t, "I think it is probably fine", `{"met": true, "reason": "done"}`)
	thread := e.start("hello")
	e.finished(thread)
	e.command(thread, "/goal be done", http.StatusOK)
	e.send(thread, "go")
	e.goalIs(thread, db.GoalMet)
	conts := e.continuations(thread)
	if len(conts) != 1 || conts[0].Content != "Continue toward the goal: be done" {
		t.Fatalf("continuations after an unreadable verdict: %+v", conts)
	}
	if notes := e.notes(thread); len(notes) != 2 || notes[0] != "The goal check's answer could not be read, so it counts as not met. Continuing on its own (continuation 1 of 3)." {
		t.Errorf("goal notes: %q", notes)
	}
}

// /goal alone shows the goal and its budget; pause stops the checks (a
// run answered while paused is never judged), resume goes on at once with a
// continuation, clear removes the goal; budgets are bounded.
func TestGoalPauseResumeAndClear(t *testing.T) {
	t.Parallel()
	e := newGoalEnv(t, `{"met": true, "reason": "all done"}`)
	thread := e.start("hello")
	e.finished(thread)
	if body := e.command(thread, "/goal", http.StatusUnprocessableEntity); !strings.Contains(body, "This thread has no goal") {
		t.Errorf("/goal without a goal: %s", body)
	}
	e.command(thread, "/goal ship it", http.StatusOK)
	if body := e.command(thread, "/goal", http.StatusOK); !strings.Contains(body, "Goal (active): ship it. Used: 0 of 3 continuation runs, 0 of 50000 tokens, 0 of 10 minutes; left: 3 runs, 50000 tokens, 10 minutes.") {
		t.Errorf("/goal: %s", body)
	}
	if body := e.command(thread, "/goal budget runs=5 tokens=100000 minutes=20", http.StatusOK); !strings.Contains(body, "Budget set: 5 continuation runs, 100000 tokens, 20 minutes") {
		t.Errorf("/goal budget: %s", body)
	}
	for _, bad := range []string{"/goal budget runs=99", "/goal budget tokens=5", "/goal budget minutes=0", "/goal budget speed=3", "/goal budget runs"} {
		if body := e.command(thread, bad, http.StatusUnprocessableEntity); !strings.Contains(body, "runs 0 to 50") {
			t.Errorf("%s: %s", bad, body)
		}
	}
	if body := e.command(thread, "/goal "+strings.Repeat("x", db.MaxGoalRunes+1), http.StatusUnprocessableEntity); !strings.Contains(body, "at most 2000 characters") {
		t.Errorf("a long goal: %s", body)
	}

	if body := e.command(thread, "/goal pause", http.StatusOK); !strings.Contains(body, "Goal paused") || !strings.Contains(body, `data-status="paused"`) {
		t.Errorf("/goal pause: %s", body)
	}
	e.command(thread, "/goal pause", http.StatusUnprocessableEntity)
	e.send(thread, "an answer while paused")
	paused, _ := e.finished(thread)

	r := e.slash(thread, "/goal resume")
	if r.StatusCode != http.StatusNoContent || r.Header.Get("HX-Redirect") == "" {
		t.Fatalf("/goal resume: %d %s", r.StatusCode, r.Body)
	}
	g := e.goalIs(thread, db.GoalMet)
	conts := e.continuations(thread)
	if len(conts) != 1 || g.RunsUsed != 1 || conts[0].Content != "Continue toward the goal: ship it" || *conts[0].ParentID != *paused.AssistantMessageID {
		t.Fatalf("resume did not continue once from the last answer: %+v (runs used %d)", conts, g.RunsUsed)
	}
	for _, a := range e.judgedAnswers() {
		if strings.Contains(a, "an answer while paused") {
			t.Errorf("the answer given while paused was judged")
		}
	}
	if n := len(e.judgedAnswers()); n != 1 {
		t.Errorf("%d judgements, want 1 (the continuation's)", n)
	}
	if body := e.command(thread, "/goal resume", http.StatusUnprocessableEntity); !strings.Contains(body, "The goal is met") {
		t.Errorf("/goal resume of a met goal: %s", body)
	}
	if body := e.command(thread, "/goal clear", http.StatusOK); !strings.Contains(body, "Goal cleared") || strings.Contains(body, `data-testid="goal"`) {
		t.Errorf("/goal clear: %s", body)
	}
	if _, err := e.app.Store.Goal(context.Background(), e.user.ID, thread); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("the goal after /goal clear: %v", err)
	}
	if panel := e.c.Get(fmt.Sprintf("/t/%d/goal", thread)).Body; strings.Contains(panel, `data-testid="goal"`) {
		t.Errorf("the panel shows a cleared goal: %s", panel)
	}
	// The commands stay in the thread like every command.
	if page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body; !strings.Contains(page, "/goal pause") || !strings.Contains(page, "Goal paused") {
		t.Errorf("the thread page lacks the /goal command entries")
	}
}

// The goal panel's controls: the budget form, pause and resume, with the
// poll answering 204 while nothing changed.
func TestTheGoalPanelChangesTheBudgetAndPausesAndResumes(t *testing.T) {
	t.Parallel()
	e := newGoalEnv(t, notMet)
	thread := e.start("hello")
	e.finished(thread)
	e.command(thread, "/goal tidy up", http.StatusOK)
	path := fmt.Sprintf("/t/%d/goal", thread)
	g, err := e.app.Store.Goal(context.Background(), e.user.ID, thread)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.c.Get(fmt.Sprintf("%s?v=%d", path, g.Version)); r.StatusCode != http.StatusNoContent {
		t.Errorf("a poll with nothing changed: %d", r.StatusCode)
	}
	r := e.c.HTMX(path, url.Values{"action": {"budget"}, "runs": {"4"}, "tokens": {"20000"}, "minutes": {"15"}})
	if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "Continuations 0 of 4 · tokens 0 of 20000 · 0 of 15 minutes") {
		t.Fatalf("budget form: %d %s", r.StatusCode, r.Body)
	}
	if r := e.c.Get(fmt.Sprintf("%s?v=%d", path, g.Version)); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "of 4") {
		t.Errorf("a poll after a change: %d %s", r.StatusCode, r.Body)
	}
	r = e.c.HTMX(path, url.Values{"action": {"budget"}, "runs": {"4"}, "tokens": {"12"}, "minutes": {"15"}})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, `data-testid="error"`) || !strings.Contains(r.Body, "tokens 1,000 to 10,000,000") {
		t.Errorf("a bad budget: %d %s", r.StatusCode, r.Body)
	}
	if r := e.c.HTMX(path, url.Values{"action": {"pause"}}); !strings.Contains(r.Body, `data-status="paused"`) || !strings.Contains(r.Body, `data-testid="goal-resume"`) {
		t.Errorf("pause: %d %s", r.StatusCode, r.Body)
	}
	// Resuming an idle agent thread starts a continuation: the page reloads.
	r = e.c.HTMX(path, url.Values{"action": {"resume"}})
	if r.StatusCode != http.StatusNoContent || r.Header.Get("HX-Refresh") != "true" {
		t.Fatalf("resume: %d %q %s", r.StatusCode, r.Header.Get("HX-Refresh"), r.Body)
	}
	if n := len(e.continuations(thread)); n != 1 {
		t.Errorf("%d continuations after resume, want 1", n)
	}
	if r := e.c.Post(path, url.Values{"action": {"clear"}}); r.StatusCode != http.StatusSeeOther {
		t.Errorf("clear without htmx: %d", r.StatusCode)
	}
}

// Stop on a continuation pauses the goal: no further check, no further
// continuation, and the thread and the panel say so.
func TestStopOnAContinuationPausesTheGoal(t *testing.T) {
	t.Parallel()
	e := newGoalEnv(t, notMet)
	e.hangCont = true
	thread := e.start("hello")
	e.finished(thread)
	e.command(thread, "/goal write the report", http.StatusOK)
	e.send(thread, "start on the report")
	var cont db.Run
	testwait.For(t, "a continuation running", 20*time.Second, func() bool {
		cont = e.lastRun(thread)
		if cont.Status != db.RunRunning || cont.UserMessageID == nil {
			return false
		}
		m, err := e.app.Store.Message(context.Background(), e.user.ID, *cont.UserMessageID)
		return err == nil && strings.HasPrefix(m.Content, "Continue toward the goal")
	})
	if err := e.app.Fake.WaitFor(t.Context(), func(recs []fakeollama.Recorded) bool {
		for _, r := range recs {
			if r.Chat != nil && len(r.Chat.Tools) > 0 && strings.HasPrefix(r.Chat.Messages[len(r.Chat.Messages)-1].Content, "Continue toward") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if r := e.c.Post(fmt.Sprintf("/runs/%d/cancel", cont.ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("stop: %d", r.StatusCode)
	}
	g := e.goalIs(thread, db.GoalPaused)
	run, _ := e.finished(thread)
	if run.ID != cont.ID || run.Status != db.RunCancelled {
		t.Errorf("the last run is %d %s, want the stopped continuation %d", run.ID, run.Status, cont.ID)
	}
	if g.RunsUsed != 1 || len(e.continuations(thread)) != 1 || len(e.judgedAnswers()) != 1 {
		t.Errorf("after Stop: runs used %d, %d continuations, %d judgements", g.RunsUsed, len(e.continuations(thread)), len(e.judgedAnswers()))
	}
	if g.Note != "Stopped: the goal is paused. /goal resume goes on." {
		t.Errorf("note = %q", g.Note)
	}
	notes := e.notes(thread)
	if len(notes) != 2 || notes[1] != g.Note {
		t.Errorf("goal notes: %q", notes)
	}
	if panel := e.c.Get(fmt.Sprintf("/t/%d/goal", thread)).Body; !strings.Contains(panel, `data-status="paused"`) {
		t.Errorf("the panel: %s", panel)
	}
}

// Another user can neither see nor change a goal: every goal route and the
// /goal command answer 404, and the goal stays as it was.
func TestAnotherUserCannotSeeOrChangeAGoal(t *testing.T) {
	t.Parallel()
	e := newGoalEnv(t, notMet)
	thread := e.start("hello")
	e.finished(thread)
	e.command(thread, "/goal keep it secret", http.StatusOK)
	before, err := e.app.Store.Goal(context.Background(), e.user.ID, thread)
	if err != nil {
		t.Fatal(err)
	}
	other := testenv.NewClient(t, e.app.TS.URL)
	other.Register("intruder@example.com", password)
	path := fmt.Sprintf("/t/%d/goal", thread)
	for _, r := range []testenv.Response{
		other.Get(path),
		other.Get(path + "?v=1"),
		other.Post(path, url.Values{"action": {"clear"}}),
		other.HTMX(path, url.Values{"action": {"pause"}}),
		other.Post(path, url.Values{"action": {"budget"}, "runs": {"50"}, "tokens": {"10000000"}, "minutes": {"1440"}}),
		other.HTMX(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"/goal clear"}}),
		other.HTMX(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"/goal"}}),
		other.HTMX(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"/goal take over"}}),
	} {
		if r.StatusCode != http.StatusNotFound || strings.Contains(r.Body, "keep it secret") {
			t.Errorf("%s %s as another user: %d", r.Request.Method, r.Request.URL.Path, r.StatusCode)
		}
	}
	after, err := e.app.Store.Goal(context.Background(), e.user.ID, thread)
	if err != nil || after.Version != before.Version || after.Text != "keep it secret" || after.Status != db.GoalActive {
		t.Errorf("the goal changed: %+v %v", after, err)
	}
}
