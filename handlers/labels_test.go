package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testwait"
)

// labelsOnPage are the names of the labels shown on messages of a page, by
// message id.
func labelsOnPage(body string) map[string][]string {
	out := map[string][]string{}
	msg := regexp.MustCompile(`data-testid="message" data-message-id="(\d+)"`)
	label := regexp.MustCompile(`data-testid="label" data-label-id="\d+"><summary class="label-name" title="[^"]*">([^<]*)</summary>`)
	locs := msg.FindAllStringSubmatchIndex(body, -1)
	for i, loc := range locs {
		end := len(body)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		id := body[loc[2]:loc[3]]
		for _, m := range label.FindAllStringSubmatch(body[loc[1]:end], -1) {
			out[id] = append(out[id], m[1])
		}
	}
	return out
}

func (e *cmdEnv) leaf() int64 {
	e.t.Helper()
	l := e.threadRow().ActiveLeafID
	if l == nil {
		e.t.Fatal("the thread has no active leaf")
	}
	return *l
}

func (e *cmdEnv) page() string {
	e.t.Helper()
	r := e.c.Get(fmt.Sprintf("/t/%d", e.thread))
	if r.StatusCode != http.StatusOK {
		e.t.Fatalf("thread page: %d", r.StatusCode)
	}
	return r.Body
}

func TestTheLabelCommandLabelsTheLastMessageAndTheThreadShowsAndListsIt(t *testing.T) {
	t.Parallel()
	e := newCmdEnv(t)
	leaf := e.leaf()
	if r := e.command("/label  Key   answer "); r.StatusCode != http.StatusNoContent || r.Header.Get("HX-Redirect") == "" {
		t.Fatalf("/label: %d %s", r.StatusCode, r.Body)
	}
	page := e.page()
	if got := labelsOnPage(page)[fmt.Sprint(leaf)]; len(got) != 1 || got[0] != "Key answer" {
		t.Fatalf("labels on the last message = %q (all: %v)", got, labelsOnPage(page))
	}
	if !strings.Contains(page, `data-testid="label-list"`) || !strings.Contains(page, `>Key answer</button>`) {
		t.Error("the thread's list of labels does not show the label")
	}
	if !strings.Contains(page, "Labelled the last message “Key answer”.") {
		t.Error("the page does not say what /label did")
	}
	if r := e.command("/label"); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "“Key answer”") {
		t.Errorf("/label alone: %d %s", r.StatusCode, r.Body)
	}
	if r := e.command("/label " + strings.Repeat("x", 81)); r.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(r.Body, "at most 80 characters") {
		t.Errorf("/label with a long name: %d %s", r.StatusCode, r.Body)
	}
	// The command and its reply are kept as command entries; the label is
	// no message.
	var msgs int
	if err := e.app.Store.Pool.QueryRow(context.Background(), "SELECT count(*) FROM messages WHERE thread_id = $1", e.thread).Scan(&msgs); err != nil {
		t.Fatal(err)
	}
	if msgs != 2 {
		t.Errorf("the thread has %d messages after labelling, want its 2", msgs)
	}
}

func TestALabelIsAddedRenamedAndRemovedFromItsMessageWithClearRefusals(t *testing.T) {
	t.Parallel()
	e := newCmdEnv(t)
	leaf := e.leaf()
	path := fmt.Sprintf("/m/%d/labels", leaf)
	for _, tc := range []struct{ name, want string }{
		{"   ", "a label needs a name"},
		{strings.Repeat("é", 81), "at most 80 characters"},
	} {
		if r := e.c.Post(path, url.Values{"name": {tc.name}}); r.StatusCode != http.StatusBadRequest || !strings.Contains(r.Body, tc.want) {
			t.Errorf("label %q: %d, want 400 saying %q", tc.name, r.StatusCode, tc.want)
		}
	}
	r := e.c.Post(path, url.Values{"name": {`<script>alert(1)</script>`}})
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != fmt.Sprintf("/t/%d#m%d", e.thread, leaf) {
		t.Fatalf("add: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	page := e.page()
	if strings.Contains(page, "<script>alert(1)") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the label's name is not escaped")
	}
	ls, err := e.app.Store.ThreadLabels(context.Background(), e.user.ID, e.thread)
	if err != nil || len(ls) != 1 {
		t.Fatalf("labels = %+v, %v", ls, err)
	}
	id := ls[0].ID
	if r := e.c.Post(fmt.Sprintf("/labels/%d/rename", id), url.Values{"name": {""}}); r.StatusCode != http.StatusBadRequest {
		t.Errorf("rename to nothing: %d", r.StatusCode)
	}
	if r := e.c.Post(fmt.Sprintf("/labels/%d/rename", id), url.Values{"name": {"renamed"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("rename: %d", r.StatusCode)
	}
	if got := labelsOnPage(e.page())[fmt.Sprint(leaf)]; len(got) != 1 || got[0] != "renamed" {
		t.Errorf("after the rename the message shows %q", got)
	}
	if r := e.c.Post(fmt.Sprintf("/labels/%d/delete", id), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove: %d", r.StatusCode)
	}
	if got := labelsOnPage(e.page()); len(got) != 0 {
		t.Errorf("after removing it the page shows labels %v", got)
	}
}

// branchedCmdEnv edits the first message of e's thread: the thread then
// shows the edited branch, and the original is one branch-prev away.
func branchedCmdEnv(t *testing.T, edited string) (e *cmdEnv, original, editedMsg int64) {
	t.Helper()
	e = newCmdEnv(t)
	path, _, err := e.app.Store.ActivePath(context.Background(), e.user.ID, e.thread, 10)
	if err != nil || len(path) != 2 {
		t.Fatalf("path = %v, %v", path, err)
	}
	if r := e.c.Post(fmt.Sprintf("/m/%d/edit", path[0].ID), url.Values{"content": {edited}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d", r.StatusCode)
	}
	waitIdle(t, e.app.Store, e.user.ID, e.thread)
	p, _, _ := e.app.Store.ActivePath(context.Background(), e.user.ID, e.thread, 10)
	return e, path[0].ID, p[0].ID
}

func (e *cmdEnv) waitSummary() db.BranchSummary {
	e.t.Helper()
	var s db.BranchSummary
	if !testwait.Until(20*time.Second, func() bool {
		var id int64
		err := e.app.Store.Pool.QueryRow(context.Background(), "SELECT id FROM branch_summaries WHERE thread_id = $1", e.thread).Scan(&id)
		if err != nil {
			return false
		}
		if s, err = e.app.Store.BranchSummary(context.Background(), e.user.ID, id); err != nil {
			e.t.Fatal(err)
		}
		return s.Status != db.SummaryPending
	}) {
		e.t.Fatalf("no finished branch summary in thread %d (last seen %+v)", e.thread, s)
	}
	return s
}

func TestSwitchingAwayFromABranchSummarizesItOnlyWhenSwitchedOnAndTheModelNeverSeesIt(t *testing.T) {
	t.Parallel()
	const canary = "CANARY-BRANCH-e81f"
	e, original, edited := branchedCmdEnv(t, canary+" edited question")

	// Off by default: switching writes nothing.
	if r := e.c.Post(fmt.Sprintf("/m/%d/select", original), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("select: %d", r.StatusCode)
	}
	if r := e.c.Post(fmt.Sprintf("/m/%d/select", edited), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("select: %d", r.StatusCode)
	}
	var n int
	_ = e.app.Store.Pool.QueryRow(context.Background(), "SELECT count(*) FROM branch_summaries").Scan(&n)
	if n != 0 {
		t.Fatalf("%d summaries written with summaries off", n)
	}

	if r := e.c.Post(fmt.Sprintf("/t/%d/branch-summaries", e.thread), url.Values{"summarize": {"true"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("switch summaries on: %d", r.StatusCode)
	}
	if r := e.c.Post(fmt.Sprintf("/m/%d/select", original), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("leave the edited branch: %d", r.StatusCode)
	}
	s := e.waitSummary()
	if s.Status != db.SummaryComplete || s.BranchMessageID != edited || !strings.Contains(s.Summary, canary) {
		t.Fatalf("summary = %+v, want the edited branch's", s)
	}
	page := e.page()
	if !strings.Contains(page, `data-testid="branch-summary"`) || !strings.Contains(page, s.Summary) {
		t.Fatalf("the thread does not show the summary where the branch forks")
	}
	if strings.Index(page, `data-testid="branch-summary"`) > strings.Index(page, fmt.Sprintf(`data-message-id="%d"`, original)) {
		t.Error("the summary is not shown at the fork, before the version now shown")
	}

	// A label and the summary stay out of the next request.
	if _, err := e.app.Store.AddLabel(context.Background(), e.user.ID, original, "CANARY-LABEL-77aa"); err != nil {
		t.Fatal(err)
	}
	before := len(e.app.Fake.Requests())
	if r := e.c.Post(fmt.Sprintf("/t/%d/messages", e.thread), url.Values{"content": {"and now?"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d", r.StatusCode)
	}
	waitIdle(t, e.app.Store, e.user.ID, e.thread)
	reqs := e.app.Fake.Requests()[before:]
	if len(reqs) == 0 {
		t.Fatal("the model was not asked")
	}
	for _, r := range reqs {
		for _, m := range r.Chat.Messages {
			if strings.Contains(m.Content, "CANARY") {
				t.Errorf("the model received a label or branch summary: %s: %q", m.Role, m.Content)
			}
		}
	}
}

func TestSwitchingBranchDoesNotWaitForTheSummaryAndAFailureIsShownWithARetry(t *testing.T) {
	t.Parallel()
	e, original, _ := branchedCmdEnv(t, "edited question")
	release := make(chan struct{})
	e.app.Fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if req.Stream != nil && !*req.Stream && strings.Contains(req.Messages[0].Content, "summar") {
			<-release // the model takes its time, then fails
			return fakeollama.Reply{ErrorBefore: &fakeollama.HTTPError{Status: 500, Message: "model runner crashed"}}
		}
		return fakeollama.DefaultReply(req)
	})
	if r := e.c.Post(fmt.Sprintf("/t/%d/branch-summaries", e.thread), url.Values{"summarize": {"true"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("switch summaries on: %d", r.StatusCode)
	}
	// The switch answers while the summary request is still with the model.
	if r := e.c.Post(fmt.Sprintf("/m/%d/select", original), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("select: %d", r.StatusCode)
	}
	page := e.page()
	if !strings.Contains(page, `data-status="pending"`) || !strings.Contains(page, `hx-get="/branch-summaries/`) {
		t.Fatalf("the pending summary is not shown, polling")
	}
	close(release)
	s := e.waitSummary()
	if s.Status != db.SummaryError || !strings.Contains(s.Error, "model runner crashed") {
		t.Fatalf("summary = %+v, want the failure kept", s)
	}
	node := e.c.Get(fmt.Sprintf("/branch-summaries/%d", s.ID))
	if node.StatusCode != http.StatusOK || !strings.Contains(node.Body, `data-testid="error"`) ||
		!strings.Contains(node.Body, "model runner crashed") || !strings.Contains(node.Body, `data-testid="branch-summary-retry"`) {
		t.Fatalf("the failed node: %d %s", node.StatusCode, node.Body)
	}
	e.app.Fake.SetScript(nil)
	if r := e.c.Post(fmt.Sprintf("/branch-summaries/%d/retry", s.ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("retry: %d", r.StatusCode)
	}
	if s = e.waitSummary(); s.Status != db.SummaryComplete || !strings.Contains(s.Summary, "edited question") {
		t.Fatalf("after the retry = %+v", s)
	}
	if r := e.c.Post(fmt.Sprintf("/branch-summaries/%d/delete", s.ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove: %d", r.StatusCode)
	}
	if strings.Contains(e.page(), `data-testid="branch-summary"`) {
		t.Error("the removed summary is still shown")
	}
}
