package handlers_test

import (
	"bytes"
	"log/slog"
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
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

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
