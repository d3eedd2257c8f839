package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"weft/handlers"
	"weft/internal/testenv"
)

func TestEveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	c := testenv.NewClient(t, ts.URL)
	for _, path := range []string{"/login", "/static/app.js", "/no-such-page", "/healthz"} {
		r := c.Get(path)
		csp := r.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
	}
	page := c.Get("/login").Body
	if strings.Contains(page, "<script>") || strings.Contains(strings.ToLower(page), " onclick=") {
		t.Error("the login page carries inline script")
	}
}

func TestCrossOriginFormPostsAreRejected(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	c := testenv.NewClient(t, ts.URL)
	c.Register("csrf@example.com", password)
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/workspaces", strings.NewReader("name=Evil"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site POST = %d, want 403", resp.StatusCode)
	}
	if strings.Contains(c.Get("/workspaces").Body, "Evil") {
		t.Fatal("the cross-site POST created a workspace")
	}
}

func TestOversizedBodiesAreRefusedBeforeParsing(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{MaxBodyBytes: 4096})
	c := testenv.NewClient(t, ts.URL)
	c.Register("big@example.com", password)
	r := c.Post("/t", url.Values{"workspace_id": {"1"}, "content": {strings.Repeat("x", 10_000)}})
	if r.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(r.Body, "too large") {
		t.Fatalf("oversized send = %d", r.StatusCode)
	}
	if strings.Contains(c.Get("/").Body, `data-testid="thread-link"`) {
		t.Fatal("an oversized send created a thread")
	}
}

func TestErrorPagesNeverShowInternals(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	c := testenv.NewClient(t, ts.URL)
	c.Register("errs@example.com", password)
	for _, path := range []string{"/t/99999999", "/t/abc", "/t/-1", "/w/424242/threads", "/w/1/threads?id=x"} {
		r := c.Get(path)
		if r.StatusCode != http.StatusNotFound && r.StatusCode != http.StatusBadRequest {
			t.Errorf("%s = %d, want 404 or 400", path, r.StatusCode)
		}
		for _, leak := range []string{"pgx", "SQL", "sql:", "goroutine", ".go:", "no rows"} {
			if strings.Contains(r.Body, leak) {
				t.Errorf("%s shows %q", path, leak)
			}
		}
	}
}

func TestHealthReadinessAndMetricsEndpointsAnswer(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	c := testenv.NewClient(t, ts.URL)
	if r := c.Get("/healthz"); r.StatusCode != 200 {
		t.Fatalf("/healthz = %d", r.StatusCode)
	}
	if r := c.Get("/readyz"); r.StatusCode != 200 {
		t.Fatalf("/readyz = %d", r.StatusCode)
	}
	c.Get("/login")
	m := c.Get("/metrics")
	if !strings.Contains(m.Body, `weft_http_requests_total{code="200",method="GET",route="/login"}`) ||
		!strings.Contains(m.Body, "go_goroutines") {
		t.Fatalf("/metrics lacks the request counter:\n%.2000s", m.Body)
	}
}

func TestReadinessFailsWhenTheDatabaseIsGone(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ts := testenv.Server(t, store, handlers.Config{})
	store.Close()
	if r := testenv.NewClient(t, ts.URL).Get("/readyz"); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with a closed pool = %d, want 503", r.StatusCode)
	}
}
