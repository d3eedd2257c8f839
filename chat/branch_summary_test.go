package chat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testwait"
)

// isSummaryRequest tells the summarizer's requests (not streamed, a system
// message about summarizing) from answers and titles.
func isSummaryRequest(r fakeollama.Recorded) bool {
	return r.Chat != nil && r.Chat.Stream != nil && !*r.Chat.Stream && len(r.Chat.Messages) > 0 &&
		strings.Contains(r.Chat.Messages[0].Content, "summar")
}

// branchedEnv is a thread "shared start" → answer → "first version" →
// answer, where the second message was edited to a version holding the
// canary; the edited branch is shown.
func branchedEnv(t *testing.T, canary string) (e *env, thread, first, edited int64) {
	t.Helper()
	e = newEnv(t, chat.Config{})
	s1 := e.send(0, "shared start")
	e.wait(s1)
	s2 := e.send(s1.Thread.ID, "first version")
	e.wait(s2)
	ed, err := e.rt.Edit(context.Background(), e.user.ID, s2.User.ID, canary+" second version")
	if err != nil {
		t.Fatal(err)
	}
	e.wait(ed)
	return e, s1.Thread.ID, s2.User.ID, ed.User.ID
}

// waitSummary waits until a branch summary is no longer pending.
func waitSummary(t *testing.T, e *env, id int64) db.BranchSummary {
	t.Helper()
	var s db.BranchSummary
	if !testwait.Until(20*time.Second, func() bool {
		var err error
		if s, err = e.store.BranchSummary(context.Background(), e.user.ID, id); err != nil {
			t.Fatal(err)
		}
		return s.Status != db.SummaryPending
	}) {
		t.Fatalf("summary %d still pending", id)
	}
	return s
}

func TestALeftBranchIsSummarizedFromItsOwnMessagesAndNeitherSummaryNorLabelsReachLaterRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const canary = "CANARY-BRANCH-4b1d"
	e, thread, first, _ := branchedEnv(t, canary)
	if _, err := e.store.AddLabel(ctx, e.user.ID, first, "CANARY-LABEL-9c2e"); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetSummarizeBranches(ctx, e.user.ID, thread, true); err != nil {
		t.Fatal(err)
	}
	sw, err := e.store.LeaveBranch(ctx, e.user.ID, first)
	if err != nil || sw.Summary == nil {
		t.Fatalf("leave = %+v, %v", sw, err)
	}
	e.rt.SummarizeBranch(e.user.ID, *sw.Summary)
	s := waitSummary(t, e, sw.Summary.ID)
	if s.Status != db.SummaryComplete || !strings.Contains(s.Summary, canary) || s.Model == "" {
		t.Fatalf("summary = %+v, want a complete summary of the branch left", s)
	}
	var asked []string
	for _, r := range e.fake.Requests() {
		if isSummaryRequest(r) {
			asked = append(asked, r.Chat.Messages[len(r.Chat.Messages)-1].Content)
		}
	}
	if len(asked) != 1 || !strings.Contains(asked[0], canary) || strings.Contains(asked[0], "shared start") {
		t.Fatalf("the summarizer was asked %q, want once, about the branch left only", asked)
	}

	// The next answer, on the branch now shown: the model gets neither the
	// summary nor the label.
	before := len(e.fake.Requests())
	_, m := e.wait(e.send(thread, "what next"))
	if m.Status != db.MsgComplete {
		t.Fatalf("answer: %s %s", m.Status, m.Error)
	}
	checked := 0
	for _, r := range e.fake.Requests()[before:] {
		if r.Chat == nil {
			continue
		}
		checked++
		for _, msg := range r.Chat.Messages {
			if strings.Contains(msg.Content, "CANARY") {
				t.Errorf("a later request carries a label or branch summary: %s: %q", msg.Role, msg.Content)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no request was recorded for the later answer")
	}
}

func TestAFailedBranchSummaryKeepsItsErrorAndARetryWritesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, thread, first, _ := branchedEnv(t, "edited")
	e.fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if req.Stream != nil && !*req.Stream && strings.Contains(req.Messages[0].Content, "summar") {
			return fakeollama.Reply{ErrorBefore: &fakeollama.HTTPError{Status: 500, Message: "out of memory"}}
		}
		return fakeollama.DefaultReply(req)
	})
	if err := e.store.SetSummarizeBranches(ctx, e.user.ID, thread, true); err != nil {
		t.Fatal(err)
	}
	sw, err := e.store.LeaveBranch(ctx, e.user.ID, first)
	if err != nil || sw.Summary == nil {
		t.Fatalf("leave = %+v, %v", sw, err)
	}
	e.rt.SummarizeBranch(e.user.ID, *sw.Summary)
	s := waitSummary(t, e, sw.Summary.ID)
	if s.Status != db.SummaryError || !strings.Contains(s.Error, "out of memory") {
		t.Fatalf("failed summary = %+v, want its error kept", s)
	}

	e.fake.SetScript(nil)
	again, err := e.store.RetryBranchSummary(ctx, e.user.ID, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.rt.SummarizeBranch(e.user.ID, again)
	if s = waitSummary(t, e, s.ID); s.Status != db.SummaryComplete || s.Error != "" || !strings.Contains(s.Summary, "edited") {
		t.Fatalf("retried summary = %+v", s)
	}
}
