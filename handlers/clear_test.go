package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"weft/internal/testenv"
)

var clearIDPattern = regexp.MustCompile(`data-testid="context-clear" data-message-id="(\d+)"`)

// agentTurns is the conversation (no system message) of the newest agent
// request (the one offering tools).
func (e *agentEnv) agentTurns() []string {
	e.t.Helper()
	var last *api.ChatRequest
	for _, r := range e.app.Fake.Requests() {
		if r.Chat != nil && len(r.Chat.Tools) > 0 {
			last = r.Chat
		}
	}
	if last == nil {
		e.t.Fatal("no agent request")
	}
	var out []string
	for _, m := range last.Messages {
		if m.Role != "system" {
			out = append(out, m.Role+": "+m.Content)
		}
	}
	return out
}

// /clear in an agent thread: the marker shows after the last answer, the
// next agent run's request starts after it, a second /clear there is
// refused, Undo (the owner's only) removes the marker and the turns are
// sent again.
func TestClearStartsANewContextForTheAgentUntilItsMarkerIsUndone(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	thread := e.start("first")
	e.finished(thread)
	if got := e.agentTurns(); !slices.Equal(got, []string{"user: first"}) {
		t.Fatalf("first request %q", got)
	}

	r := e.slash(thread, "/clear")
	if r.StatusCode != http.StatusNoContent || r.Header.Get("HX-Redirect") != fmt.Sprintf("/t/%d", thread) {
		t.Fatalf("/clear: %d %q %s", r.StatusCode, r.Header.Get("HX-Redirect"), r.Body)
	}
	if r := e.slash(thread, "/clear"); r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "already cleared") {
		t.Errorf("a second /clear at the same place: %d %s", r.StatusCode, r.Body)
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	m := clearIDPattern.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the thread shows no clear marker")
	}
	if !strings.Contains(page, "Context cleared.") || strings.Count(page, `data-testid="message"`) != 2 {
		t.Errorf("the reloaded page lacks the reply or the earlier messages")
	}

	e.send(thread, "second")
	e.finished(thread)
	if got := e.agentTurns(); !slices.Equal(got, []string{"user: second"}) {
		t.Errorf("the agent request after /clear is %q, want only the new message", got)
	}

	other := testenv.NewClient(t, e.app.TS.URL)
	other.Register("other@example.com", password)
	if r := other.HTMX("/clears/"+m[1]+"/undo", nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("another user's undo: %d", r.StatusCode)
	}
	if r := e.c.HTMX("/clears/"+m[1]+"/undo", nil); r.StatusCode != http.StatusOK || strings.TrimSpace(r.Body) != "" {
		t.Fatalf("undo: %d %q", r.StatusCode, r.Body)
	}
	if page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body; strings.Contains(page, `data-testid="context-clear"`) {
		t.Errorf("the marker is still shown after Undo")
	}
	e.send(thread, "third")
	e.finished(thread)
	got := e.agentTurns()
	if len(got) != 5 || got[0] != "user: first" || got[2] != "user: second" || got[4] != "user: third" {
		t.Errorf("after Undo the agent request is %q, want the whole branch", got)
	}
}

// /temporary and /temporary off switch the thread's memory off and on and
// say the new state.
func TestTemporaryCommandSwitchesTheThreadsMemoryAndSaysSo(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	thread := e.startChat("hello")
	waitIdle(t, e.app.Store, e.user.ID, thread)
	temp := func() bool {
		v, err := e.app.Store.ThreadTemporary(context.Background(), e.user.ID, thread)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	steps := []struct {
		cmd  string
		want bool
		says string
	}{
		{"/temporary", true, "This thread is now temporary"},
		{"/temporary", true, "already temporary"},
		{"/temporary off", false, "no longer temporary"},
	}
	for _, s := range steps {
		if r := e.slash(thread, s.cmd); r.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: %d %s", s.cmd, r.StatusCode, r.Body)
		}
		if temp() != s.want {
			t.Errorf("after %s the thread is temporary=%v", s.cmd, !s.want)
		}
		if page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body; !strings.Contains(page, s.says) {
			t.Errorf("after %s the page does not say %q", s.cmd, s.says)
		}
	}
	if r := e.slash(thread, "/temporary maybe"); r.StatusCode != http.StatusUnprocessableEntity || temp() {
		t.Errorf("/temporary maybe: %d, temporary=%v", r.StatusCode, temp())
	}
	var n int
	if err := e.app.Store.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM thread_commands WHERE thread_id = $1 AND command LIKE '/temporary%'", thread).Scan(&n); err != nil || n != 4 {
		t.Errorf("%d /temporary command entries (%v), want 4", n, err)
	}
}
