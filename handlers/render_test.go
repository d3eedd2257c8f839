package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/views"
)

// importThread posts a JSON export to /import and returns the new thread's
// path.
func importThread(t *testing.T, c *testenv.Client, messages []map[string]any) string {
	t.Helper()
	file, err := json.Marshal(map[string]any{"format": "weft-thread", "version": 1, "title": "imported",
		"messages": messages, "active_leaf": messages[len(messages)-1]["id"]})
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "thread.json")
	fw.Write(file)
	mw.Close()
	req, _ := http.NewRequest("POST", c.Base+"/import", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp := c.Send(req)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/t/") {
		t.Fatalf("import = %d %q: %.300s", resp.StatusCode, loc, resp.Body)
	}
	return loc
}

func TestAnAnswerIsRenderedOnceAndShownFromStoreUntilTheRendererVersionChanges(t *testing.T) {
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("render@example.com", "correct horse battery")
	path := importThread(t, c, []map[string]any{
		{"id": 1, "role": "user", "content": "hi"},
		{"id": 2, "parent": 1, "role": "assistant", "content": "**bold** answer"},
	})
	ctx := context.Background()
	var id int64
	if err := app.Store.Pool.QueryRow(ctx, "SELECT id FROM messages WHERE role = 'assistant'").Scan(&id); err != nil {
		t.Fatal(err)
	}

	// The first view renders the imported answer and keeps it.
	if page := c.Get(path); !strings.Contains(page.Body, "<strong>bold</strong> answer") {
		t.Fatalf("first view lacks the rendered answer: %.500s", page.Body)
	}
	var stored string
	var version int
	if err := app.Store.Pool.QueryRow(ctx, "SELECT html, version FROM message_renderings WHERE message_id = $1", id).Scan(&stored, &version); err != nil {
		t.Fatal(err)
	}
	if version != views.RendererVersion || !strings.Contains(stored, "<strong>bold</strong>") {
		t.Fatalf("stored %q (version %d), want the rendering of version %d", stored, version, views.RendererVersion)
	}

	// A second view shows what is stored, without rendering: a marker put
	// in its place is what the page shows.
	if _, err := app.Store.Pool.Exec(ctx, "UPDATE message_renderings SET html = '<p>from the store</p>' WHERE message_id = $1", id); err != nil {
		t.Fatal(err)
	}
	before := views.RenderCount()
	page := c.Get(path)
	if !strings.Contains(page.Body, "<p>from the store</p>") || strings.Contains(page.Body, "<strong>bold</strong>") {
		t.Fatalf("second view did not use the stored rendering: %.500s", page.Body)
	}
	if n := views.RenderCount() - before; n != 0 {
		t.Errorf("second view rendered markdown %d times", n)
	}

	// A rendering of another renderer version is rendered again and
	// stored back.
	if _, err := app.Store.Pool.Exec(ctx, "UPDATE message_renderings SET version = $2 WHERE message_id = $1", id, views.RendererVersion-1); err != nil {
		t.Fatal(err)
	}
	if page := c.Get(path); !strings.Contains(page.Body, "<strong>bold</strong> answer") || strings.Contains(page.Body, "from the store") {
		t.Fatalf("an old version's rendering was shown: %.500s", page.Body)
	}
	if err := app.Store.Pool.QueryRow(ctx, "SELECT html, version FROM message_renderings WHERE message_id = $1", id).Scan(&stored, &version); err != nil {
		t.Fatal(err)
	}
	if version != views.RendererVersion || !strings.Contains(stored, "<strong>bold</strong>") {
		t.Fatalf("not stored back: %q (version %d)", stored, version)
	}

	// Changing the text forgets the rendering, whichever query does it.
	if _, err := app.Store.Pool.Exec(ctx, "UPDATE messages SET content = '_new_ text' WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	if page := c.Get(path); !strings.Contains(page.Body, "<em>new</em> text") {
		t.Fatalf("a changed text shows its old rendering: %.500s", page.Body)
	}
}

func TestAFinishedAnswerIsStoredRenderedBeforeAnyPageView(t *testing.T) {
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	app.Fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if req.Stream != nil && !*req.Stream {
			return fakeollama.DefaultReply(req)
		}
		return fakeollama.Reply{Chunks: []string{"Here is ", "**the answer**."}}
	})
	newThread(t, app)
	ctx := context.Background()
	var stored *string
	var version int
	var err error
	if !testwait.Until(20*time.Second, func() bool {
		err = app.Store.Pool.QueryRow(ctx, `SELECT r.html, r.version FROM message_renderings r JOIN messages m ON m.id = r.message_id
			WHERE m.role = 'assistant' AND m.status = 'complete'`).Scan(&stored, &version)
		return err == nil && stored != nil
	}) {
		t.Fatalf("no stored rendering of the finished answer (last error %v)", err)
	}
	if version != views.RendererVersion || !strings.Contains(*stored, "<strong>the answer</strong>") {
		t.Fatalf("stored %q (version %d)", *stored, version)
	}
}

func TestALongPathologicalImportOpensFast(t *testing.T) {
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("long@example.com", "correct horse battery")
	// 1 M characters of "[a](" in an answer, and 160 KB (within the
	// markdown limit) in another.
	path := importThread(t, c, []map[string]any{
		{"id": 1, "role": "user", "content": strings.Repeat("[a](", 250_000)},
		{"id": 2, "parent": 1, "role": "assistant", "content": strings.Repeat("[a](", 250_000)},
		{"id": 3, "parent": 2, "role": "user", "content": "again"},
		{"id": 4, "parent": 3, "role": "assistant", "content": strings.Repeat("[a](", 40_000)},
	})
	start := time.Now()
	first := c.Get(path)
	firstTook := time.Since(start)
	start = time.Now()
	second := c.Get(path)
	secondTook := time.Since(start)
	t.Logf("opening the imported thread: first view %v, second %v", firstTook, secondTook)
	for _, p := range []testenv.Response{first, second} {
		if p.StatusCode != 200 || strings.Count(p.Body, "[a](") < 250_000 {
			t.Fatalf("the thread did not show its text: %d %.300s", p.StatusCode, p.Body)
		}
	}
}
