package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"weft/agent"
	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// hookReceiver is an HTTP hook's receiver: it keeps every request, and
// answers what answer returns (nil: 200 with an empty body).
type hookReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []hookRequest
	seen int
}

type hookRequest struct {
	header http.Header
	body   []byte
	p      agent.HookPayload
}

func newHookReceiver(t *testing.T, answer func(n int, r hookRequest, w http.ResponseWriter)) *hookReceiver {
	t.Helper()
	rec := &hookReceiver{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hr := hookRequest{header: r.Header.Clone(), body: body}
		if err := json.Unmarshal(body, &hr.p); err != nil {
			t.Errorf("a delivery that is not a JSON payload: %s", body)
		}
		rec.mu.Lock()
		rec.got = append(rec.got, hr)
		rec.seen++
		n := rec.seen
		rec.mu.Unlock()
		if answer != nil {
			answer(n, hr, w)
		}
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *hookReceiver) requests() []hookRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]hookRequest(nil), rec.got...)
}

func (rec *hookReceiver) payloads() []agent.HookPayload {
	var out []agent.HookPayload
	for _, r := range rec.requests() {
		out = append(out, r.p)
	}
	return out
}

// commandPayloads reads what a command hook (`cat > DIR/$$.json`) wrote.
func commandPayloads(t *testing.T, dir string) []agent.HookPayload {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []agent.HookPayload
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p agent.HookPayload
		if json.Unmarshal(b, &p) == nil { // a file still being written is read next time
			out = append(out, p)
		}
	}
	return out
}

func hasEvent(ps []agent.HookPayload, event string) bool {
	for _, p := range ps {
		if p.Event == event {
			return true
		}
	}
	return false
}

// byEvent counts the distinct event ids per event.
func byEvent(ps []agent.HookPayload) map[string]int {
	ids := map[string]bool{}
	n := map[string]int{}
	for _, p := range ps {
		if !ids[p.ID] {
			ids[p.ID] = true
			n[p.Event]++
		}
	}
	return n
}

// progressTool reports its progress once, as a long command does.
type progressTool struct{}

func (progressTool) Tools() []agent.Tool {
	return []agent.Tool{{Name: "long_job", Description: "Runs a long job.", Class: agent.ClassRead,
		Run: func(ctx context.Context, env *agent.Env, args agent.Args) (agent.Result, error) {
			if env.Progress != nil {
				env.Progress("half way")
			}
			return agent.Result{Output: "finished"}, nil
		}}}
}

// addHook adds a workspace hook on /tools/hooks and returns its secret.
func (e *agentEnv) addHook(event, u string) string {
	e.t.Helper()
	r := e.c.Post("/tools/hooks", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "event": {event}, "url": {u}, "timeout": {"5"}})
	m := regexp.MustCompile(`data-testid="hook-secret" data-hook-id="\d+">([^<]+)<`).FindStringSubmatch(r.Body)
	if r.StatusCode != http.StatusOK || m == nil {
		e.t.Fatalf("add a hook: %d %s", r.StatusCode, r.Body)
	}
	return m[1]
}

func TestHooksReceiveEveryEventOfARunWithItsIDsAndASignature(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := newHookReceiver(t, nil)
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{Hooks: agent.HooksConfig{
		Hooks: []agent.Hook{{Event: "*", Command: []string{"/bin/sh", "-c", `cat > "$0/$$.json"`, dir}}},
		Allow: []string{"127.0.0.1"}, RetryBackoff: 20 * time.Millisecond}}})
	e.app.Agent.AddProvider(progressTool{})
	secret := e.addHook("*", rec.URL+"/weft?token=abc")
	e.allow("write_file", agent.ModeAuto)
	thread := e.start(`Work. [[tool:write_file {"path":"a.txt","content":"x"}]] [[tool@1:long_job {}]]`)
	run, _ := e.finished(thread)
	if run.Status != db.RunCompleted {
		t.Fatalf("run %s (%s): %s", run.Status, run.Error, e.describe(run.ID))
	}
	want := map[string]int{agent.EventAgentStart: 1, agent.EventTurnStart: 3, agent.EventMessageStart: 3, agent.EventMessageEnd: 3,
		agent.EventToolExecutionStart: 2, agent.EventToolExecutionUpdate: 1, agent.EventToolExecutionEnd: 2, agent.EventTurnEnd: 3, agent.EventAgentEnd: 1}
	// Deliveries run in parallel and may arrive in any order (agent_end
	// before the last turn_end): wait until both hooks have every event,
	// then check them (the checks below say what is missing on a timeout).
	complete := func(ps []agent.HookPayload) bool {
		n := byEvent(ps)
		for ev, w := range want {
			if n[ev] < w {
				return false
			}
		}
		return true
	}
	testwait.Until(20*time.Second, func() bool { return complete(rec.payloads()) && complete(commandPayloads(t, dir)) })
	httpGot, cmdGot := rec.payloads(), commandPayloads(t, dir)
	for name, got := range map[string][]agent.HookPayload{"the HTTP hook": httpGot, "the command hook": cmdGot} {
		n := byEvent(got)
		for ev, w := range want {
			if n[ev] != w {
				t.Errorf("%s got %d %s, want %d (all: %v)", name, n[ev], ev, w, n)
			}
		}
		if n[agent.EventMessageUpdate] < 1 {
			t.Errorf("%s got no message_update", name)
		}
		for _, p := range got {
			if p.RunID != run.ID || p.ThreadID != thread || p.WorkspaceID != e.ws.ID || p.UserID != e.user.ID || p.ID == "" || !strings.HasPrefix(p.Model, "toolie") {
				t.Errorf("%s: a payload with the wrong ids: %+v", name, p)
			}
			switch p.Event {
			case agent.EventToolExecutionStart, agent.EventToolExecutionUpdate, agent.EventToolExecutionEnd:
				if p.Tool == "" || len(p.Arguments) == 0 || p.Turn == 0 {
					t.Errorf("%s: a tool event without its tool and arguments: %+v", name, p)
				}
				if p.Tool == "write_file" && p.Event == agent.EventToolExecutionStart && string(p.Arguments) != `{"content":"x","path":"a.txt"}` {
					t.Errorf("%s: write_file's arguments = %s", name, p.Arguments)
				}
				if p.Tool == "write_file" && p.Event == agent.EventToolExecutionEnd &&
					(p.Result == nil || p.Result.Status != "ok" || len(p.Result.Changes) != 1 || p.Result.Changes[0].Path != "a.txt") {
					t.Errorf("%s: write_file's result = %+v", name, p.Result)
				}
				if p.Event == agent.EventToolExecutionUpdate && (p.Tool != "long_job" || p.Progress != "half way") {
					t.Errorf("%s: the progress = %+v", name, p)
				}
			case agent.EventMessageEnd:
				if p.Message == nil || p.Usage == nil {
					t.Errorf("%s: message_end without the message and usage: %+v", name, p)
				}
			case agent.EventMessageUpdate:
				if p.Message == nil || p.Message.Delta == "" {
					t.Errorf("%s: message_update without its text: %+v", name, p)
				}
			case agent.EventAgentStart:
				if p.Resumed {
					t.Errorf("%s: a new run says it was resumed", name)
				}
			case agent.EventAgentEnd:
				if p.Status != db.RunCompleted || p.Usage == nil || p.Usage.OutputTokens == 0 {
					t.Errorf("%s: agent_end = %+v", name, p)
				}
			}
		}
	}
	// One event, one id, whichever hook it went to.
	ids := func(ps []agent.HookPayload) map[string]string {
		m := map[string]string{}
		for _, p := range ps {
			m[p.ID] = p.Event
		}
		return m
	}
	hi, ci := ids(httpGot), ids(cmdGot)
	for id, ev := range hi {
		if ci[id] != ev {
			t.Errorf("event %s (%s) reached the HTTP hook but not the command hook with that id", id, ev)
		}
	}
	if len(hi) != len(ci) {
		t.Errorf("the HTTP hook got %d events, the command hook %d", len(hi), len(ci))
	}
	for _, r := range rec.requests() {
		if got, want := r.header.Get("X-Weft-Signature"), agent.Sign(secret, r.body); got != want {
			t.Errorf("%s: signature %q, want %q", r.p.Event, got, want)
		}
		if r.header.Get("X-Weft-Event") != r.p.Event || r.header.Get("X-Weft-Delivery") != r.p.ID {
			t.Errorf("headers %v for %s %s", r.header, r.p.Event, r.p.ID)
		}
	}
	// Nothing failed, so the trace shows no hook.
	if page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body; strings.Contains(page, `data-testid="hook"`) {
		t.Errorf("the trace shows a hook although none failed")
	}
}

func TestAPolicyHookDeniesAWriteAndTheModelIsTold(t *testing.T) {
	t.Parallel()
	const reason = "Writes wait for the release freeze to end."
	deny := `if grep -q '"tool":"write_file"'; then echo '{"decision": "deny", "reason": "` + reason + `"}'; fi`
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{Hooks: agent.HooksConfig{
		Hooks: []agent.Hook{{Event: agent.EventToolExecutionStart, Command: []string{"/bin/sh", "-c", deny}}}}}})
	e.allow("write_file", agent.ModeAuto)
	thread := e.start(`[[tool:write_file {"path":"frozen.txt","content":"x"}]] [[tool@1:list_files {"path":"."}]]`)
	run, m := e.finished(thread)
	if run.Status != db.RunCompleted {
		t.Fatalf("run %s (%s): %s", run.Status, run.Error, e.describe(run.ID))
	}
	if _, ok := e.file("frozen.txt"); ok {
		t.Errorf("a denied write wrote the file")
	}
	if got := strings.Join(e.calls(run.ID), " "); got != "write_file:refused list_files:ok" {
		t.Errorf("calls = %s: the hook denied the write only", got)
	}
	var denied, hook db.Step
	for _, s := range e.steps(run.ID) {
		switch {
		case s.Kind == db.StepToolCall && s.Data.Tool == "write_file":
			denied = s
		case s.Kind == db.StepHook:
			hook = s
		}
	}
	if denied.Data.Reason != reason {
		t.Errorf("the refused call's reason = %q", denied.Data.Reason)
	}
	if hook.Status != db.StepRefused || hook.Data.Content != agent.EventToolExecutionStart || hook.Data.Reason != reason || hook.Data.CallStep != denied.ID {
		t.Errorf("the hook's step = %s %+v", hook.Status, hook.Data)
	}
	// The model's next request has the refusal.
	reqs := trStreamed(e.app.Fake)
	var told bool
	for _, msg := range reqs[1].Chat.Messages {
		told = told || (msg.Role == "tool" && msg.Content == "Refused: "+reason)
	}
	if !told {
		t.Errorf("the model was not told why: %+v", reqs[1].Chat.Messages)
	}
	if !strings.Contains(m.Content, "Done after 2 tool rounds") {
		t.Errorf("answer = %q", m.Content)
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	for _, want := range []string{`data-testid="tool-call" data-tool="write_file" data-status="refused"`, reason,
		`data-testid="hook" data-event="tool_execution_start" data-status="refused"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the thread page lacks %s", want)
		}
	}
}

func TestAHookThatTimesOutOrFailsNeverStopsTheRunAndShowsInTheTrace(t *testing.T) {
	t.Parallel()
	// It never answers: it waits for the caller to give up (having read
	// the body, so that the server sees the connection close).
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{Hooks: agent.HooksConfig{
		Hooks: []agent.Hook{
			{Event: agent.EventToolExecutionStart, URL: hang.URL + "/policy", Timeout: 0.3},
			{Event: agent.EventAgentEnd, Command: []string{"/bin/sh", "-c", "cat >/dev/null; echo broken receiver >&2; exit 3"}},
		},
		RetryBackoff: 50 * time.Millisecond, Attempts: 5}}})
	thread := e.start(`[[tool:list_files {"path":"."}]]`)
	run, _ := e.finished(thread)
	if run.Status != db.RunCompleted {
		t.Fatalf("run %s (%s): %s", run.Status, run.Error, e.describe(run.ID))
	}
	if got := strings.Join(e.calls(run.ID), " "); got != "list_files:ok" {
		t.Errorf("calls = %s: a hook without an answer lets the call run", got)
	}
	hookStep := func(event string) (db.Step, bool) {
		for _, s := range e.steps(run.ID) {
			if s.Kind == db.StepHook && s.Data.Content == event {
				return s, true
			}
		}
		return db.Step{}, false
	}
	s, ok := hookStep(agent.EventToolExecutionStart)
	if !ok || s.Status != db.StepError || !strings.Contains(s.Data.Error, "no answer within 300ms") || s.Data.Output != "POST "+hang.URL {
		t.Errorf("the timed-out hook's step = %v %s %+v", ok, s.Status, s.Data)
	}
	// The failed agent_end delivery is retried, then given up, and shows.
	testwait.For(t, "the failed agent_end delivery in the trace", 20*time.Second, func() bool {
		s, ok := hookStep(agent.EventAgentEnd)
		return ok && strings.Contains(s.Data.Error, "given up") && strings.Contains(s.Data.Error, "exit status 3")
	})
	if s, _ := hookStep(agent.EventAgentEnd); strings.Contains(s.Data.Error, "broken receiver") {
		t.Errorf("the trace shows the command hook's stderr: %q", s.Data.Error)
	}
	// The waited-for attempt counts: 5 attempts in all, as configured.
	testwait.For(t, "the policy hook's delivery given up", 20*time.Second, func() bool {
		ds, err := e.app.Store.HookDeliveries(context.Background(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Event == agent.EventToolExecutionStart && d.GivenUpAt != nil {
				if d.Attempts != 5 {
					t.Errorf("the policy hook's delivery was given up after %d attempts, want 5", d.Attempts)
				}
				return true
			}
		}
		return false
	})
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	for _, want := range []string{`data-testid="hook" data-event="tool_execution_start" data-status="error"`,
		`data-testid="hook" data-event="agent_end" data-status="error"`, "exit status 3"} {
		if !strings.Contains(page, want) {
			t.Errorf("the thread page lacks %s", want)
		}
	}
	debug := e.c.Get(fmt.Sprintf("/t/%d/debug", thread)).Body
	for _, want := range []string{`data-testid="debug-hook" data-event="tool_execution_start" data-status="error"`,
		`data-testid="debug-hook" data-event="agent_end" data-status="error"`} {
		if !strings.Contains(debug, want) {
			t.Errorf("the debug view lacks %s", want)
		}
	}
}

func TestAReceiverThatFailsTheFirstDeliveryGetsItAgainWithTheSameID(t *testing.T) {
	t.Parallel()
	rec := newHookReceiver(t, func(n int, _ hookRequest, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{Hooks: agent.HooksConfig{
		Allow: []string{"127.0.0.0/8"}, RetryBackoff: 20 * time.Millisecond}}})
	secret := e.addHook(agent.EventAgentEnd, rec.URL)
	thread := e.start("Just answer.")
	run, _ := e.finished(thread)
	testwait.For(t, "a second delivery", 20*time.Second, func() bool { return len(rec.requests()) >= 2 })
	got := rec.requests()
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want 2 (one failed, one retried)", len(got))
	}
	a, b := got[0], got[1]
	if a.p.Event != agent.EventAgentEnd || a.p.ID == "" || a.p.ID != b.p.ID || string(a.body) != string(b.body) ||
		a.header.Get("X-Weft-Delivery") != b.header.Get("X-Weft-Delivery") {
		t.Errorf("the retry is not the same event: %s %s / %s %s", a.p.ID, a.body, b.p.ID, b.body)
	}
	if b.header.Get("X-Weft-Signature") != agent.Sign(secret, b.body) || a.p.RunID != run.ID {
		t.Errorf("the retry's signature or run is wrong: %v", b.header)
	}
	var ds []db.HookDelivery
	testwait.For(t, "the delivery recorded as made", 10*time.Second, func() bool {
		var err error
		if ds, err = e.app.Store.HookDeliveries(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
		return len(ds) == 1 && ds[0].DeliveredAt != nil
	})
	if ds[0].Attempts != 2 || ds[0].LastError != "the server answered 503 Service Unavailable" {
		t.Errorf("the delivery = %d attempts, last error %q", ds[0].Attempts, ds[0].LastError)
	}
}

func TestAWorkspaceHookIsItsOwnersAndReachesNoPrivateAddress(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	// Without the administrator's leave, a local address is refused.
	r := e.c.Post("/tools/hooks", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "event": {"*"}, "url": {"http://127.0.0.1:9/hook"}})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "private or local network") {
		t.Errorf("a loopback hook: %d", r.StatusCode)
	}
	r = e.c.Post("/tools/hooks", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "event": {"no_such_event"}, "url": {"https://example.com/h"}})
	if r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("an unknown event: %d", r.StatusCode)
	}
	for _, bad := range []string{"NaN", "Inf", "0", "61"} {
		r = e.c.Post("/tools/hooks", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "event": {"*"}, "url": {"https://example.com/h"}, "timeout": {bad}})
		if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "The timeout must be") {
			t.Errorf("a timeout of %s: %d", bad, r.StatusCode)
		}
	}
	e.addHook(agent.EventTurnEnd, "https://example.com/mine")
	hooks, err := e.app.Store.WorkspaceHooks(context.Background(), e.user.ID, e.ws.ID)
	if err != nil || len(hooks) != 1 {
		t.Fatalf("hooks %v %v", hooks, err)
	}
	page := e.c.Get("/tools/hooks").Body
	if !strings.Contains(page, fmt.Sprintf(`data-testid="hook-row" data-hook-id="%d" data-event="turn_end"`, hooks[0].ID)) ||
		strings.Contains(page, hooks[0].Secret) {
		t.Errorf("the list shows the hook without its secret")
	}

	other := testenv.NewClient(t, e.app.TS.URL)
	other.Register("intruder@example.com", password)
	if r := other.Post(fmt.Sprintf("/tools/hooks/%d/delete", hooks[0].ID), nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("another user deleting the hook: %d", r.StatusCode)
	}
	if r := other.Post("/tools/hooks", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "event": {"*"}, "url": {"https://evil.example/"}}); r.StatusCode != http.StatusNotFound {
		t.Errorf("another user adding a hook to the workspace: %d", r.StatusCode)
	}
	if body := other.Get(fmt.Sprintf("/tools/hooks?w=%d", e.ws.ID)).Body; strings.Contains(body, "example.com/mine") {
		t.Errorf("another user sees the hook")
	}
	if hooks, _ := e.app.Store.WorkspaceHooks(context.Background(), e.user.ID, e.ws.ID); len(hooks) != 1 {
		t.Errorf("the owner's hooks changed: %v", hooks)
	}
	if r := e.c.Post(fmt.Sprintf("/tools/hooks/%d/delete", hooks[0].ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Errorf("the owner deleting the hook: %d", r.StatusCode)
	}
	// Each hook is a POST for every event it takes: a workspace has few.
	for i := range db.MaxWorkspaceHooks {
		e.addHook("*", fmt.Sprintf("https://example.com/%d", i))
	}
	r = e.c.Post("/tools/hooks", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "event": {"*"}, "url": {"https://example.com/more"}})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "at most 10 hooks") {
		t.Errorf("a hook past the limit: %d", r.StatusCode)
	}
}

func TestARunAdoptedAfterARestartSaysItIsResumedAndEndsOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, second := restartPair(t, "resume-hooks@example.com", testenv.Options{Agent: agent.Config{Hooks: agent.HooksConfig{
		Hooks: []agent.Hook{{Event: "*", Command: []string{"/bin/sh", "-c", `cat > "$0/$$.json"`, dir}}}}}})
	thread := first.start(`[[tool:write_file {"path":"later.txt","content":"x"}]]`)
	ap := first.pending(thread, db.StepApproval)
	first.shutdown(5 * time.Second)
	next := second(true)
	if r := next.c.Post(fmt.Sprintf("/steps/%d/decide", ap.ID), url.Values{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d", r.StatusCode)
	}
	run, _ := next.finished(thread)
	if run.Status != db.RunCompleted {
		t.Fatalf("run %s (%s)", run.Status, run.Error)
	}
	testwait.For(t, "agent_end", 20*time.Second, func() bool { return hasEvent(commandPayloads(t, dir), agent.EventAgentEnd) })
	var starts []bool
	ends := 0
	seen := map[string]bool{}
	for _, p := range commandPayloads(t, dir) {
		if seen[p.ID] {
			continue
		}
		seen[p.ID] = true
		switch p.Event {
		case agent.EventAgentStart:
			starts = append(starts, p.Resumed)
		case agent.EventAgentEnd:
			ends++
		}
	}
	if len(starts) != 2 || starts[0] == starts[1] || ends != 1 {
		t.Errorf("agent_start resumed = %v, agent_end ×%d: want one new start, one resumed start and one end", starts, ends)
	}
}

func TestAReceiverThatIsDownShowsInTheTraceOncePerEventNotOncePerStreamedUpdate(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{Hooks: agent.HooksConfig{
		Hooks: []agent.Hook{{Event: "*", URL: down.URL}}, RetryBackoff: 50 * time.Millisecond, Attempts: 4}}})
	thread := e.start("Just answer.")
	run, _ := e.finished(thread)
	var ds []db.HookDelivery
	testwait.For(t, "every delivery given up, and shown unless it is an update", 20*time.Second, func() bool {
		var err error
		if ds, err = e.app.Store.HookDeliveries(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.GivenUpAt == nil || (d.StepID == nil && d.Event != agent.EventMessageUpdate) {
				return false
			}
		}
		return len(ds) > 0
	})
	n := byEventDeliveries(ds)
	if n[agent.EventMessageUpdate] == 0 || n[agent.EventMessageEnd] != 1 {
		t.Fatalf("deliveries %v", n)
	}
	shown := map[string]int{}
	for _, s := range e.steps(run.ID) {
		if s.Kind == db.StepHook {
			shown[s.Data.Content]++
		}
	}
	if shown[agent.EventMessageUpdate] != 0 {
		t.Errorf("the trace shows %d failed message_update deliveries (one a second while the model streams)", shown[agent.EventMessageUpdate])
	}
	if shown[agent.EventMessageEnd] != 1 || shown[agent.EventAgentEnd] != 1 {
		t.Errorf("the trace shows %v: the receiver's failures still show once per other event", shown)
	}
}

func byEventDeliveries(ds []db.HookDelivery) map[string]int {
	n := map[string]int{}
	for _, d := range ds {
		n[d.Event]++
	}
	return n
}

func TestAWorkspaceReceiverThatNeverAnswersDoesNotHoldUpTheAdministratorsHooks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	dir := t.TempDir()
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{Hooks: agent.HooksConfig{
		Hooks: []agent.Hook{{Event: agent.EventAgentEnd, Command: []string{"/bin/sh", "-c", `cat > "$0/$$.json"`, dir}}},
		Allow: []string{"127.0.0.1"}}}})
	t.Cleanup(func() { close(release) })
	// A user's hook on every event whose receiver holds each delivery for
	// its whole timeout.
	r := e.c.Post("/tools/hooks", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "event": {"*"}, "url": {hang.URL}, "timeout": {"60"}})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("add the hook: %d", r.StatusCode)
	}
	thread := e.start("Just answer.")
	if run, _ := e.finished(thread); run.Status != db.RunCompleted {
		t.Fatalf("run %s (%s)", run.Status, run.Error)
	}
	testwait.For(t, "the administrator's agent_end while the user's receiver holds its deliveries", 20*time.Second, func() bool {
		return hasEvent(commandPayloads(t, dir), agent.EventAgentEnd)
	})
}

func TestAWorkspaceReceiverThatNeverAnswersHoldsFewWorkersAndOtherWorkspacesHooksGoOn(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, most := 0, 0
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	rec := newHookReceiver(t, nil)
	e := newAgentEnv(t, testenv.Options{Agent: agent.Config{Hooks: agent.HooksConfig{Allow: []string{"127.0.0.1"}}}})
	t.Cleanup(func() { close(release) })
	r := e.c.Post("/tools/hooks", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "event": {"*"}, "url": {hang.URL}, "timeout": {"60"}})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("add the hook: %d", r.StatusCode)
	}
	if run, _ := e.finished(e.start("Just answer.")); run.Status != db.RunCompleted {
		t.Fatalf("run %s (%s)", run.Status, run.Error)
	}
	testwait.For(t, "the user's receiver holding deliveries", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight >= 2
	})
	// Another user, another workspace: its hook is delivered meanwhile.
	c := testenv.NewClient(t, e.app.TS.URL)
	c.Register("other-hooks@example.com", password)
	u, err := e.app.Store.UserByEmail(context.Background(), "other-hooks@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := e.app.Store.DefaultWorkspace(context.Background(), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	o := &agentEnv{t: t, app: e.app, c: c, user: u, ws: ws, root: e.app.Agent.Root(ws)}
	o.addHook(agent.EventAgentEnd, rec.URL)
	if run, _ := o.finished(o.start("Just answer.")); run.Status != db.RunCompleted {
		t.Fatalf("the other run %s (%s)", run.Status, run.Error)
	}
	testwait.For(t, "the other workspace's agent_end while the first receiver holds its deliveries", 20*time.Second, func() bool {
		return hasEvent(rec.payloads(), agent.EventAgentEnd)
	})
	mu.Lock()
	defer mu.Unlock()
	if most > 2 {
		t.Errorf("one workspace's receiver held %d workers at once", most)
	}
}
