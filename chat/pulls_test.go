package chat_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/internal/fakeollama"
)

// chat.OllamaClient.Pull reads /api/pull like the official client: the
// same progress lines, the same errors (an error line, a refusal before
// the stream, a raw reply that is no JSON).
func TestOllamaPullGivesWhatTheOfficialClientGives(t *testing.T) {
	t.Parallel()
	fake := fakeollama.New(t, fakeollama.WithRegistry(fakeollama.PullModel{Model: fakeollama.Model{Name: "qwen3:8b"},
		Layers: []int64{1000, 20}, Steps: 3}))
	raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write([]byte("{\"status\":\"pulling manifest\"}\r\n\nnot json\n"))
	}))
	t.Cleanup(raw.Close)
	type pull interface {
		Pull(ctx context.Context, req *api.PullRequest, fn api.PullProgressFunc) error
	}
	for _, tc := range []struct{ name, server, model string }{
		{"success", fake.URL, "qwen3:8b"},
		{"cached", fake.URL, "tiny"},
		{"not in the registry", fake.URL, "nope"},
		{"invalid name", fake.URL, "bad name"},
		{"raw lines", raw.URL, "x"},
	} {
		u, _ := url.Parse(tc.server)
		var got [2][]api.ProgressResponse
		var errs [2]string
		for i, c := range []pull{api.NewClient(u, http.DefaultClient), chat.NewOllamaClient(u)} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.Pull(ctx, &api.PullRequest{Model: tc.model}, func(r api.ProgressResponse) error {
				got[i] = append(got[i], r)
				return nil
			})
			cancel()
			if err != nil {
				errs[i] = err.Error()
			}
		}
		if !reflect.DeepEqual(got[0], got[1]) || errs[0] != errs[1] {
			t.Errorf("%s: official %v %q, weft %v %q", tc.name, got[0], errs[0], got[1], errs[1])
		}
		if tc.name == "success" && (len(got[1]) != 12 || got[1][11].Status != "success") {
			t.Errorf("success: %v", got[1])
		}
	}
}
