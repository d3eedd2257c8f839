package rag

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/ollama/ollama/api"
)

// The embedding probe's failures keep the words users saw when they were
// classified by text; now the Ollama client's types decide.
func TestEmbedProblemTellsEmbeddingFailuresApartByType(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unreachable", &url.Error{Op: "Post", URL: "http://127.0.0.1:11434/api/embed", Err: errors.New("connection refused")}, "Ollama is not reachable."},
		{"no such model", api.StatusError{StatusCode: 404, ErrorMessage: `model "x" not found, try pulling it first`}, "it is not on the Ollama server (an administrator can pull it on the Models page first)."},
		{"cannot embed", fmt.Errorf("embed: %w", api.StatusError{StatusCode: 501, ErrorMessage: "this model does not support embeddings"}), "it cannot make embeddings; choose an embedding model."},
		{"refused", api.StatusError{StatusCode: 400, ErrorMessage: "bad"}, "Ollama refused it."},
		{"a lookalike text", errors.New("Post failed: not found; does not support embeddings"), "Ollama refused it."},
	} {
		if got := embedProblem(context.Background(), tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
