package rag_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/rag"
)

const (
	tramNotes = "# Lisbon\n\n## Trams\n\nTram 28 climbs from Martim Moniz through Graça and Alfama to Estrela.\n"
	ovenNotes = "# Baking\n\n## Bread\n\nA sourdough loaf needs a hot oven, steam for the first twenty minutes and a long cool rise.\n"
	// vague finds nothing relevant in either document by itself.
	vague = "Which streetcar line serves the old Moorish quarter?"
)

// rewriteEnv is a knowledge base of the two notes, rewriting on or off, and
// a fake whose chat log is empty.
func rewriteEnv(t *testing.T, on bool) (*env, db.KnowledgeBase) {
	t.Helper()
	e := newEnv(t, rag.Config{RewriteTimeout: 500 * time.Millisecond})
	kb := e.kb(e.user, e.ws, "Notes", "embedder")
	e.wait(e.user, e.add(e.user, kb, "lisbon.md", tramNotes))
	e.wait(e.user, e.add(e.user, kb, "oven.md", ovenNotes))
	if err := e.svc.UpdateSettings(context.Background(), e.user.ID, kb, rag.Settings{RewriteQueries: &on}); err != nil {
		t.Fatal(err)
	}
	kb, err := e.store.KB(context.Background(), e.user.ID, kb.ID)
	if err != nil || kb.RewriteQueries != on {
		t.Fatalf("rewriting %v after saving %v (%v)", kb.RewriteQueries, on, err)
	}
	if n := len(e.fake.Requests()); n != 0 {
		t.Fatalf("%d chat requests before any question", n)
	}
	return e, kb
}

// answering is a script whose rewrite reply is reply (other requests as
// usual).
func answering(reply fakeollama.Reply) func(*api.ChatRequest) fakeollama.Reply {
	return func(req *api.ChatRequest) fakeollama.Reply {
		if len(req.Format) > 0 {
			return reply
		}
		return fakeollama.DefaultReply(req)
	}
}

func documents(sources []db.Source) []string {
	var out []string
	for _, s := range sources {
		out = append(out, s.Document)
	}
	return out
}

func TestWithRewritingOffNoModelIsAskedAndTheQuestionAloneIsSearched(t *testing.T) {
	t.Parallel()
	e, kb := rewriteEnv(t, false)
	e.fake.SetScript(answering(fakeollama.Reply{Chunks: []string{`{"queries":["tram 28 through Alfama"]}`}}))
	got, err := e.svc.Retrieve(context.Background(), e.user.ID, []db.KnowledgeBase{kb}, vague, "tiny", 4096, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.fake.Requests()); n != 0 {
		t.Errorf("%d chat requests reached the model with rewriting off", n)
	}
	if len(got) != 0 {
		t.Errorf("sources %v, want none for the vague question alone", documents(got))
	}
}

func TestWithRewritingOnTheModelsQueriesFindWhatTheQuestionAloneMisses(t *testing.T) {
	t.Parallel()
	e, kb := rewriteEnv(t, true)
	ctx := context.Background()
	alone, err := e.svc.Search(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: vague})
	if err != nil || len(alone) != 0 {
		t.Fatalf("the question alone finds %v (%v): the test needs it to find nothing", alone, err)
	}
	e.fake.SetScript(answering(fakeollama.Reply{Chunks: []string{`{"queries":["tram 28 through Alfama", "` + vague + `", "tram 28 through alfama"]}`}}))

	got, err := e.svc.Retrieve(ctx, e.user.ID, []db.KnowledgeBase{kb}, vague, "tiny", 4096, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].Document != "lisbon.md" || got[0].N != 1 {
		t.Fatalf("sources %v, want lisbon.md first, found by the rewritten query", documents(got))
	}
	reqs := e.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d chat requests, want the one rewrite request", len(reqs))
	}
	req := reqs[0].Chat
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(req.Format, &schema); err != nil || schema.Properties["queries"] == nil {
		t.Errorf("format = %s, want a JSON schema of queries", req.Format)
	}
	if req.Model != "tiny" || req.Stream == nil || *req.Stream || req.Options["num_ctx"] != float64(4096) || req.Think == nil || req.Think.Bool() {
		t.Errorf("rewrite request: model %q, stream %v, options %v, think %v", req.Model, req.Stream, req.Options, req.Think)
	}
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || !strings.Contains(req.Messages[0].Content, "search") ||
		req.Messages[1].Content != vague {
		t.Errorf("rewrite messages = %+v", req.Messages)
	}

	// The retrieval view gets the queries: the echo and the repeat are
	// searched once.
	res, queries, err := e.svc.SearchKB(ctx, e.user.ID, kb, vague, rag.Rewriter{Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(queries, []string{"tram 28 through Alfama"}) {
		t.Errorf("queries = %q, want the one new query", queries)
	}
	if len(res) == 0 || res[0].Document != "lisbon.md" || !res[0].Relevant {
		t.Errorf("the retrieval view ranks %+v first", res)
	}
}

func TestAFailedSlowOrGarbageRewriteFallsBackToTheQuestion(t *testing.T) {
	t.Parallel()
	e, kb := rewriteEnv(t, true)
	ctx := context.Background()
	const question = "Which tram goes to Estrela?"
	want, err := e.svc.Search(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: question})
	if err != nil || len(want) == 0 {
		t.Fatalf("the question alone finds %v (%v)", want, err)
	}
	for _, tc := range []struct {
		name  string
		reply fakeollama.Reply
	}{
		{"garbage", fakeollama.Reply{Chunks: []string{"Sure! Here are some queries: trams, Lisbon"}}},
		{"the wrong JSON", fakeollama.Reply{Chunks: []string{`{"queries": "tram"}`}}},
		{"an error", fakeollama.Reply{ErrorBefore: &fakeollama.HTTPError{Status: 500}}},
		{"a model that never answers", fakeollama.Reply{Hang: true}},
		{"the question echoed", fakeollama.Reply{Chunks: []string{`{"queries":["  which TRAM goes to   Estrela?"]}`}}},
	} {
		e.fake.SetScript(answering(tc.reply))
		before := len(e.fake.Requests())
		start := time.Now()
		res, queries, err := e.svc.SearchRewritten(ctx, rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: question}, rag.Rewriter{Model: "tiny"})
		if err != nil {
			t.Errorf("%s: %v, want the question's sources", tc.name, err)
			continue
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: took %v, the rewrite timeout is 500 ms", tc.name, took)
		}
		if len(queries) != 0 || !sameSources(res, want) {
			t.Errorf("%s: queries %q, sources %v; want the question's own %v", tc.name, queries, names(res), names(want))
		}
		if len(e.fake.Requests()) != before+1 {
			t.Errorf("%s: the model was not asked", tc.name)
		}
	}
	if e.fake.Cancellations() != 1 {
		t.Errorf("%d requests abandoned, want the one that never answered", e.fake.Cancellations())
	}
}

func TestTheFakesOwnAnswerToARewriteLeavesRetrievalUnchanged(t *testing.T) {
	t.Parallel()
	e, kb := rewriteEnv(t, true)
	ctx := context.Background()
	for _, question := range []string{"Which tram goes to Estrela?", "how long should sourdough rise", vague} {
		q := rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: question, All: true}
		want, err := e.svc.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got, queries, err := e.svc.SearchRewritten(ctx, q, rag.Rewriter{Model: "tiny", NumCtx: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if len(queries) != 0 || !sameSources(got, want) {
			t.Errorf("%q: queries %q, sources %v; want %v", question, queries, names(got), names(want))
		}
	}
	if n := len(e.fake.Requests()); n != 3 {
		t.Errorf("%d rewrite requests, want 3", n)
	}
}

func sameSources(a, b []rag.Result) bool {
	return reflect.DeepEqual(a, b)
}

func names(rs []rag.Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Document)
	}
	return out
}
