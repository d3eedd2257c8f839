package handlers_test

import (
	"fmt"
	"testing"

	"weft/internal/testenv"
)

// What the address bar carries is not always text: a search or a
// retrieval question with bytes that are not UTF-8, or a NUL that
// PostgreSQL refuses in text, gets a page, never a server error.
func TestSearchesAnswerAnyQueryWithoutAServerError(t *testing.T) {
	t.Parallel()
	_, _, admin, _, _ := adminAndMember(t, testenv.Options{})
	r := admin.Post("/kb", map[string][]string{"name": {"Docs"}, "embed_model": {"embedder"}})
	if r.StatusCode != 303 {
		t.Fatalf("create a knowledge base = %d", r.StatusCode)
	}
	for _, q := range []string{"%FF%FE", "a%00b", "%00", "%C3"} {
		for _, path := range []string{"/search?q=" + q, fmt.Sprintf("%s?q=%s", r.Header.Get("Location"), q)} {
			if r := admin.Get(path); r.StatusCode >= 500 {
				t.Errorf("GET %s = %d", path, r.StatusCode)
			}
		}
	}
}
