package rag

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"weft/chat"
)

// With several model servers, an embedding model whose servers do not
// answer is reported at those servers, not at the whole OLLAMA_HOST list.
func TestEmbedErrorsNameTheServersThatHaveTheModel(t *testing.T) {
	s := &Service{cfg: Config{OllamaHost: "http://gpu1:11434, http://gpu2:11434"}}
	down := &chat.UnreachableError{Model: "embedder", Servers: []string{"http://gpu2:11434"},
		Err: &url.Error{Op: "Post", URL: "http://gpu2:11434/api/embed", Err: errors.New("connection refused")}}
	if got := s.describeEmbedError(down, "embedder"); !strings.HasPrefix(got, "Ollama is not reachable at http://gpu2:11434 (or stopped answering).") {
		t.Errorf("model on a down server: %q", got)
	}
	plain := &url.Error{Op: "Post", URL: "http://gpu1:11434/api/embed", Err: errors.New("connection refused")}
	if got := s.describeEmbedError(plain, "embedder"); !strings.HasPrefix(got, "Ollama is not reachable at http://gpu1:11434, http://gpu2:11434 ") {
		t.Errorf("a plain connection error: %q", got)
	}
}
