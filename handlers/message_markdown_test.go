package handlers_test

import (
	"context"
	"strings"
	"testing"

	"weft/internal/testenv"
)

func TestTheMarkdownOfAMessageIsItsSourceTextAndOnlyForItsOwner(t *testing.T) {
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("copy@example.com", "correct horse battery")
	answer := "**Bold**, $x^2$ and <b>tags</b>\n\n```go\nx := 1\n```\n"
	path := importThread(t, c, []map[string]any{
		{"id": 1, "role": "user", "content": "what is *this*?\r\n\r\nsent from a form"},
		{"id": 2, "parent": 1, "role": "assistant", "content": answer},
	})
	var id, question string
	if err := app.Store.Pool.QueryRow(context.Background(),
		"SELECT id::text FROM messages WHERE role = 'assistant'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := app.Store.Pool.QueryRow(context.Background(),
		"SELECT id::text FROM messages WHERE role = 'user'").Scan(&question); err != nil {
		t.Fatal(err)
	}

	page := c.Get(path)
	if n := strings.Count(page.Body, `data-testid="copy-message"`); n != 2 {
		t.Errorf("the thread shows %d copy buttons, want one per message (2)", n)
	}
	if !strings.Contains(page.Body, `data-copy-message="/m/`+id+`/markdown"`) {
		t.Errorf("the answer's copy button does not point at its markdown")
	}

	got := c.Get("/m/" + id + "/markdown")
	if got.StatusCode != 200 || got.Body != answer {
		t.Fatalf("GET markdown = %d %q, want 200 and the answer's source %q", got.StatusCode, got.Body, answer)
	}
	if ct := got.Header.Get("Content-Type"); ct != "text/markdown; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cc := got.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q", cc)
	}
	// The markup in the text stays text: never sniffed as HTML.
	if n := got.Header.Get("X-Content-Type-Options"); n != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", n)
	}

	if got := c.Get("/m/" + question + "/markdown"); got.Body != "what is *this*?\n\nsent from a form" {
		t.Errorf("the question's markdown is %q, want its lines ended by \\n", got.Body)
	}

	other := testenv.NewClient(t, app.TS.URL)
	other.Register("other@example.com", "correct horse battery")
	if r := other.Get("/m/" + id + "/markdown"); r.StatusCode != 404 || strings.Contains(r.Body, "Bold") {
		t.Errorf("another user got %d %.100q, want a 404 without the text", r.StatusCode, r.Body)
	}
}
