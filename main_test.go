package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// These tests run the real binary, as an operator would: built with
// `go build`, configured only by the environment, stopped by signals.

func TestMain(m *testing.M) { testenv.Main(m) }

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func weftBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "weft-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "weft")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a running weft process.
type proc struct {
	cmd  *exec.Cmd
	base string
	logs *strings.Builder
	done chan error
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startWeft runs the binary and waits until it is ready.
func startWeft(t *testing.T, addr string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(weftBinary(t))
	cmd.Env = append(os.Environ(), append([]string{"WEFT_ADDR=" + addr, "WEFT_DATA_DIR=" + t.TempDir()}, env...)...)
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = &syncWriter{b: logs}, &syncWriter{b: logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, base: "http://" + addr, logs: logs, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	ready := testwait.Until(30*time.Second, func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("weft exited before it was ready: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(p.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if !ready {
		t.Fatalf("weft not ready after 30 s:\n%s", logs.String())
	}
	return p
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// sendSlow registers a user through HTTP and starts a long answer; it
// returns the client and the thread's path.
func sendSlow(t *testing.T, p *proc, content string) (*testenv.Client, string) {
	t.Helper()
	c := testenv.NewClient(t, p.base)
	c.Register("proc@example.com", "correct horse battery")
	ws := regexp.MustCompile(`name="workspace_id" value="(\d+)"`).FindStringSubmatch(c.Get("/").Body)
	r := c.Post("/t", url.Values{"workspace_id": {ws[1]}, "content": {content}})
	loc := r.Header.Get("Location")
	if r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/t/") {
		t.Fatalf("send = %d %q", r.StatusCode, loc)
	}
	path, _, _ := strings.Cut(loc, "#")
	return c, path
}

// latestAnswer reads the newest assistant message straight from the
// database: the row's text, then the progress saved after it (a streaming
// answer's text is appended there, migration 016).
func latestAnswer(t *testing.T, store *db.DB) (status, content string) {
	t.Helper()
	err := store.Pool.QueryRow(context.Background(),
		`SELECT status, content || COALESCE((SELECT string_agg(p.content, '' ORDER BY p.seq) FROM message_progress p WHERE p.message_id = m.id), '')
		FROM messages m WHERE role = 'assistant' ORDER BY id DESC LIMIT 1`).Scan(&status, &content)
	if err != nil {
		t.Fatal(err)
	}
	return status, content
}

func waitAnswer(t *testing.T, store *db.DB, what string, cond func(status, content string) bool) (string, string) {
	t.Helper()
	var s, c string
	if !testwait.Until(20*time.Second, func() bool {
		s, c = latestAnswer(t, store)
		return cond(s, c)
	}) {
		t.Fatalf("timed out waiting for %s (status %s, %d bytes)", what, s, len(c))
	}
	return s, c
}

func TestTheBinaryMigratesServesAndStopsGracefullyOnSIGTERM(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := fakeollama.New(t)
	p := startWeft(t, freeAddr(t), "DATABASE_URL="+testenv.URLFor(t, store), "OLLAMA_HOST="+fake.URL,
		"WEFT_DEFAULT_MODEL=tiny", "WEFT_SHUTDOWN_GRACE_SECONDS=1")
	if r, err := http.Get(p.base + "/healthz"); err != nil || r.StatusCode != 200 {
		t.Fatalf("/healthz: %v", err)
	}
	sendSlow(t, p, "[[slow:50ms]][[tokens:2000]]")
	waitAnswer(t, store, "some flushed text", func(s, c string) bool { return strings.HasPrefix(c, "tok1 tok2 ") })

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("weft exited with %v after SIGTERM:\n%s", err, p.logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("weft did not stop within 20 s of SIGTERM:\n%s", p.logs.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	status, content := latestAnswer(t, store)
	if status != "interrupted" || !strings.HasPrefix(content, "tok1 ") {
		t.Fatalf("an answer cut by shutdown is %s with %q", status, content)
	}
	if fake.Cancellations() != 1 {
		t.Fatalf("the model request was not cancelled at shutdown (cancellations %d)", fake.Cancellations())
	}
}

func TestBrowserAfterACrashTheAnswerIsInterruptedWithItsTextAndCanBeRetried(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := fakeollama.New(t)
	addr := freeAddr(t)
	env := []string{"DATABASE_URL=" + testenv.URLFor(t, store), "OLLAMA_HOST=" + fake.URL, "WEFT_DEFAULT_MODEL=tiny"}
	p := startWeft(t, addr, env...)

	ctx := testenv.Browser(t, 120*time.Second)
	must := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("register and send",
		chromedp.Navigate(p.base+"/register"),
		chromedp.SendKeys(chromedp.CSS(`input[name=email]`), "crash@example.com"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "correct horse battery"),
		chromedp.Submit(chromedp.CSS(`form[data-testid=register]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=composer] textarea`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=composer] textarea`), "[[slow:50ms]][[tokens:3000]] long story"),
		chromedp.Click(chromedp.CSS(`[data-testid=send]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=stop]`)),
	)
	_, flushed := waitAnswer(t, store, "flushed text", func(s, c string) bool { return strings.Count(c, "tok") >= 20 })

	// Crash: no chance to finish anything.
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	p.done <- nil
	status, kept := latestAnswer(t, store)
	if status != "streaming" || !strings.HasPrefix(kept, flushed) {
		t.Fatalf("after the crash the row is %s with %q", status, kept)
	}
	// The text was appended as progress, each part once; the row itself
	// was not rewritten while streaming.
	var rows, bytes int
	var row string
	if err := store.Pool.QueryRow(context.Background(), `SELECT count(*), COALESCE(sum(octet_length(p.content)), 0), min(m.content)
		FROM messages m JOIN message_progress p ON p.message_id = m.id
		WHERE m.id = (SELECT max(id) FROM messages WHERE role = 'assistant')`).Scan(&rows, &bytes, &row); err != nil {
		t.Fatal(err)
	}
	if rows < 2 || bytes != len(kept) || row != "" {
		t.Fatalf("after the crash: %d progress rows of %d bytes (the text kept has %d), row text %q", rows, bytes, len(kept), row)
	}

	startWeft(t, addr, env...)
	status, after := latestAnswer(t, store)
	if status != "interrupted" || after != kept {
		t.Fatalf("after restart: %s, text kept %v", status, after == kept)
	}
	var left int
	if err := store.Pool.QueryRow(context.Background(), `SELECT count(*) FROM message_progress`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("after restart %d progress rows are left (%v)", left, err)
	}
	must("reload shows the interrupted answer",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=assistant][data-status=interrupted] [data-testid=retry]`)),
	)
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-role=assistant][data-status=interrupted] [data-testid=message-body]').textContent.trim()`))
	if err != nil || shown != strings.TrimSpace(kept) {
		t.Fatalf("the page shows %d bytes, the database kept %d (%v)", len(shown), len(kept), err)
	}
	fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Chunks: []string{"Recovered ", "answer."}}
	})
	must("retry",
		chromedp.Click(chromedp.CSS(`[data-testid=retry]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=assistant][data-status=complete]`)),
	)
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-role=assistant][data-status=complete] [data-testid=message-body]').textContent.trim()`))
	if err != nil || text != "Recovered answer." {
		t.Fatalf("retried answer = %q (%v)", text, err)
	}
}
