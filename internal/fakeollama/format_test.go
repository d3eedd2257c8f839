package fakeollama

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ollama/ollama/api"
)

func TestAStructuredOutputRequestGetsJSONInItsFormatMadeFromTheQuestion(t *testing.T) {
	t.Parallel()
	s := New(t)
	c := client(t, s)
	ask := func(format string, stream bool) string {
		t.Helper()
		var out string
		req := &api.ChatRequest{Model: "tiny", Stream: &stream, Format: json.RawMessage(format),
			Messages: []api.Message{{Role: "system", Content: "Summarize nothing."}, {Role: "user", Content: "[[slow:1ms]] Which tram climbs to Graça?"}}}
		if err := c.Chat(context.Background(), req, func(r api.ChatResponse) error { out += r.Message.Content; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct{ name, format, want string }{
		{"a schema of a list of queries", `{"type":"object","properties":{"queries":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3}},"required":["queries"]}`,
			`{"queries":["Which tram climbs to Graça?"]}`},
		{"a schema with every kind of value", `{"type":"object","properties":{"n":{"type":"integer","minimum":2},"ok":{"type":["boolean","null"]},` +
			`"kind":{"enum":["a","b"]},"pair":{"type":"array","minItems":2,"items":{"anyOf":[{"type":"number"},{"type":"string"}]}},"note":{}}}`,
			`{"kind":"a","n":2,"note":"Which tram climbs to Graça?","ok":false,"pair":[0,0]}`},
		{"json", `"json"`, `"Which tram climbs to Graça?"`},
	} {
		for _, stream := range []bool{false, true} {
			if got := ask(tc.format, stream); got != tc.want {
				t.Errorf("%s (stream %v): %s, want %s", tc.name, stream, got, tc.want)
			}
		}
	}
	// Without a format, a non-streamed request is still a summary or title.
	var plain string
	if err := c.Chat(context.Background(), &api.ChatRequest{Model: "tiny", Stream: new(bool),
		Messages: []api.Message{{Role: "user", Content: "Which tram climbs to Graça?"}}}, func(r api.ChatResponse) error { plain += r.Message.Content; return nil }); err != nil {
		t.Fatal(err)
	}
	if plain != "Title: Which tram climbs" {
		t.Errorf("without a format: %q", plain)
	}
}
