package chat_test

import (
	"context"
	"strings"
	"testing"

	"weft/chat"
	"weft/internal/fakeollama"
)

func TestModelsListsChatModelsAndResolvesNamesLikeOllama(t *testing.T) {
	t.Parallel()
	fake := fakeollama.New(t, fakeollama.WithModels(
		fakeollama.Model{Name: "tiny", Capabilities: []string{"completion"}, ContextLength: 4096, Family: "llama"},
		fakeollama.Model{Name: "huge:70b", Capabilities: []string{"completion", "tools"}, ContextLength: 131072, Family: "llama"},
		fakeollama.Model{Name: "embedder", Capabilities: []string{"embedding"}, EmbeddingLength: 8, Family: "bert"},
	))
	ctx := context.Background()
	m := chat.NewModels(fake.Client(), fake.URL, "TINY", 8192)

	names := m.ChatModels(ctx)
	if len(names) != 2 || names[0] != "huge:70b" || names[1] != "tiny:latest" {
		t.Fatalf("chat models = %v, want huge:70b and tiny:latest (no embedding model)", names)
	}
	if d := m.Default(ctx); d != "tiny:latest" {
		t.Fatalf("default = %q, want WEFT_DEFAULT_MODEL as the server names it", d)
	}
	if n := m.NumCtx(ctx, "tiny"); n != 4096 {
		t.Fatalf("num_ctx(tiny) = %d, want the model's own 4096", n)
	}
	if n := m.NumCtx(ctx, "huge:70b"); n != 8192 {
		t.Fatalf("num_ctx(huge) = %d, want the 8192 cap", n)
	}
	if p := m.Problem(ctx); p != "" {
		t.Fatalf("problem with a healthy server: %q", p)
	}
	if d := chat.NewModels(fake.Client(), fake.URL, "", 0).Default(ctx); d != "huge:70b" {
		t.Fatalf("default without WEFT_DEFAULT_MODEL = %q, want the first chat model", d)
	}
}

func TestModelsSaysPlainlyWhenOllamaIsUnreachable(t *testing.T) {
	t.Parallel()
	fake := fakeollama.New(t)
	fake.SetDown(true)
	m := chat.NewModels(fake.Client(), "http://127.0.0.1:11434", "", 0)
	p := m.Problem(context.Background())
	if p == "" || !contains(p, "not reachable at http://127.0.0.1:11434") || !contains(p, "OLLAMA_HOST") {
		t.Fatalf("problem = %q", p)
	}
	if names := m.ChatModels(context.Background()); len(names) != 0 {
		t.Fatalf("models while down = %v", names)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
