package handlers_test

import (
	"bytes"
	"log"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// logBuffer collects what the default logger writes, from any goroutine.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Not parallel: it replaces the default logger to read what was logged.
// A share link's token is its only credential, so whatever is asked under
// /s/ — the page, a page above a message, a file, a path that does not
// exist — the request log names the link by its hint, never its token.
func TestAShareLinksTokenNeverReachesTheLogs(t *testing.T) {
	var logs logBuffer
	prev, prevOut, prevFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() {
		// SetDefault sent the log package's output to the handler too.
		slog.SetDefault(prev)
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
	})

	e := newShareEnv(t)
	thread := e.startThread("quebec")
	_, link := e.share(thread, url.Values{"files": {"on"}})
	tok := strings.TrimPrefix(link, "/s/")
	for _, p := range []string{link, link + "?before=1", link + "/", link + "/attachments/1", link + "/media/1/thumb", link + "x"} {
		e.anon.Get(p)
	}
	got := logs.String()
	if strings.Contains(got, tok[:12]) {
		t.Errorf("the log holds the share link's token:\n%s", got)
	}
	if !strings.Contains(got, "path=/s/"+tok[:6]+"…/attachments/1 ") {
		t.Errorf("the log does not say which link a request was for:\n%s", got)
	}
}

// Every answer under /s/ carries the share headers, a path or method the
// routes do not know included: its URL holds a token all the same.
func TestEveryAnswerUnderASharePathCarriesTheShareHeaders(t *testing.T) {
	t.Parallel()
	e := newShareEnv(t)
	thread := e.startThread("tango")
	_, link := e.share(thread, nil)
	for _, req := range []struct{ method, path string }{
		{"GET", link}, {"GET", link + "/"}, {"GET", link + "/attachments/1/more"}, {"GET", "/s/"}, {"POST", link},
	} {
		r := e.anon.Do(req.method, req.path, nil)
		if r.StatusCode == http.StatusOK && req.path != link {
			t.Errorf("%s %s = 200", req.method, req.path)
		}
		for h, v := range map[string]string{"X-Robots-Tag": "noindex, nofollow", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
			if got := r.Header.Get(h); got != v {
				t.Errorf("%s %s (%d): %s = %q, want %q", req.method, req.path, r.StatusCode, h, got, v)
			}
		}
	}
}
