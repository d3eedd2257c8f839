package handlers_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/agent"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// A steer sent while the model writes its final answer (no round boundary
// follows) does not vanish: the run settles it as not taken, after the
// final turn, the trace says to send it as a message, and so does /status.
func TestASteerAfterTheLastRoundIsSettledAsNotTakenAndSaysSo(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	// The final answer is held until the steer is in: the fake's script
	// waits (before its reply) for the test to let it go on.
	arrived, release := make(chan struct{}), make(chan struct{})
	var once, closed sync.Once
	t.Cleanup(func() { closed.Do(func() { close(release) }) })
	e.app.Fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if len(req.Tools) > 0 {
			once.Do(func() {
				close(arrived)
				<-release
			})
		}
		return fakeollama.DefaultReply(req)
	})
	thread := e.start("answer at once")
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent's request never came")
	}
	if r := e.slash(thread, "/steer also mention the tests"); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "Steering sent") {
		t.Fatalf("/steer: %d %s", r.StatusCode, r.Body)
	}
	if r := e.slash(thread, "/status"); !strings.Contains(r.Body, "Steering not yet taken: “also mention the tests”") {
		t.Errorf("/status while the final answer is written: %s", r.Body)
	}
	closed.Do(func() { close(release) })
	run, answer := e.finished(thread)
	if run.Status != db.RunCompleted || answer.Status != db.MsgComplete {
		t.Fatalf("run %s, answer %s (%s)", run.Status, answer.Status, run.Error)
	}

	var kinds []string
	for _, s := range e.steps(run.ID) {
		k := s.Kind
		if k == db.StepSteer {
			k += ":" + s.Status + ":" + s.Data.Content
		}
		kinds = append(kinds, k)
	}
	if got := strings.Join(kinds, " "); got != "start model_turn evidence steer:not_taken:also mention the tests" {
		t.Errorf("steps = %s", got)
	}
	for _, r := range e.app.Fake.Requests() {
		for _, m := range r.Chat.Messages {
			if strings.Contains(m.Content, "also mention the tests") {
				t.Errorf("a model request carries the late steer")
			}
		}
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	if !strings.Contains(page, `data-testid="steer" data-status="not_taken"`) ||
		!strings.Contains(page, "it arrived after the last round: send it as a message") {
		t.Errorf("the thread's trace does not show the steer as not taken")
	}
	r := e.slash(thread, "/status")
	for _, want := range []string{"Nothing is running.", "Steering not taken: “also mention the tests” arrived after the agent&#39;s last round; send it as a message."} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("/status after the run lacks %q: %s", want, r.Body)
		}
	}
	// The next run took nothing of it either, and /status forgets it.
	e.send(thread, "next")
	e.finished(thread)
	if r := e.slash(thread, "/status"); strings.Contains(r.Body, "not taken") {
		t.Errorf("/status after a later run still names the old steer: %s", r.Body)
	}
}

// watchTrace follows a run's event stream through c and reports each trace
// event's payload on the returned channel until the stream ends.
func watchTrace(t *testing.T, c *testenv.Client, run int64) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/runs/%d/events", c.Base, run), nil)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	out := make(chan string, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		var name string
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if name == "trace" {
					select {
					case out <- strings.Join(data, "\n"):
					case <-ctx.Done():
						return
					}
				}
				name, data = "", nil
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	return out
}

// waitTrace waits for a trace event that contains want.
func waitTrace(t *testing.T, events <-chan string, who, want string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("%s: the stream ended without a trace showing %s", who, want)
			}
			if strings.Contains(ev, want) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no trace showing %s", who, want)
		}
	}
}

// A steer sent on another instance shows at once, as a pending card, in
// the live trace of every watcher: one following the run on the instance
// that runs it, one on the other instance; once taken it shows as
// steered there.
func TestASteerShowsAsAPendingCardToEveryWatcherBeforeItIsTaken(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	o := testenv.Options{DefaultModel: "toolie", Agent: agent.Config{DataDir: t.TempDir(), PollEvery: 50 * time.Millisecond}}
	o.Chat.Instance = "runner-" + t.Name()
	first := agentEnvOn(t, store, o, "watch@example.com", true)
	o.Fake = first.app.Fake
	o.Chat.Instance = "other-" + t.Name()
	second := agentEnvOn(t, store, o, "watch@example.com", false)

	thread := first.start(`format it [[tool:write_file {"path":"a.go","content":"x"}]]`)
	ap := first.pending(thread, db.StepApproval)
	here, there := watchTrace(t, first.c, ap.RunID), watchTrace(t, second.c, ap.RunID)
	waitTrace(t, here, "runner", `data-testid="approval"`)
	waitTrace(t, there, "other", `data-testid="approval"`)

	if r := second.slash(thread, "/steer use tabs"); r.StatusCode != http.StatusOK {
		t.Fatalf("/steer: %d %s", r.StatusCode, r.Body)
	}
	pending := `data-testid="steer" data-status="pending"`
	waitTrace(t, here, "runner", pending)
	waitTrace(t, there, "other", pending)

	if r := first.c.Post(fmt.Sprintf("/steps/%d/decide", ap.ID), url.Values{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d", r.StatusCode)
	}
	waitTrace(t, here, "runner", `data-testid="steer" data-status="ok"`)
	first.finished(thread)
}
