package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"weft/db"
	"weft/internal/testenv"
)

// kbWithGuide makes a knowledge base of the user's with the tram guide in
// it, ingested.
func kbWithGuide(t *testing.T, app *testenv.App, a apiUser, name string) int64 {
	t.Helper()
	r := a.web.Post("/kb", url.Values{"name": {name}, "embed_model": {"embedder"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d %s", r.StatusCode, r.Body)
	}
	var kbID int64
	fmt.Sscanf(r.Header.Get("Location"), "/kb/%d", &kbID)
	if r := upload(t, a.web, kbID, map[string]string{"lisbon.md": tramGuide}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("upload: %d", r.StatusCode)
	}
	if docs := waitDocs(t, app.Store, a.user.ID, kbID); len(docs) != 1 || docs[0].Status != db.DocReady {
		t.Fatalf("documents = %+v", docs)
	}
	return kbID
}

func TestAnAPIAnswerFromKnowledgeBasesCarriesSourcesAndReachesOnlyTheCallersOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	app.Fake.SetScript(citingScript)
	a := newAPIUser(t, app, "kba@example.com", db.ScopeChat, db.ScopeKB)
	b := newAPIUser(t, app, "kbb@example.com", db.ScopeChat, db.ScopeKB)
	kbA := kbWithGuide(t, app, a, "Travel")
	kbB := kbWithGuide(t, app, b, "B's travel")
	client := openAIClient(app, a.token)
	params := openai.ChatCompletionNewParams{Model: "tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Which tram goes to Alfama?")}}

	resp, err := client.Chat.Completions.New(ctx, params, option.WithJSONSet("weft", map[string]any{"knowledge_bases": []int64{kbA}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Tram 28 goes through Alfama [1]." {
		t.Fatalf("answer = %q", got)
	}
	var part struct {
		Route   string `json:"route"`
		Sources []struct {
			N          int     `json:"n"`
			KBID       int64   `json:"knowledge_base_id"`
			Document   string  `json:"document"`
			DocumentID int64   `json:"document_id"`
			Text       string  `json:"text"`
			Score      float64 `json:"score"`
			Cited      bool    `json:"cited"`
		} `json:"sources"`
	}
	if err := json.Unmarshal([]byte(resp.JSON.ExtraFields["weft"].Raw()), &part); err != nil {
		t.Fatalf("the weft part %q: %v", resp.JSON.ExtraFields["weft"].Raw(), err)
	}
	if part.Route != "rag" || len(part.Sources) == 0 || part.Sources[0].Document != "lisbon.md" || part.Sources[0].KBID != kbA ||
		!part.Sources[0].Cited || !strings.Contains(part.Sources[0].Text, "Tram 28") || part.Sources[0].Score <= 0 {
		t.Fatalf("the weft part = %+v", part)
	}
	reqs := app.Fake.Requests()
	if sys := reqs[len(reqs)-1].Chat.Messages[0]; sys.Role != "system" || !strings.Contains(sys.Content, "Sources:") {
		t.Errorf("the sources did not reach the model: %+v", sys)
	}

	// B's knowledge base with A's token: a 404, as if it did not exist, and
	// the model is not asked.
	before := len(app.Fake.Requests())
	_, err = client.Chat.Completions.New(ctx, params, option.WithJSONSet("weft", map[string]any{"knowledge_bases": []int64{kbB}}))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound || oe.Code != "knowledge_base_not_found" {
		t.Fatalf("B's knowledge base with A's token = %v, want 404", err)
	}
	if len(app.Fake.Requests()) != before {
		t.Error("the model was asked for a refused request")
	}

	// Streamed, the sources come with the last chunk.
	stream := client.Chat.Completions.NewStreaming(ctx, params, option.WithJSONSet("weft", map[string]any{"knowledge_bases": []int64{kbA}}))
	found := false
	for stream.Next() {
		if w, ok := stream.Current().JSON.ExtraFields["weft"]; ok && strings.Contains(w.Raw(), `"document":"lisbon.md"`) {
			found = true
		}
	}
	if err := stream.Err(); err != nil || !found {
		t.Errorf("the stream's sources: found %v, err %v", found, err)
	}
}

func TestAStoredAPIExchangeIsAThreadTheBrowserShowsWithRouteAndUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	a := newAPIUser(t, app, "store@example.com")
	b := newAPIUser(t, app, "storeb@example.com")
	ws, err := store.CreateWorkspace(ctx, a.user.ID, "Scripts")
	if err != nil {
		t.Fatal(err)
	}
	wsB, err := store.DefaultWorkspace(ctx, b.user.ID)
	if err != nil {
		t.Fatal(err)
	}
	client := openAIClient(app, a.token)
	params := openai.ChatCompletionNewParams{Model: "tiny", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("Be brief."), openai.UserMessage("first question"), openai.AssistantMessage("first answer"),
		openai.UserMessage("second question")}}

	// Without store nothing is kept.
	if _, err := client.Chat.Completions.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	if page, _, err := store.SidebarThreads(ctx, a.user.ID, ws.ID, nil, 10); err != nil || len(page) != 0 {
		t.Fatalf("threads without store: %v %v", page, err)
	}
	// Another user's workspace: 404, nothing stored.
	if _, err := client.Chat.Completions.New(ctx, params, option.WithJSONSet("weft", map[string]any{"workspace_id": wsB.ID, "store": true})); apiStatus(err) != http.StatusNotFound {
		t.Fatalf("B's workspace with A's token = %v, want 404", err)
	}

	resp, err := client.Chat.Completions.New(ctx, params, option.WithJSONSet("weft", map[string]any{"workspace_id": ws.ID, "store": true}))
	if err != nil {
		t.Fatal(err)
	}
	var part struct {
		ThreadID  int64  `json:"thread_id"`
		ThreadURL string `json:"thread_url"`
	}
	if err := json.Unmarshal([]byte(resp.JSON.ExtraFields["weft"].Raw()), &part); err != nil || part.ThreadID == 0 ||
		part.ThreadURL != app.TS.URL+fmt.Sprintf("/t/%d", part.ThreadID) {
		t.Fatalf("the weft part = %s (%v)", resp.JSON.ExtraFields["weft"].Raw(), err)
	}
	page, _, err := store.SidebarThreads(ctx, a.user.ID, ws.ID, nil, 10)
	if err != nil || len(page) != 1 || page[0].ID != part.ThreadID || page[0].Title != "first question" {
		t.Fatalf("threads of the workspace = %+v (%v)", page, err)
	}
	th := a.web.Get(fmt.Sprintf("/t/%d", part.ThreadID))
	if th.StatusCode != http.StatusOK {
		t.Fatalf("the thread page = %d", th.StatusCode)
	}
	for _, want := range []string{"first question", "first answer", "second question", "You said: second question",
		`data-route="chat"`} {
		if !strings.Contains(th.Body, want) {
			t.Errorf("the thread page lacks %q", want)
		}
	}
	if strings.Contains(th.Body, "Be brief.") {
		t.Error("the caller's system message was stored as a turn")
	}
	msgs, err := store.TreeMessages(ctx, a.user.ID, part.ThreadID)
	if err != nil || len(msgs) != 4 {
		t.Fatalf("stored messages = %d (%v)", len(msgs), err)
	}
	last := msgs[3]
	if last.Role != "assistant" || last.Metadata.Route != "chat" || last.Metadata.Model != "tiny" ||
		last.Metadata.Usage.OutputTokens == 0 || last.Metadata.Usage.PromptTokens != int(resp.Usage.PromptTokens) {
		t.Errorf("the stored answer = %+v", last.Metadata)
	}
	// B cannot open it.
	if r := b.web.Get(fmt.Sprintf("/t/%d", part.ThreadID)); r.StatusCode != http.StatusNotFound {
		t.Errorf("B opening A's stored exchange = %d", r.StatusCode)
	}
}
