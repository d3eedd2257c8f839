package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/rag"
)

const tramGuide = `# Lisbon travel notes

## Trams

Tram 28 climbs from Martim Moniz through Graça and Alfama to Estrela. Board early: by ten it is full of visitors.

## Food

Pastéis de nata are best warm, with cinnamon, from the bakery in Belém.
`

// upload posts files (name → content) to a knowledge base.
func upload(t *testing.T, c *testenv.Client, kb int64, files map[string]string) testenv.Response {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, content := range files {
		fw, err := mw.CreateFormFile("files", name)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write([]byte(content))
	}
	mw.Close()
	req, err := http.NewRequest("POST", c.Base+fmt.Sprintf("/kb/%d/upload", kb), &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return c.Send(req)
}

// waitDocs waits until no document of the knowledge base is queued or processing.
func waitDocs(t *testing.T, store *db.DB, user, kb int64) []db.Document {
	t.Helper()
	var docs []db.Document
	if !testwait.Until(30*time.Second, func() bool {
		var err error
		if docs, err = store.Documents(context.Background(), user, kb); err != nil {
			t.Fatal(err)
		}
		return !testenv.Ingesting(docs)
	}) {
		t.Fatalf("documents still being ingested: %+v", docs)
	}
	return docs
}

// citingScript answers rag requests citing source 1, others as usual.
func citingScript(req *api.ChatRequest) fakeollama.Reply {
	if len(req.Messages) > 0 && req.Messages[0].Role == "system" && strings.Contains(req.Messages[0].Content, "Sources:") {
		return fakeollama.Reply{Chunks: []string{"Tram 28 ", "goes through Alfama ", "[1]."}}
	}
	return fakeollama.DefaultReply(req)
}

func TestAKnowledgeBaseAnswersWithCitationsAndSaysWhenNothingIsFound(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{RAG: rag.Config{MaxFileBytes: 4 << 10}})
	app.Fake.SetScript(citingScript)
	ctx := context.Background()
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("kb@example.com", password)
	u, err := app.Store.UserByEmail(ctx, "kb@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := app.Store.DefaultWorkspace(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}

	r := c.Post("/kb", url.Values{"name": {"Travel"}, "embed_model": {"embedder"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d %s", r.StatusCode, r.Body)
	}
	var kbID int64
	fmt.Sscanf(r.Header.Get("Location"), "/kb/%d", &kbID)
	kb, err := app.Store.KB(ctx, u.ID, kbID)
	if err != nil || kb.Dims != 256 {
		t.Fatalf("knowledge base %+v (%v), want 256 dimensions probed from the model", kb, err)
	}

	r = upload(t, c, kbID, map[string]string{"lisbon.md": tramGuide, "photo.png": "\x89PNG\r\n\x1a\n binary",
		"huge.txt": strings.Repeat("too long ", 1000)})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("upload: %d %s", r.StatusCode, r.Body)
	}
	page := c.Get(fmt.Sprintf("/kb/%d", kbID))
	if !strings.Contains(page.Body, "1 file(s) added") || !strings.Contains(page.Body, "photo.png: unsupported file type: Weft reads PDF, DOCX, HTML, Markdown, plain text and CSV") ||
		!strings.Contains(page.Body, "huge.txt: larger than the limit of 4 KB a file") {
		t.Errorf("the upload's outcome is not shown: %s", page.Body)
	}
	r = upload(t, c, kbID, map[string]string{"copy.md": tramGuide})
	if page := c.Get(fmt.Sprintf("/kb/%d", kbID)); !strings.Contains(page.Body, "copy.md: the same content is already in this knowledge base (as lisbon.md)") {
		t.Errorf("a duplicate was not named")
	}
	docs := waitDocs(t, app.Store, u.ID, kbID)
	if len(docs) != 1 || docs[0].Status != db.DocReady || docs[0].Chunks == 0 || docs[0].Format != "markdown" {
		t.Fatalf("documents = %+v, want one ready markdown document", docs)
	}

	// The retrieval view ranks passages and says how.
	view := c.Get(fmt.Sprintf("/kb/%d?q=%s", kbID, url.QueryEscape("tram to Alfama")))
	for _, want := range []string{`data-testid="kb-results"`, "Vector rank", "Text rank", "Fused score", "Tram 28 climbs"} {
		if !strings.Contains(view.Body, want) {
			t.Errorf("the retrieval view lacks %q", want)
		}
	}
	// And why: the words matched, stemmed ("tram" in "Trams"), with what
	// each added, and the meaning's part.
	if !regexp.MustCompile(`data-testid="kb-why">words: [^<]*\btram \d+\.\d\d[^<]*BM25 [^<]*; meaning: similarity`).MatchString(view.Body) {
		t.Errorf("the retrieval view does not say why the first passage ranked: %s", view.Body)
	}
	// And how closely the question's words sit together (passage scoring).
	if !regexp.MustCompile(`data-testid="kb-why">[^<]*; words together: best window \d+\.\d\d \(passage part 0\.\d\d\)`).MatchString(view.Body) {
		t.Errorf("the retrieval view does not show the passage part: %s", view.Body)
	}

	// Ask with the knowledge base attached from the composer, as a role:
	// the rag route goes through the same assembler as chat.
	role, err := app.Store.CreateRole(ctx, u.ID, db.RoleInput{Name: "Guide", Prompt: "You are a tour guide.", Params: db.RoleParams{Temperature: ptrTo(0.1)}})
	if err != nil {
		t.Fatal(err)
	}
	r = c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(ws.ID)}, "kb_present": {"1"}, "kb": {fmt.Sprint(kbID)},
		"role": {fmt.Sprint(role.ID)}, "content": {"Which tram goes through Alfama?"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d", r.StatusCode)
	}
	var thread int64
	fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &thread)
	run := waitIdle(t, app.Store, u.ID, thread)
	if run.Kind != "rag" {
		t.Errorf("route = %s, want rag", run.Kind)
	}
	req := trRequestFor(t, app.Fake, "Which tram goes through Alfama?")
	sys := req.Messages[0].Content
	if !strings.Contains(sys, "Cite the sources") || !strings.Contains(sys, "[1] lisbon.md, section \"Lisbon travel notes › Trams\"") ||
		!strings.Contains(sys, "Tram 28 climbs from Martim Moniz") {
		t.Errorf("the model did not get numbered sources: %q", sys)
	}
	if !strings.HasPrefix(sys, "You are a tour guide.\n\n") || req.Options["temperature"] != 0.1 || req.Options["num_ctx"] == nil {
		t.Errorf("the rag request lacks the role's prompt (first) and parameters: options %v, system %.80q", req.Options, sys)
	}
	answer, err := app.Store.Message(ctx, u.ID, *run.AssistantMessageID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(answer.Metadata.Raw), `"cited": true`) || !strings.Contains(string(answer.Metadata.Raw), `"route": "rag"`) {
		t.Errorf("answer metadata = %s", answer.Metadata.Raw)
	}
	tp := c.Get(fmt.Sprintf("/t/%d", thread))
	if !strings.Contains(tp.Body, fmt.Sprintf(`href="/m/%d/sources/1" data-testid="citation" data-document-id="%d"`, answer.ID, docs[0].ID)) {
		t.Errorf("the answer has no citation link to the source: %s", tp.Body)
	}
	src := c.Get(fmt.Sprintf("/m/%d/sources/1", answer.ID))
	for _, want := range []string{"lisbon.md", "Lisbon travel notes › Trams", "Tram 28 climbs", "source-vector-rank", "source-fused", `data-testid="source-why">words: `} {
		if src.StatusCode != http.StatusOK || !strings.Contains(src.Body, want) {
			t.Errorf("the source page lacks %q (%d)", want, src.StatusCode)
		}
	}

	// Nothing relevant: an explicit answer, without asking the model.
	before := len(trStreamed(app.Fake))
	c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"xylophone quantum zebra"}})
	run = waitIdle(t, app.Store, u.ID, thread)
	none, err := app.Store.Message(ctx, u.ID, *run.AssistantMessageID)
	if err != nil {
		t.Fatal(err)
	}
	if none.Status != db.MsgComplete || !strings.HasPrefix(none.Content, "Nothing relevant was found in “Travel”") ||
		!strings.Contains(string(none.Metadata.Raw), `"nothing_found": true`) {
		t.Errorf("nothing found answer = %s %q %s", none.Status, none.Content, none.Metadata.Raw)
	}
	if len(trStreamed(app.Fake)) != before {
		t.Errorf("the model was asked although nothing was found")
	}

	// Another user sees none of it.
	other := testenv.NewClient(t, app.TS.URL)
	other.Register("other@example.com", password)
	for _, p := range []string{fmt.Sprintf("/kb/%d", kbID), fmt.Sprintf("/m/%d/sources/1", answer.ID), fmt.Sprintf("/kb/%d?q=tram", kbID)} {
		if r := other.Get(p); r.StatusCode != http.StatusNotFound {
			t.Errorf("another user GET %s = %d", p, r.StatusCode)
		}
	}

	// Deleting the knowledge base keeps the thread, detached.
	kbPage := c.Get(fmt.Sprintf("/kb/%d", kbID))
	if !strings.Contains(kbPage.Body, "1 thread(s) will be detached from it (they are kept)") {
		t.Errorf("the delete confirmation does not name the affected threads")
	}
	if r := c.Post(fmt.Sprintf("/kb/%d/delete", kbID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	if _, err := app.Store.Thread(ctx, u.ID, thread); err != nil {
		t.Errorf("the thread went with the knowledge base: %v", err)
	}
	var chunks, attached int
	app.Store.Pool.QueryRow(ctx, "SELECT count(*) FROM kb_chunks WHERE kb_id = $1", kbID).Scan(&chunks)
	app.Store.Pool.QueryRow(ctx, "SELECT count(*) FROM thread_kbs WHERE thread_id = $1", thread).Scan(&attached)
	if chunks != 0 || attached != 0 {
		t.Errorf("after delete: %d chunks, %d attachments left", chunks, attached)
	}
}

func ptrTo[T any](v T) *T { return &v }
