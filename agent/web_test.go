package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// webServer is an httptest server on 127.0.0.1 that counts its requests.
type webServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newWebServer(t *testing.T, h http.HandlerFunc) *webServer {
	t.Helper()
	s := &webServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// allowOnly returns a Fetcher whose policy lets s through and nothing else
// the real policy blocks.
func allowOnly(t *testing.T, s *webServer) *Fetcher {
	t.Helper()
	f := NewFetcher()
	f.allowed = []netip.AddrPort{netip.MustParseAddrPort(s.Listener.Addr().String())}
	return f
}

// toolError asserts that err is a *ToolError whose text contains want.
func toolError(t *testing.T, err error, want string) {
	t.Helper()
	var te *ToolError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v (%T), want a *ToolError", err, err)
	}
	if !strings.Contains(te.Msg, want) {
		t.Errorf("message %q does not say %q", te.Msg, want)
	}
	for _, internal := range []string{"dial", "tcp", "context", ".go", "%!"} {
		if strings.Contains(te.Msg, internal) {
			t.Errorf("message %q shows an internal (%q)", te.Msg, internal)
		}
	}
}

func page(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, body)
	}
}

func TestWebFetchOfALoopbackServerIsBlockedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, page("<p>secret</p>"))
	_, err := NewFetcher().Fetch(t.Context(), s.URL)
	toolError(t, err, "web fetch blocked: 127.0.0.1 resolves to a private or local address")
	if n := s.hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want 0", n)
	}
}

func TestWebFetchReturnsAPageAsReadableText(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, page(`<!doctype html><html><head><title>The  Weft
		page</title><style>body { color: red }</style><script>alert("x")</script></head>
		<body><nav><a href="/">Home</a></nav><h1>Welcome</h1><p>First   line
		of text.</p><script>var hidden = 1;</script><h2>Details</h2><p>Second &amp; last.</p></body></html>`))
	got, err := allowOnly(t, s).Fetch(t.Context(), s.URL+"/doc")
	if err != nil {
		t.Fatal(err)
	}
	want := "Title: The Weft page\n\n# Welcome\n\nFirst line of text.\n\n## Details\n\nSecond & last."
	if got.Text != want {
		t.Errorf("text:\n got %q\nwant %q", got.Text, want)
	}
	if got.URL != s.URL+"/doc" || got.ContentType != "text/html" || got.Truncated {
		t.Errorf("result = %+v", got)
	}
}

func TestWebFetchReadsPlainTextAndJSONAsTheyAre(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/notes.txt":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "line one  \r\n\r\n\r\n\x00line two\n")
		case "/data.json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"a": [1, 2]}`)
		case "/latin1":
			w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
			w.Write([]byte("caf\xe9"))
		}
	})
	f := allowOnly(t, s)
	for path, want := range map[string]string{
		"/notes.txt": "line one\n\nline two",
		"/data.json": `{"a": [1, 2]}`,
		"/latin1":    "café",
	} {
		got, err := f.Fetch(t.Context(), s.URL+path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if got.Text != want {
			t.Errorf("%s: text %q, want %q", path, got.Text, want)
		}
	}
}

func TestWebFetchCutsABodyOverMaxBytes(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("abcdefghi\n", 10_000))
	})
	f := allowOnly(t, s)
	f.MaxBytes = 1000
	got, err := f.Fetch(t.Context(), s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Truncated || len(got.Text) > 1000 || len(got.Text) < 900 {
		t.Errorf("truncated %v with %d bytes of text, want truncated at about 1000", got.Truncated, len(got.Text))
	}
}

func TestWebFetchCutsTextOverMaxTextWithoutSplittingACharacter(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, strings.Repeat("é", 100))
	})
	f := allowOnly(t, s)
	f.MaxText = 51
	got, err := f.Fetch(t.Context(), s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Truncated || got.Text != strings.Repeat("é", 25) {
		t.Errorf("truncated %v, text %q, want 25 é", got.Truncated, got.Text)
	}
}

func TestWebFetchThatTakesTooLongTimesOut(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	f := allowOnly(t, s)
	f.Timeout = 100 * time.Millisecond
	start := time.Now()
	_, err := f.Fetch(t.Context(), s.URL)
	toolError(t, err, "web fetch timed out after 100ms")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the fetch took %s", d)
	}
}

func TestWebFetchStoppedByTheCallerIsNotAToolError(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := allowOnly(t, s).Fetch(ctx, s.URL)
	var te *ToolError
	if errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v (%T), want the caller's context error", err, err)
	}
}

func TestWebFetchRefusesAPageThatIsNotText(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	s := newWebServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/image":
			w.Header().Set("Content-Type", "image/png")
		case "/untyped":
			w.Header()["Content-Type"] = nil // no header, no sniffing by the server
		}
		w.Write(png)
	})
	f := allowOnly(t, s)
	_, err := f.Fetch(t.Context(), s.URL+"/image")
	toolError(t, err, "the page is not text (image/png)")
	_, err = f.Fetch(t.Context(), s.URL+"/untyped")
	toolError(t, err, "the page is not text (image/png)")
}

func TestWebFetchReportsAnHTTPError(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, http.NotFound)
	_, err := allowOnly(t, s).Fetch(t.Context(), s.URL+"/missing")
	toolError(t, err, "the server answered 404 Not Found")
}

func TestWebFetchFollowsARedirectOnAnAllowedHost(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusFound)
			return
		}
		page("<p>moved here</p>")(w, r)
	})
	got, err := allowOnly(t, s).Fetch(t.Context(), s.URL+"/old")
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != s.URL+"/new" || got.Text != "moved here" {
		t.Errorf("result = %+v, want the text of %s/new", got, s.URL)
	}
}

func TestWebFetchBlocksARedirectToAPrivateAddress(t *testing.T) {
	t.Parallel()
	inside := newWebServer(t, page("<p>secret</p>"))
	s := newWebServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inside.URL+"/admin", http.StatusFound)
	})
	_, err := allowOnly(t, s).Fetch(t.Context(), s.URL)
	toolError(t, err, "web fetch blocked: 127.0.0.1 resolves to a private or local address")
	if s.hits.Load() != 1 || inside.hits.Load() != 0 {
		t.Errorf("hits: allowed server %d (want 1), blocked server %d (want 0)", s.hits.Load(), inside.hits.Load())
	}
}

func TestWebFetchRefusesARedirectToAnotherScheme(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"file:///etc/passwd", "gopher://example.com/1", "https://user:pw@example.com/"} {
		s := newWebServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", target)
			w.WriteHeader(http.StatusFound)
		})
		_, err := allowOnly(t, s).Fetch(t.Context(), s.URL)
		toolError(t, err, "web fetch refused a redirect")
	}
}

func TestWebFetchStopsAfterTooManyRedirects(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path+"x", http.StatusFound)
	})
	f := allowOnly(t, s)
	f.MaxRedirects = 3
	_, err := f.Fetch(t.Context(), s.URL+"/")
	toolError(t, err, "web fetch stopped: the page redirects more than 3 times")
	if n := s.hits.Load(); n != 4 {
		t.Errorf("the server got %d requests, want 4", n)
	}
}

func TestWebFetchRefusesURLsItMustNotFetch(t *testing.T) {
	t.Parallel()
	s := newWebServer(t, page("<p>hi</p>"))
	f := allowOnly(t, s)
	tests := []struct{ url, want string }{
		{strings.Replace(s.URL, "http://", "http://user:pass@", 1), "user name or password"},
		{strings.Replace(s.URL, "http://", "http://user@", 1), "user name or password"},
		{"ftp://example.com/file", "only http and https pages can be fetched, not ftp"},
		{"file:///etc/passwd", "only http and https pages can be fetched, not file"},
		{"gopher://example.com/", "not gopher"},
		{"example.com/page", "needs a full URL"},
		{"http:///path", "no host name"},
		{"http://%zz", "needs a full URL"},
	}
	for _, tt := range tests {
		_, err := f.Fetch(t.Context(), tt.url)
		toolError(t, err, tt.want)
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want 0", n)
	}
}

func TestWebFetchURLToolCitesThePage(t *testing.T) {
	t.Parallel()
	tools := WebTools()
	if len(tools) != 1 || tools[0].Name != "fetch_url" || tools[0].Class != ClassNetwork {
		t.Fatalf("tools = %+v", tools)
	}
	run := tools[0].Run
	env := &Env{Fetch: func(ctx context.Context, url string) (FetchResult, error) {
		return FetchResult{URL: url + "/final", ContentType: "text/html", Text: "Hello.", Truncated: true}, nil
	}}
	got, err := run(t.Context(), env, Args{"url": "https://example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.Output, "URL: https://example.com/final\n\nHello.") || !strings.Contains(got.Output, "cut") {
		t.Errorf("output = %q", got.Output)
	}
	if len(got.Sources) != 1 || got.Sources[0] != (Source{Kind: "web", Label: "https://example.com/final"}) {
		t.Errorf("sources = %+v", got.Sources)
	}

	_, err = run(t.Context(), &Env{}, Args{"url": "https://example.com"})
	toolError(t, err, "web fetch is not available")
	_, err = run(t.Context(), env, Args{})
	toolError(t, err, `missing argument "url"`)
}
