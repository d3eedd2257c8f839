package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/hostile"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// internals are words that must never reach a user's screen.
var internals = regexp.MustCompile(`(?i)panic|goroutine|runtime\.|fatal error|/tmp/|/usr/|\.go:\d|SQLSTATE|pq:|exit status|signal: killed`)

// TestHostileFilesThroughEveryUploadPathNeverTakeTheServerDown sends the
// hostile corpus as composer attachments, knowledge-base uploads and an
// import, against the real binary, while another user's answer streams:
// the server stays up, its memory stays bounded, the other answer keeps
// streaming and every file is either read or refused with a clear message.
func TestHostileFilesThroughEveryUploadPathNeverTakeTheServerDown(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := fakeollama.New(t)
	p := startWeft(t, freeAddr(t), "DATABASE_URL="+testenv.URLFor(t, store), "OLLAMA_HOST="+fake.URL,
		"WEFT_DEFAULT_MODEL=vision", "WEFT_ATTACH_MAX_BYTES=16777216")
	pid := p.cmd.Process.Pid
	alive := func(when string) {
		t.Helper()
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("weft exited %s: %v\n%s", when, err, tail(p.logs.String()))
		default:
		}
		r, err := http.Get(p.base + "/healthz")
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("/healthz %s: %v", when, err)
		}
		r.Body.Close()
	}

	// Another user's answer streams all along.
	bob := testenv.NewClient(t, p.base)
	bob.Register("bob@example.com", "correct horse battery")
	wsBob := regexp.MustCompile(`name="workspace_id" value="(\d+)"`).FindStringSubmatch(bob.Get("/").Body)
	const tokens = 1500
	r := bob.Post("/t", url.Values{"workspace_id": {wsBob[1]}, "content": {fmt.Sprintf("[[slow:20ms]][[tokens:%d]] a long story", tokens)}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob's send = %d", r.StatusCode)
	}
	gaps := followAnswer(t, bob, p.base, r.Header.Get("Location"))

	alice := testenv.NewClient(t, p.base)
	alice.Register("alice@example.com", "correct horse battery")
	ws := regexp.MustCompile(`name="workspace_id" value="(\d+)"`).FindStringSubmatch(alice.Get("/").Body)[1]
	corpus := hostile.Corpus()

	// 1. Composer attachments: one send per file.
	for _, f := range corpus {
		start := time.Now()
		resp := postFiles(t, alice, "/t", url.Values{"workspace_id": {ws}, "content": {"read this"}, "model": {"vision"}},
			"files", f.Name, f.Data)
		alive("after attaching " + f.Name)
		t.Logf("attach %s: %d in %v", f.Name, resp.StatusCode, time.Since(start).Round(time.Millisecond))
		switch resp.StatusCode {
		case http.StatusSeeOther:
			if f.MustFail {
				t.Errorf("%s was accepted as an attachment", f.Name)
			}
		case http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge:
			msg := visibleError(resp.Body)
			if !strings.Contains(msg, f.Name) || internals.MatchString(msg) {
				t.Errorf("%s refused with an unclear message %q", f.Name, msg)
			}
		default:
			t.Errorf("attaching %s: status %d", f.Name, resp.StatusCode)
		}
	}

	// 2. Knowledge-base uploads: every file reaches ingestion on its own.
	kr := alice.Post("/kb", url.Values{"name": {"Hostile"}, "embed_model": {"embedder"}})
	var kb int64
	if _, err := fmt.Sscanf(kr.Header.Get("Location"), "/kb/%d", &kb); err != nil {
		t.Fatalf("create knowledge base: %d %q", kr.StatusCode, kr.Header.Get("Location"))
	}
	uploaded := map[string]bool{}
	for _, f := range corpus {
		start := time.Now()
		resp := postFiles(t, alice, fmt.Sprintf("/kb/%d/upload", kb), nil, "files", f.Name, f.Data)
		alive("after uploading " + f.Name)
		t.Logf("upload %s: %d in %v", f.Name, resp.StatusCode, time.Since(start).Round(time.Millisecond))
		if resp.StatusCode >= 500 {
			t.Errorf("uploading %s: status %d", f.Name, resp.StatusCode)
		}
		uploaded[f.Name] = true
	}
	var aliceID int64
	if err := store.Pool.QueryRow(context.Background(), `SELECT id FROM users WHERE email = 'alice@example.com'`).Scan(&aliceID); err != nil {
		t.Fatal(err)
	}
	docs := settledDocuments(t, store, aliceID, kb, p)
	for _, d := range docs {
		f := corpusFile(corpus, d.Name)
		switch {
		case d.Status == db.DocFailed:
			if d.Error == "" || internals.MatchString(d.Error) {
				t.Errorf("document %s failed with an unclear message %q", d.Name, d.Error)
			}
		case f.MustFail:
			t.Errorf("document %s is %s, want failed", d.Name, d.Status)
		}
	}
	var attempts int
	if err := store.Pool.QueryRow(context.Background(),
		`SELECT coalesce(max(attempt), 0) FROM river_job WHERE kind = 'kb_ingest' AND state IN ('cancelled', 'discarded', 'completed')`).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts > 1 {
		t.Errorf("a hostile document was tried %d times: poison files must fail once", attempts)
	}

	// 3. An import carrying a pathological message of a million characters
	// and JSON nested a hundred thousand deep.
	huge := strings.Repeat("[a](", 250_000)
	imp, _ := json.Marshal(map[string]any{
		"format": "weft-thread", "version": 1, "title": "huge", "model": "tiny", "created_at": time.Now(),
		"messages": []map[string]any{
			{"id": 1, "role": "user", "content": huge, "status": "complete", "created_at": time.Now()},
			{"id": 2, "parent": 1, "role": "assistant", "content": huge, "status": "complete", "created_at": time.Now()},
		},
	})
	ir := postFiles(t, alice, "/import", nil, "file", "huge.json", imp)
	alive("after importing a huge message")
	if ir.StatusCode != http.StatusSeeOther {
		t.Fatalf("import of a huge message = %d %s", ir.StatusCode, visibleError(ir.Body))
	}
	page := alice.Get(ir.Header.Get("Location"))
	if page.StatusCode != 200 || !strings.Contains(page.Body, `data-testid="message"`) {
		t.Fatalf("the imported thread does not open: %d", page.StatusCode)
	}
	deep := postFiles(t, alice, "/import", nil, "file", "deep.json", []byte(strings.Repeat("[", 100_000)))
	alive("after importing deep JSON")
	if deep.StatusCode != http.StatusUnprocessableEntity || internals.MatchString(visibleError(deep.Body)) {
		t.Errorf("deep JSON import = %d %q", deep.StatusCode, visibleError(deep.Body))
	}

	// 4. Other apps' exports (issue 19), imported in the background: a
	// ChatGPT export with a conversation nested 100,000 deep, one holding
	// 30 MB of text in one message, a loop of parent links and a good one.
	node := func(id, parent, text string) string {
		return fmt.Sprintf(`%q:{"id":%q,"parent":%s,"message":{"author":{"role":"user"},"content":{"content_type":"text","parts":[%q]}}}`,
			id, id, parent, text)
	}
	gpt := `[{"title":"deep","mapping":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `},` +
		`{"title":"huge","mapping":{` + node("a", "null", strings.Repeat("ü", 15<<20)) + `}},` +
		`{"title":"loop","mapping":{` + node("a", `"b"`, "x") + `,` + node("b", `"a"`, "y") + `}},` +
		`{"title":"fine","mapping":{` + node("a", "null", "hello") + `}}]`
	gr := postFiles(t, alice, "/import", nil, "file", "conversations.json", []byte(gpt))
	alive("after uploading a hostile ChatGPT export")
	loc := gr.Header.Get("Location")
	if gr.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/imports/") {
		t.Fatalf("hostile ChatGPT export = %d %q", gr.StatusCode, visibleError(gr.Body))
	}
	var report string
	testwait.For(t, "the hostile export's report", 2*time.Minute, func() bool {
		report = alice.Get(loc + "/progress").Body
		return strings.Contains(report, `data-status="done"`) || strings.Contains(report, `data-status="failed"`)
	})
	alive("after importing a hostile ChatGPT export")
	if !strings.Contains(report, "2 conversations imported") || !strings.Contains(report, "nested more than 64 levels") ||
		internals.MatchString(report) {
		t.Errorf("the hostile export's report:\n%s", report)
	}

	// The other user's answer went on and ended complete.
	select {
	case g := <-gaps:
		if g.err != nil {
			t.Fatalf("bob's stream: %v", g.err)
		}
		if g.max > 10*time.Second {
			t.Errorf("bob's answer stalled for %v while the hostile files were read", g.max)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("bob's answer did not finish")
	}
	status, content := latestAnswerOf(t, store, "bob@example.com")
	if status != "complete" || strings.Count(content, "tok") != tokens {
		t.Errorf("bob's answer is %s with %d tokens, want complete with %d", status, strings.Count(content, "tok"), tokens)
	}
	if hwm := peakRSS(t, pid); hwm > 1<<30 {
		t.Errorf("weft's peak RSS was %d MB, budget 1024 MB", hwm>>20)
	} else {
		t.Logf("weft's peak RSS over the hostile corpus: %d MB", hwm>>20)
	}
	alive("at the end")
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

func corpusFile(corpus []hostile.File, name string) hostile.File {
	for _, f := range corpus {
		if f.Name == name {
			return f
		}
	}
	return hostile.File{Name: name}
}

// postFiles posts a multipart form with one file.
func postFiles(t *testing.T, c *testenv.Client, path string, fields url.Values, field, name string, data []byte) testenv.Response {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, vs := range fields {
		for _, v := range vs {
			_ = mw.WriteField(k, v)
		}
	}
	w, err := mw.CreateFormFile(field, name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(data)
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, c.Base+path, &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return c.Send(req)
}

// visibleError is the text of the page's error elements (or the body).
func visibleError(body string) string {
	ms := regexp.MustCompile(`(?s)data-testid="error"[^>]*>(.*?)</`).FindAllStringSubmatch(body, -1)
	if len(ms) == 0 {
		return body
	}
	var parts []string
	for _, m := range ms {
		parts = append(parts, m[1])
	}
	return strings.Join(parts, " ")
}

// settledDocuments waits until no document of the knowledge base is being
// ingested, checking the server stays up meanwhile.
func settledDocuments(t *testing.T, store *db.DB, user, kb int64, p *proc) []db.Document {
	t.Helper()
	var docs []db.Document
	if !testwait.Until(5*time.Minute, func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("weft exited while ingesting: %v\n%s", err, tail(p.logs.String()))
		default:
		}
		var err error
		if docs, err = store.Documents(context.Background(), user, kb); err != nil {
			t.Fatal(err)
		}
		return !testenv.Ingesting(docs)
	}) {
		t.Fatalf("documents still being ingested after 5 min: %+v", docs)
	}
	return docs
}

func latestAnswerOf(t *testing.T, store *db.DB, email string) (status, content string) {
	t.Helper()
	err := store.Pool.QueryRow(context.Background(),
		`SELECT m.status, m.content || COALESCE((SELECT string_agg(p.content, '' ORDER BY p.seq) FROM message_progress p WHERE p.message_id = m.id), '')
		 FROM messages m JOIN threads th ON th.id = m.thread_id JOIN users u ON u.id = th.owner_id
		 WHERE u.email = $1 AND m.role = 'assistant' ORDER BY m.id DESC LIMIT 1`, email).Scan(&status, &content)
	if err != nil {
		t.Fatal(err)
	}
	return status, content
}

type streamGaps struct {
	max time.Duration
	err error
}

// followAnswer opens the event stream of the answer on the thread page at
// loc and reports the longest silence between its events when it ends.
func followAnswer(t *testing.T, c *testenv.Client, base, loc string) <-chan streamGaps {
	t.Helper()
	path, _, _ := strings.Cut(loc, "#")
	page := c.Get(path)
	m := regexp.MustCompile(`/runs/(\d+)/events`).FindStringSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no event stream on %s", path)
	}
	run, _ := strconv.ParseInt(m[1], 10, 64)
	out := make(chan streamGaps, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/runs/%d/events", base, run), nil)
		hc := *c.HTTP // its cookie jar, without a timeout
		hc.Timeout = 0
		resp, err := hc.Do(req)
		if err != nil {
			out <- streamGaps{err: err}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			out <- streamGaps{err: fmt.Errorf("status %d", resp.StatusCode)}
			return
		}
		var g streamGaps
		last := time.Now()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "event:") {
				continue
			}
			now := time.Now()
			g.max = max(g.max, now.Sub(last))
			last = now
			if strings.TrimSpace(strings.TrimPrefix(line, "event:")) == "done" {
				break
			}
		}
		out <- g
	}()
	return out
}

// peakRSS is the process's peak resident set (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
