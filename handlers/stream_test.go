package handlers_test

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// sseEvent is one parsed server-sent event.
type sseEvent struct{ name, data string }

// readEvents parses an event stream the way a browser does until it ends
// or the "done" event arrives.
func readEvents(t *testing.T, c *testenv.Client, path string, each func(sseEvent)) []sseEvent {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.Base+path, nil)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sseEvent
	var ev sseEvent
	var data []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.name != "" || data != nil {
				ev.data = strings.Join(data, "\n")
				out = append(out, ev)
				if each != nil {
					each(ev)
				}
				if ev.name == "done" {
					return out
				}
			}
			ev, data = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		default:
			t.Fatalf("malformed stream line %q", line)
		}
	}
	return out
}

var runIDPattern = regexp.MustCompile(`data-run-id="(\d+)"`)

// markupOnly keeps an HTML document's tags and attributes, dropping the
// text between them (which holds no raw "<": it is escaped), so checks for
// live markup are not fooled by harmless text.
func markupOnly(html string) string {
	return textBetweenTags.ReplaceAllString(">"+html+"<", "><")
}

var textBetweenTags = regexp.MustCompile(`>[^<]*<`)

// sendInThread posts a message with htmx and returns the new run's id.
func sendInThread(t *testing.T, c *testenv.Client, thread, content string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.Base+"/t/"+thread+"/messages", strings.NewReader(url.Values{"content": {content}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
	}
	m := runIDPattern.FindStringSubmatch(b.String())
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("htmx send = %d: %.500s", resp.StatusCode, b.String())
	}
	return m[1]
}

// newThread registers a user, starts a thread and waits for its first answer.
func newThread(t *testing.T, app *testenv.App) (*testenv.Client, string) {
	t.Helper()
	c := testenv.NewClient(t, app.TS.URL)
	c.Register(fmt.Sprintf("s%d@example.com", time.Now().UnixNano()), password)
	home := c.Get("/")
	ws := regexp.MustCompile(`name="workspace_id" value="(\d+)"`).FindStringSubmatch(home.Body)
	r := c.Post("/t", url.Values{"workspace_id": {ws[1]}, "content": {"hello"}})
	loc := regexp.MustCompile(`^/t/(\d+)`).FindStringSubmatch(r.Header.Get("Location"))
	if r.StatusCode != http.StatusSeeOther || loc == nil {
		t.Fatalf("new thread = %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	return c, loc[1]
}

// streamedText applies events the way the placeholder does: a snapshot
// replaces the text, a delta appends; it returns the text and the done payload.
func streamedText(events []sseEvent) (text, done string) {
	var b strings.Builder
	for _, ev := range events {
		switch ev.name {
		case "snapshot":
			b.Reset()
			b.WriteString(html.UnescapeString(ev.data))
		case "delta":
			b.WriteString(html.UnescapeString(ev.data))
		case "done":
			done = ev.data
		}
	}
	return b.String(), done
}

func TestLateAndEarlySubscribersSeeEveryTokenExactlyOnce(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c, thread := newThread(t, app)
	run := sendInThread(t, c, thread, "[[slow:15ms]][[tokens:120]]")

	want := ""
	for i := 1; i <= 120; i++ {
		want += fmt.Sprintf("tok%d ", i)
	}
	var wg sync.WaitGroup
	results := make([]string, 3)
	// Each subscriber joins once the model has sent that many of the
	// answer's lines: at the start, a third and two thirds in.
	for i, sent := range []int{0, 40, 80} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout)
			defer cancel()
			if err := app.Fake.WaitFor(ctx, func(recs []fakeollama.Recorded) bool {
				return slices.ContainsFunc(recs, func(r fakeollama.Recorded) bool {
					return chLastUser(r.Chat) == "[[slow:15ms]][[tokens:120]]" && r.ChunksSent >= sent
				})
			}); err != nil {
				t.Errorf("subscriber %d: the model never sent %d lines: %v", i, sent, err)
				return
			}
			text, done := streamedText(readEvents(t, c, "/runs/"+run+"/events", nil))
			if !strings.Contains(done, `data-status="complete"`) {
				t.Errorf("subscriber %d: done = %.300s", i, done)
			}
			results[i] = text
		}()
	}
	wg.Wait()
	for i, got := range results {
		if got != want {
			t.Errorf("subscriber %d assembled %q", i, got)
		}
	}
	// After the end, a reconnect gets the final message at once.
	events := readEvents(t, c, "/runs/"+run+"/events", nil)
	if len(events) != 1 || events[0].name != "done" || !strings.Contains(events[0].data, "tok120") {
		t.Fatalf("reconnect after the end = %+v", events)
	}
}

func TestHostileModelOutputStaysInertAndDoesNotBreakTheStream(t *testing.T) {
	t.Parallel()
	fake := fakeollama.New(t)
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{Fake: fake})
	c, thread := newThread(t, app)
	hostile := []string{
		"<script>alert(1)</script> ",
		"<img src=x onerror=alert(2)> ",
		"[x](javascript:alert(3)) ",
		`<div hx-get="/logout" hx-trigger="load">y</div> `,
		"\n\nevent: done\n",
		"data: <b>fake</b>\n\n",
		"id: 99\nretry: 1\n",
		"THE END",
	}
	fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if req.Stream != nil && !*req.Stream {
			return fakeollama.DefaultReply(req)
		}
		return fakeollama.Reply{Chunks: hostile, Delay: 5 * time.Millisecond}
	})
	run := sendInThread(t, c, thread, "be evil")
	events := readEvents(t, c, "/runs/"+run+"/events", nil)
	names := []string{}
	for _, ev := range events {
		names = append(names, ev.name)
		if ev.name == "delta" && (strings.Contains(ev.data, "<script") || strings.Contains(ev.data, "<img") || strings.Contains(ev.data, "<div")) {
			t.Errorf("a delta carries live markup: %q", ev.data)
		}
	}
	if names[len(names)-1] != "done" || strings.Count(strings.Join(names, " "), "done") != 1 {
		t.Fatalf("event sequence %v: the model's text ended the stream or forged an event", names)
	}
	text, done := streamedText(events)
	if text != strings.Join(hostile, "") {
		t.Fatalf("streamed text %q", text)
	}
	body := done[strings.Index(done, `data-testid="message-body"`):strings.Index(done, "<footer")]
	for _, bad := range []string{"<script", "onerror=", "href=\"javascript:", "hx-get=", "<img", "<div hx"} {
		if strings.Contains(markupOnly(body), bad) {
			t.Errorf("final message body carries %q: %s", bad, body)
		}
	}
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the model's literal HTML is not shown as text: %s", body)
	}
	if !strings.Contains(done, "THE END") {
		t.Fatalf("final message lost text after the forged lines: %s", done)
	}
	// The page, reloaded, is just as inert.
	page := markupOnly(c.Get("/t/" + thread).Body)
	for _, bad := range []string{"<script>alert", "onerror=", "javascript:alert", `hx-get="/logout"`} {
		if strings.Contains(page, bad) {
			t.Errorf("thread page carries %q", bad)
		}
	}
}

func TestStreamsOfAnotherUsersRunAre404(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c, thread := newThread(t, app)
	run := sendInThread(t, c, thread, "[[slow:20ms]][[tokens:5]]")
	other := testenv.NewClient(t, app.TS.URL)
	other.Register("intruder@example.com", password)
	if r := other.Get("/runs/" + run + "/events"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("another user's stream = %d", r.StatusCode)
	}
	if r := other.Post("/runs/"+run+"/cancel", nil); r.StatusCode != http.StatusNotFound {
		t.Fatalf("another user's stop = %d", r.StatusCode)
	}
	_, done := streamedText(readEvents(t, c, "/runs/"+run+"/events", nil))
	if !strings.Contains(done, "tok1 tok2 tok3 tok4 tok5") || !strings.Contains(done, `data-status="complete"`) {
		t.Fatalf("the owner's run was disturbed: %s", done)
	}
}
