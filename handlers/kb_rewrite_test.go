package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// rewriteRequests are the fake's structured-output requests: query
// rewrites.
func rewriteRequests(f *fakeollama.Server) []*api.ChatRequest {
	var out []*api.ChatRequest
	for _, r := range f.Requests() {
		if r.Chat != nil && len(r.Chat.Format) > 0 {
			out = append(out, r.Chat)
		}
	}
	return out
}

func TestQueryRewritingIsAKnowledgeBaseSettingTheRetrievalViewAndAnswersUse(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	const vague = "Which streetcar line serves the old Moorish quarter?"
	app.Fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if len(req.Format) > 0 {
			return fakeollama.Reply{Chunks: []string{`{"queries":["tram 28 through Alfama"]}`}}
		}
		return citingScript(req)
	})
	ctx := context.Background()
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("rewrite@example.com", password)
	u, err := app.Store.UserByEmail(ctx, "rewrite@example.com")
	if err != nil {
		t.Fatal(err)
	}
	r := c.Post("/kb", url.Values{"name": {"Travel"}, "embed_model": {"embedder"}})
	var kbID int64
	fmt.Sscanf(r.Header.Get("Location"), "/kb/%d", &kbID)
	upload(t, c, kbID, map[string]string{"lisbon.md": tramGuide})
	waitDocs(t, app.Store, u.ID, kbID)
	page := fmt.Sprintf("/kb/%d", kbID)
	settings := page + "/settings"
	rewriting := func() bool {
		t.Helper()
		kb, err := app.Store.KB(ctx, u.ID, kbID)
		if err != nil {
			t.Fatal(err)
		}
		return kb.RewriteQueries
	}

	// Off by default: the retrieval view asks no model and says nothing of queries.
	if body := c.Get(page).Body; rewriting() || !strings.Contains(body, `name="rewrite_queries" value="on" data-testid="kb-rewrite"`) {
		t.Fatalf("rewriting %v by default; the settings form lacks the unticked box", rewriting())
	}
	if v := c.Get(page + "?q=" + url.QueryEscape(vague)); strings.Contains(v.Body, "kb-queries") || len(rewriteRequests(app.Fake)) != 0 {
		t.Errorf("with rewriting off the view shows queries or the model was asked (%d requests)", len(rewriteRequests(app.Fake)))
	}

	// Ticked in the form: saved and shown ticked.
	if r := c.Post(settings, url.Values{"rewrite_present": {"1"}, "rewrite_queries": {"on"}}); r.StatusCode != http.StatusSeeOther || !rewriting() {
		t.Fatalf("ticking the box: %d, rewriting %v", r.StatusCode, rewriting())
	}
	if body := c.Get(page).Body; !strings.Contains(body, `value="on" checked data-testid="kb-rewrite"`) {
		t.Errorf("the saved setting is not shown ticked")
	}
	// Another form's post (without the box) keeps it; another user cannot change it.
	c.Post(settings, url.Values{"top_k": {"5"}})
	other := testenv.NewClient(t, app.TS.URL)
	other.Register("other-rewrite@example.com", password)
	if r := other.Post(settings, url.Values{"rewrite_present": {"1"}}); r.StatusCode != http.StatusNotFound || !rewriting() {
		t.Errorf("another user's post: %d, rewriting %v", r.StatusCode, rewriting())
	}

	// The retrieval view searches the model's queries too and shows them.
	v := c.Get(page + "?q=" + url.QueryEscape(vague))
	if !strings.Contains(v.Body, `<li data-testid="kb-query">tram 28 through Alfama</li>`) || !strings.Contains(v.Body, "Tram 28 climbs") {
		t.Errorf("the retrieval view lacks the query or what it found: %s", v.Body)
	}
	if reqs := rewriteRequests(app.Fake); len(reqs) != 1 || reqs[0].Model != "tiny:latest" || reqs[0].Messages[1].Content != vague {
		t.Fatalf("rewrite requests = %d (%q), want one with the workspace's model", len(reqs), reqModels(reqs))
	}

	// An answer: the thread's model rewrites before the sources are chosen.
	ws, err := app.Store.DefaultWorkspace(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	r = c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(ws.ID)}, "kb_present": {"1"}, "kb": {fmt.Sprint(kbID)}, "model": {"thinker"}, "content": {vague}})
	var thread int64
	fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &thread)
	run := waitIdle(t, app.Store, u.ID, thread)
	answer, err := app.Store.Message(ctx, u.ID, *run.AssistantMessageID)
	if err != nil {
		t.Fatal(err)
	}
	if answer.Status != db.MsgComplete || len(answer.Metadata.Sources) == 0 || answer.Metadata.Sources[0].Document != "lisbon.md" {
		t.Errorf("answer %s %q with sources %+v, want lisbon.md found by the rewrite", answer.Status, answer.Content, answer.Metadata.Sources)
	}
	if reqs := rewriteRequests(app.Fake); len(reqs) != 2 || reqs[1].Model != run.Model || run.Model != "thinker" || reqs[1].Options["num_ctx"] == nil {
		t.Errorf("rewrite requests with %q, want a second one with the thread's model (%q) and its num_ctx", reqModels(reqs), run.Model)
	}

	// Unticked: off again, and nothing more is asked.
	if r := c.Post(settings, url.Values{"rewrite_present": {"1"}}); r.StatusCode != http.StatusSeeOther || rewriting() {
		t.Errorf("unticking the box: %d, rewriting %v", r.StatusCode, rewriting())
	}
	c.Get(page + "?q=" + url.QueryEscape(vague))
	if n := len(rewriteRequests(app.Fake)); n != 2 {
		t.Errorf("%d rewrite requests after turning it off, want still 2", n)
	}
}

func reqModels(reqs []*api.ChatRequest) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Model)
	}
	return out
}
