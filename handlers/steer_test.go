package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/agent"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// slash sends a composer text to a thread as htmx does.
func (e *agentEnv) slash(thread int64, text string) testenv.Response {
	e.t.Helper()
	return e.c.HTMX(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {text}})
}

// A steer sent through another instance while the run waits for an
// approval enters the run at the next round boundary: the next model
// request has it as a user message after the tool's result, the trace shows
// it there, and it never becomes a message of the thread.
func TestASteerFromAnotherInstanceEntersAtTheNextRoundBoundary(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	o := testenv.Options{DefaultModel: "toolie", Agent: agent.Config{DataDir: t.TempDir(), PollEvery: 50 * time.Millisecond}}
	o.Chat.Instance = "runner-" + t.Name()
	first := agentEnvOn(t, store, o, "steer@example.com", true)
	o.Fake = first.app.Fake
	o.Chat.Instance = "other-" + t.Name()
	second := agentEnvOn(t, store, o, "steer@example.com", false)

	idle := first.start("hello")
	first.finished(idle)
	if r := first.slash(idle, "/steer use tabs"); r.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(r.Body, "No agent run is running in this thread") {
		t.Fatalf("/steer with nothing running: %d %s", r.StatusCode, r.Body)
	}

	thread := first.start(`format it [[tool:write_file {"path":"a.go","content":"x"}]]`)
	ap := first.pending(thread, db.StepApproval)
	var msgs int
	if err := store.Pool.QueryRow(t.Context(), "SELECT count(*) FROM messages WHERE thread_id = $1", thread).Scan(&msgs); err != nil {
		t.Fatal(err)
	}
	if r := second.slash(thread, "/steer"); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("/steer without text: %d", r.StatusCode)
	}
	if r := second.slash(thread, "/steer use tabs"); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "Steering sent") {
		t.Fatalf("/steer: %d %s", r.StatusCode, r.Body)
	}
	before := len(first.app.Fake.Requests())
	if r := first.c.Post(fmt.Sprintf("/steps/%d/decide", ap.ID), url.Values{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d", r.StatusCode)
	}
	run, _ := first.finished(thread)
	if run.Status != db.RunCompleted || run.InstanceID != "runner-"+t.Name() {
		t.Fatalf("run %s on %q (%s)", run.Status, run.InstanceID, run.Error)
	}

	// The agent's requests (title requests, of the chat thread above and of
	// this agent thread, may land in between).
	var reqs []fakeollama.Recorded
	for _, r := range first.app.Fake.Requests()[before:] {
		if r.Chat != nil && len(r.Chat.Tools) > 0 {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) != 1 {
		t.Fatalf("%d model requests after the approval, want 1", len(reqs))
	}
	m := reqs[0].Chat.Messages
	last := m[len(m)-1]
	if last.Role != "user" || last.Content != "use tabs" || len(m) < 2 || m[len(m)-2].Role != "tool" {
		t.Errorf("the request after the approval does not end with the tool result and the steer: %s", roles(m))
	}
	for _, earlier := range first.app.Fake.Requests()[:before] {
		for _, mm := range earlier.Chat.Messages {
			if strings.Contains(mm.Content, "use tabs") {
				t.Errorf("a request before the boundary had the steer")
			}
		}
	}

	// The trace: the steer after the tool call, before the final model turn.
	var kinds []string
	for _, s := range first.steps(run.ID) {
		k := s.Kind
		if k == db.StepSteer {
			k += ":" + s.Status + ":" + s.Data.Content
		}
		kinds = append(kinds, k)
	}
	if got := strings.Join(kinds, " "); got != "start model_turn tool_call approval steer:ok:use tabs model_turn evidence" {
		t.Errorf("steps = %s", got)
	}
	page := first.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	if !strings.Contains(page, `data-testid="steer" data-status="ok"`) || !strings.Contains(page, "use tabs") {
		t.Errorf("the thread page shows no steer card")
	}
	var after int
	if err := store.Pool.QueryRow(t.Context(), "SELECT count(*) FROM messages WHERE thread_id = $1", thread).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != msgs {
		t.Errorf("the steer added %d thread messages", after-msgs)
	}
	if r := first.slash(thread, "/steer too late"); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("/steer after the run ended: %d %s", r.StatusCode, r.Body)
	}
}

func roles(m []api.Message) string {
	var out []string
	for _, x := range m {
		out = append(out, x.Role+":"+x.Content)
	}
	return strings.Join(out, " | ")
}

// /status while an agent run waits says what it waits for, the queue, the
// model, the context fill and the tools; /queue queues a message behind
// the run, answered once it ends.
func TestStatusAndQueueWhileAnAgentRunWaits(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	thread := e.start(`[[tool:write_file {"path":"b.txt","content":"x"}]]`)
	ap := e.pending(thread, db.StepApproval)

	r := e.slash(thread, "/queue then say done")
	if r.StatusCode != http.StatusNoContent || r.Header.Get("HX-Redirect") == "" {
		t.Fatalf("/queue: %d %s", r.StatusCode, r.Body)
	}
	if page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body; !strings.Contains(page, "Queued: answered after the current answer") {
		t.Errorf("the reloaded page does not say the message was queued")
	}
	if r := e.slash(thread, "/steer keep it short"); r.StatusCode != http.StatusOK {
		t.Fatalf("/steer: %d %s", r.StatusCode, r.Body)
	}
	r = e.slash(thread, "/status")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("/status: %d %s", r.StatusCode, r.Body)
	}
	for _, want := range []string{"An agent run is waiting for you (1 round done) with toolie", "Queue: 1 message.",
		"Waiting for your approval: write_file", "Steering not yet taken: “keep it short”", "Model: toolie", "Context: about",
		"Tools: ", "asking first: ", "write_file"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("/status lacks %q: %s", want, r.Body)
		}
	}

	if r := e.c.Post(fmt.Sprintf("/steps/%d/decide", ap.ID), url.Values{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d", r.StatusCode)
	}
	run, _ := e.finished(thread)
	asked, err := e.app.Store.Message(t.Context(), e.user.ID, *run.UserMessageID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != db.RunCompleted || asked.Content != "then say done" || run.ID == ap.RunID {
		t.Errorf("the queued message was not answered after the run: run %d %s, message %q", run.ID, run.Status, asked.Content)
	}
	if r := e.slash(thread, "/status"); !strings.Contains(r.Body, "Nothing is running.") || !strings.Contains(r.Body, "Queue: 0 messages.") {
		t.Errorf("/status when idle: %s", r.Body)
	}
	if r := e.slash(thread, "/queue"); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("/queue without text: %d", r.StatusCode)
	}
}

// Commands and their replies stay in the thread as command entries, after
// the message they were typed under, shown after a reload, and never reach
// the model.
func TestCommandsAndRepliesAreKeptInTheThreadButNeverSentToTheModel(t *testing.T) {
	t.Parallel()
	e := newCmdEnv(t)
	if r := e.command("/usage"); r.StatusCode != http.StatusOK {
		t.Fatalf("/usage: %d", r.StatusCode)
	}
	if r := e.command("/steer faster"); r.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("/steer with nothing running: %d", r.StatusCode)
	}
	leaf := *e.threadRow().ActiveLeafID
	if r := e.command("/queue and then?"); r.StatusCode != http.StatusNoContent {
		t.Fatalf("/queue: %d %s", r.StatusCode, r.Body)
	}
	waitIdle(t, e.app.Store, e.user.ID, e.thread)

	var entries []string
	rows, err := e.app.Store.Pool.Query(t.Context(), "SELECT command, failed, after_message_id FROM thread_commands WHERE thread_id = $1 ORDER BY id", e.thread)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		var failed bool
		var after int64
		if err := rows.Scan(&c, &failed, &after); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, fmt.Sprintf("%s:%v:%v", c, failed, after == leaf))
	}
	if got := strings.Join(entries, " "); got != "/usage:false:true /steer faster:true:true /queue and then?:false:true" {
		t.Errorf("entries = %s", got)
	}

	page := e.c.Get(fmt.Sprintf("/t/%d", e.thread)).Body
	if n := strings.Count(page, `data-testid="command-entry"`); n != 3 {
		t.Errorf("the reloaded thread shows %d command entries, want 3", n)
	}
	for _, want := range []string{"/usage", "prompt tokens", "/steer faster", "No agent run is running", `data-failed`} {
		if !strings.Contains(page, want) {
			t.Errorf("the reloaded thread lacks %q", want)
		}
	}
	// The queued message was answered; neither it nor the next request
	// carries any command or reply.
	if r := e.c.Post(fmt.Sprintf("/t/%d/messages", e.thread), url.Values{"content": {"last one"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d", r.StatusCode)
	}
	waitIdle(t, e.app.Store, e.user.ID, e.thread)
	reqs := e.app.Fake.Requests()
	m := reqs[len(reqs)-1].Chat.Messages
	if got := m[len(m)-1].Content; got != "last one" {
		t.Fatalf("the last request ends with %q", got)
	}
	for _, req := range reqs {
		for _, mm := range req.Chat.Messages {
			if strings.Contains(mm.Content, "/usage") || strings.Contains(mm.Content, "prompt tokens") ||
				strings.Contains(mm.Content, "/steer") || strings.Contains(mm.Content, "No agent run") || strings.Contains(mm.Content, "/queue") {
				t.Errorf("a model request carries a command or its reply: %s: %q", mm.Role, mm.Content)
			}
		}
	}
	if !strings.Contains(roles(m), "user:and then?") {
		t.Errorf("the queued message is not in the history: %s", roles(m))
	}
}
