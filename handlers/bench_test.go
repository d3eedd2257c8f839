package handlers_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

// benchUser registers a user on a fresh app and returns the client, the
// user's id and their default workspace id.
func benchUser(b testing.TB) (*testenv.App, *testenv.Client, int64, int64) {
	b.Helper()
	app := testenv.Start(b, testenv.NewDB(b), testenv.Options{})
	c := testenv.NewClient(b, app.TS.URL)
	c.Register("bench@example.com", password)
	u, err := app.Store.UserByEmail(context.Background(), "bench@example.com")
	if err != nil {
		b.Fatal(err)
	}
	ws, err := app.Store.DefaultWorkspace(context.Background(), u.ID)
	if err != nil {
		b.Fatal(err)
	}
	return app, c, u.ID, ws.ID
}

func mustSQL(b testing.TB, app *testenv.App, sql string, args ...any) {
	b.Helper()
	if _, err := app.Store.Pool.Exec(context.Background(), sql, args...); err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
}

// seedChain makes a thread whose active path is n messages long
// (alternating questions and ~400-character answers) and returns its id.
func seedChain(b testing.TB, app *testenv.App, user, ws int64, n int) int64 {
	b.Helper()
	var thread int64
	err := app.Store.Pool.QueryRow(context.Background(), `INSERT INTO threads (workspace_id, owner_id, title, model)
		VALUES ($1, $2, 'long', 'tiny') RETURNING id`, ws, user).Scan(&thread)
	if err != nil {
		b.Fatal(err)
	}
	mustSQL(b, app, `DO $$
		DECLARE parent bigint; i int;
		BEGIN
			FOR i IN 1..`+fmt.Sprint(n)+` LOOP
				INSERT INTO messages (thread_id, parent_id, role, content, status)
				VALUES (`+fmt.Sprint(thread)+`, parent, CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END,
					CASE WHEN i % 2 = 1 THEN 'Question number ' || i || ' about weaving?'
					ELSE repeat('The **warp** threads run lengthwise and the weft crosses them; ', 6) || i END,
					'complete')
				RETURNING id INTO parent;
			END LOOP;
			UPDATE threads SET active_leaf_id = parent WHERE id = `+fmt.Sprint(thread)+`;
		END $$`)
	mustSQL(b, app, "ANALYZE messages")
	return thread
}

// BenchmarkOpenThreadOf5000Messages measures GET /t/{id} for a thread
// whose visible path is 5,000 messages long (DESIGN §13: < 100 ms server
// time, page < 300 KB; older turns load on scroll).
func BenchmarkOpenThreadOf5000Messages(b *testing.B) {
	app, c, user, ws := benchUser(b)
	thread := seedChain(b, app, user, ws, 5000)
	path := fmt.Sprintf("/t/%d", thread)
	first := c.Get(path)
	if first.StatusCode != http.StatusOK || strings.Count(first.Body, `data-testid="message"`) == 0 {
		b.Fatalf("GET %s = %d", path, first.StatusCode)
	}
	b.ResetTimer()
	for b.Loop() {
		if r := c.Get(path); r.StatusCode != http.StatusOK {
			b.Fatal(r.StatusCode)
		}
	}
	b.ReportMetric(float64(len(first.Body)), "page-bytes")
}

// The page of a thread of 5,000 messages stays under DESIGN §13's 300 KB
// with every message's actions (issue 21 added the copy button and the
// route badge to each: 296,850 bytes as merged, 283,652 once the copy
// button's check and label were made on click instead of sent with every
// message).
func TestAThreadOf5000MessagesOpensInAPageUnder300KB(t *testing.T) {
	t.Parallel()
	app, c, user, ws := benchUser(t)
	thread := seedChain(t, app, user, ws, 5000)
	r := c.Get(fmt.Sprintf("/t/%d", thread))
	shown := strings.Count(r.Body, `data-testid="message"`)
	if r.StatusCode != http.StatusOK || shown == 0 || strings.Count(r.Body, `data-testid="copy-message"`) != shown {
		t.Fatalf("GET /t/%d = %d with %d messages and %d copy buttons", thread, r.StatusCode, shown, strings.Count(r.Body, `data-testid="copy-message"`))
	}
	if len(r.Body) >= 300_000 {
		t.Errorf("the page of a thread of 5,000 messages is %d bytes (%d messages shown), DESIGN §13 allows < 300 KB", len(r.Body), shown)
	}
}

// BenchmarkSidebarWith10000Threads measures GET / with 10,000 threads in
// the workspace (DESIGN §13: < 30 ms).
func BenchmarkSidebarWith10000Threads(b *testing.B) {
	app, c, user, ws := benchUser(b)
	mustSQL(b, app, `INSERT INTO threads (workspace_id, owner_id, title, last_activity_at)
		SELECT $1, $2, 'thread ' || g, now() - g * interval '1 second' FROM generate_series(1, 10000) g`, ws, user)
	mustSQL(b, app, "ANALYZE threads")
	b.ResetTimer()
	for b.Loop() {
		if r := c.Get("/"); r.StatusCode != http.StatusOK {
			b.Fatal(r.StatusCode)
		}
	}
}

var resultCount = regexp.MustCompile(`data-testid="search-result"`)

// BenchmarkSearchOver10000Threads measures GET /search over 10,000 threads
// of four messages each (DESIGN §13: < 100 ms), for a word and for a
// substring in another script.
func BenchmarkSearchOver10000Threads(b *testing.B) {
	app, c, user, ws := benchUser(b)
	mustSQL(b, app, `INSERT INTO threads (workspace_id, owner_id, title, last_activity_at)
		SELECT $1, $2, 'thread ' || g, now() - g * interval '1 second' FROM generate_series(1, 10000) g`, ws, user)
	mustSQL(b, app, `INSERT INTO messages (thread_id, role, content, status)
		SELECT t.id, CASE WHEN k % 2 = 0 THEN 'user' ELSE 'assistant' END,
			CASE WHEN t.id % 500 = 0 AND k = 1 THEN 'the lighthouse keeper 灯台守 kept a log ' || t.id
			ELSE 'ordinary conversation about cooking pasta number ' || t.id || ' part ' || k END, 'complete'
		FROM threads t, generate_series(0, 3) k WHERE t.workspace_id = $1`, ws)
	mustSQL(b, app, "ANALYZE messages")
	for _, q := range []string{"lighthouse", "灯台"} {
		b.Run(q, func(b *testing.B) {
			r := c.Get("/search?q=" + q)
			if n := len(resultCount.FindAllString(r.Body, -1)); r.StatusCode != http.StatusOK || n != 20 {
				b.Fatalf("search %q = %d with %d results, want 20", q, r.StatusCode, n)
			}
			b.ResetTimer()
			for b.Loop() {
				c.Get("/search?q=" + q)
			}
		})
	}
}

var eventsURL = regexp.MustCompile(`/runs/(\d+)/events`)

// BenchmarkSendAndFollowAnAnswer measures one exchange as a browser makes
// it: an htmx send to a thread, then its event stream read to the done
// event. The thread grows by two messages an iteration, so the context
// assembler's path read is in it too.
func BenchmarkSendAndFollowAnAnswer(b *testing.B) {
	_, c, _, ws := benchUser(b)
	r := c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(ws)}, "content": {"hello"}})
	thread, _, _ := strings.Cut(strings.TrimPrefix(r.Header.Get("Location"), "/t/"), "#")
	b.ResetTimer()
	for b.Loop() {
		r := c.HTMX("/t/"+thread+"/messages", url.Values{"content": {"tell me about weaving"}})
		m := eventsURL.FindStringSubmatch(r.Body)
		if m == nil {
			b.Fatalf("send = %d without an event stream: %.200s", r.StatusCode, r.Body)
		}
		resp, err := c.HTTP.Get(c.Base + "/runs/" + m[1] + "/events")
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		done := false
		for !done && sc.Scan() {
			done = sc.Text() == "event: done"
		}
		resp.Body.Close()
		if !done {
			b.Fatal("the event stream ended without its done event")
		}
	}
}

// BenchmarkOpenShareOf5000Messages measures GET /s/{token} of a thread
// whose shared path is 5,000 messages long: the newest page and the oldest
// one (the same budget as the thread page).
func BenchmarkOpenShareOf5000Messages(b *testing.B) {
	app, _, user, ws := benchUser(b)
	thread := seedChain(b, app, user, ws, 5000)
	tok := strings.Repeat("b", 43)
	sum := sha256.Sum256([]byte(tok))
	if _, err := app.Store.CreateShare(context.Background(), user, thread, db.NewShare{TokenSHA256: sum[:], TokenHint: "bbbbbb"}); err != nil {
		b.Fatal(err)
	}
	var second int64
	if err := app.Store.Pool.QueryRow(context.Background(), `SELECT id FROM messages WHERE thread_id = $1 ORDER BY id OFFSET 1 LIMIT 1`, thread).Scan(&second); err != nil {
		b.Fatal(err)
	}
	anon := testenv.NewClient(b, app.TS.URL)
	for name, path := range map[string]string{"newest": "/s/" + tok, "oldest": fmt.Sprintf("/s/%s?before=%d", tok, second)} {
		b.Run(name, func(b *testing.B) {
			first := anon.Get(path)
			if first.StatusCode != http.StatusOK || strings.Count(first.Body, `data-testid="message"`) == 0 {
				b.Fatalf("GET %s = %d", path, first.StatusCode)
			}
			b.ResetTimer()
			for b.Loop() {
				if r := anon.Get(path); r.StatusCode != http.StatusOK {
					b.Fatal(r.StatusCode)
				}
			}
			b.ReportMetric(float64(len(first.Body)), "page-bytes")
		})
	}
}
