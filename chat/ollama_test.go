package chat_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/internal/fakeollama"
)

// The tests of chat.OllamaClient.Chat compare it with the official
// api.Client.Chat on the same server behaviour: the responses given to fn
// and the error returned must be the same.

type chatter interface {
	Chat(ctx context.Context, req *api.ChatRequest, fn api.ChatResponseFunc) error
}

// clients are the two implementations under comparison.
var clients = []struct {
	name string
	make func(u *url.URL) chatter
}{
	{"official", func(u *url.URL) chatter { return api.NewClient(u, http.DefaultClient) }},
	{"weft", func(u *url.URL) chatter { return chat.NewOllamaClient(u) }},
}

// outcome is what one Chat call gave.
type outcome struct {
	resps []api.ChatResponse
	err   error
}

func pointer[T any](v T) *T { return &v }

// timeless drops what the fake server takes from the clock (two servers
// never send the same timestamps and durations).
func timeless(rs []api.ChatResponse) []api.ChatResponse {
	out := make([]api.ChatResponse, len(rs))
	for i, r := range rs {
		r.CreatedAt = time.Time{}
		r.TotalDuration, r.LoadDuration, r.PromptEvalDuration, r.EvalDuration = 0, 0, 0, 0
		out[i] = r
	}
	return out
}

// sameOutcome fails t unless got and want gave the same responses and an
// error of the same type, text and value; base is each server's URL, so a
// transport error naming it compares equal.
func sameOutcome(t *testing.T, want, got outcome, wantBase, gotBase string) {
	t.Helper()
	if !reflect.DeepEqual(want.resps, got.resps) {
		t.Errorf("responses differ:\nofficial %d: %+v\nweft     %d: %+v", len(want.resps), want.resps, len(got.resps), got.resps)
	}
	if (want.err == nil) != (got.err == nil) {
		t.Fatalf("errors differ: official %v, weft %v", want.err, got.err)
	}
	if want.err == nil {
		return
	}
	if wt, gt := fmt.Sprintf("%T", want.err), fmt.Sprintf("%T", got.err); wt != gt {
		t.Errorf("error types differ: official %s, weft %s", wt, gt)
	}
	wm := strings.ReplaceAll(want.err.Error(), wantBase, "BASE")
	gm := strings.ReplaceAll(got.err.Error(), gotBase, "BASE")
	if wm != gm {
		t.Errorf("error messages differ:\nofficial %q\nweft     %q", wm, gm)
	}
	var ue *url.Error
	if !errors.As(want.err, &ue) && !reflect.DeepEqual(want.err, got.err) {
		t.Errorf("error values differ: official %#v, weft %#v", want.err, got.err)
	}
}

func TestOllamaChatGivesWhatTheOfficialClientGivesForEveryFakeBehaviour(t *testing.T) {
	big := strings.Repeat("long line ", 20<<10) // 200 KB in one chunk
	user := func(s string) []api.Message { return []api.Message{{Role: "user", Content: s}} }
	cases := []struct {
		name   string
		script func(*api.ChatRequest) fakeollama.Reply // nil: DefaultReply
		req    *api.ChatRequest
		down   bool // the server is down before the request
		// each is called after each response i (from 1) is received.
		each func(fake *fakeollama.Server, i int, cancel context.CancelFunc) error
		// cancelled: the fake must record the request as abandoned.
		cancelled bool
	}{
		{name: "a streamed answer", req: &api.ChatRequest{Model: "tiny", Messages: user("hello [[tokens:20]]")}},
		{name: "thinking before the answer", req: &api.ChatRequest{Model: "thinker", Think: &api.ThinkValue{Value: true}, Messages: user("[[think]] why?")}},
		{name: "tool calls", req: &api.ChatRequest{Model: "toolie", Messages: user(`weather [[tool:get_weather {"city":"Paris","days":3}]] [[tool:clock]]`)}},
		{name: "not streamed", req: &api.ChatRequest{Model: "tiny", Stream: pointer(false), Messages: user("a title please")}},
		{name: "a 200 KB chunk", script: func(*api.ChatRequest) fakeollama.Reply {
			return fakeollama.Reply{Chunks: []string{"a", big, "b"}}
		}, req: &api.ChatRequest{Model: "tiny", Messages: user("x")}},
		{name: "a 200 KB answer not streamed", script: func(*api.ChatRequest) fakeollama.Reply {
			return fakeollama.Reply{Chunks: []string{big}}
		}, req: &api.ChatRequest{Model: "tiny", Stream: pointer(false), Messages: user("x")}},
		{name: "model not found (404)", req: &api.ChatRequest{Model: "nope", Messages: user("hi")}},
		{name: "unauthorized (401)", script: func(*api.ChatRequest) fakeollama.Reply {
			return fakeollama.Reply{ErrorBefore: &fakeollama.HTTPError{Status: 401, Message: "unauthorized"}}
		}, req: &api.ChatRequest{Model: "tiny", Messages: user("hi")}},
		{name: "server error with a body (500)", req: &api.ChatRequest{Model: "tiny", Messages: user("hi [[error-before:500]]")}},
		{name: "an input too long (400)", req: &api.ChatRequest{Model: "tiny", Truncate: pointer(false), Options: map[string]any{"num_ctx": 8},
			Messages: user(strings.Repeat("many words ", 100))}},
		{name: "an error line mid-stream", req: &api.ChatRequest{Model: "tiny", Messages: user("hi [[tokens:5]] [[error-after:3]]")}},
		{name: "an error mid-answer not streamed", req: &api.ChatRequest{Model: "tiny", Stream: pointer(false), Messages: user("hi")},
			script: func(*api.ChatRequest) fakeollama.Reply {
				return fakeollama.Reply{Chunks: []string{"a", "b"}, ErrorAfter: 1}
			}},
		{name: "the connection cut mid-stream", script: func(*api.ChatRequest) fakeollama.Reply {
			return fakeollama.Reply{Chunks: []string{"one ", "two ", "three"}, Hang: true}
		}, req: &api.ChatRequest{Model: "tiny", Messages: user("hi")},
			each: func(fake *fakeollama.Server, i int, _ context.CancelFunc) error {
				if i == 3 {
					fake.SetDown(true)
				}
				return nil
			}},
		{name: "the server down", down: true, req: &api.ChatRequest{Model: "tiny", Messages: user("hi")}},
		{name: "cancelled mid-stream", script: func(*api.ChatRequest) fakeollama.Reply {
			return fakeollama.Reply{Chunks: []string{"one ", "two "}, Hang: true}
		}, req: &api.ChatRequest{Model: "tiny", Messages: user("hi")}, cancelled: true,
			each: func(_ *fakeollama.Server, i int, cancel context.CancelFunc) error {
				if i == 2 {
					cancel()
				}
				return nil
			}},
		{name: "fn stops the stream", req: &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:10]]")},
			each: func(_ *fakeollama.Server, i int, _ context.CancelFunc) error {
				if i == 4 {
					return errStop
				}
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var outs []outcome
			var bases []string
			for _, c := range clients {
				var opts []fakeollama.Option
				if tc.script != nil {
					opts = append(opts, fakeollama.WithScript(tc.script))
				}
				fake := fakeollama.New(t, opts...) // one each: the same tool call ids
				fake.SetDown(tc.down)
				u, _ := url.Parse(fake.URL)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				var o outcome
				o.err = c.make(u).Chat(ctx, tc.req, func(r api.ChatResponse) error {
					o.resps = append(o.resps, r)
					if tc.each != nil {
						return tc.each(fake, len(o.resps), cancel)
					}
					return nil
				})
				if tc.cancelled {
					wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
					err := fake.WaitCancelled(wctx, 1)
					wcancel()
					if err != nil {
						t.Errorf("%s: the fake never saw the cancellation: %v", c.name, err)
					}
				}
				cancel()
				o.resps = timeless(o.resps)
				outs = append(outs, o)
				bases = append(bases, fake.URL)
			}
			if len(outs[0].resps) == 0 && outs[0].err == nil {
				t.Fatal("the case gives nothing to compare")
			}
			sameOutcome(t, outs[0], outs[1], bases[0], bases[1])
		})
	}
}

var errStop = errors.New("stop here")

// served is a raw reply: a status and a body, then the connection cut or
// closed normally.
type served struct {
	status int
	body   string
	cut    bool // close the connection after the body, without ending the response
}

// rawServer serves replies in turn and records the requests.
type rawServer struct {
	t     *testing.T
	URL   string
	reply served

	mu   sync.Mutex
	reqs []recordedRequest
}

type recordedRequest struct {
	method, path string
	header       http.Header
	body         string
}

func newRawServer(t *testing.T) *rawServer {
	s := &rawServer{t: t}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, recordedRequest{r.Method, r.URL.Path, r.Header.Clone(), string(body)})
		rep := s.reply
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(rep.status)
		_, _ = io.WriteString(w, rep.body)
		if rep.cut {
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Error(err)
			}
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_ = conn.Close()
		}
	}))
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

func TestOllamaChatReadsEveryRawReplyLikeTheOfficialClient(t *testing.T) {
	line := func(content string) string {
		return fmt.Sprintf(`{"model":"m","created_at":"2026-01-02T03:04:05.123456Z","message":{"role":"assistant","content":%q},"done":false}`, content)
	}
	done := `{"model":"m","created_at":"2026-01-02T03:04:05Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":12345,"eval_count":2}`
	cases := []struct {
		name  string
		reply served
	}{
		{"lines after done are read too", served{status: 200, body: line("a") + "\n" + done + "\n" + line("late") + "\n"}},
		{"CRLF line ends", served{status: 200, body: line("a") + "\r\n" + done + "\r\n"}},
		{"a CRLF line that is not JSON", served{status: 200, body: line("a") + "\r\nnope\r\n"}},
		{"a last line without a newline", served{status: 200, body: line("a") + "\n" + done}},
		{"an empty line", served{status: 200, body: line("a") + "\n\n" + done + "\n"}},
		{"a line that is not JSON", served{status: 200, body: line("a") + "\nnot json at all\n" + done + "\n"}},
		{"a null line", served{status: 200, body: "null\n" + done + "\n"}},
		{"a field of the wrong type", served{status: 200, body: line("a") + "\n" + `{"done":"yes"}` + "\n"}},
		{"an error of the wrong type", served{status: 200, body: `{"error":5}` + "\n"}},
		{"an error line with a message", served{status: 200, body: line("a") + "\n" + `{"error":"runner died","message":{"content":"x"}}` + "\n"}},
		{"an error field spelled in capitals", served{status: 200, body: `{"ERROR":"loud"}` + "\n"}},
		{"a tool call with arguments in order", served{status: 200, body: `{"message":{"role":"assistant","tool_calls":[{"id":"call_1","function":{"index":0,"name":"f","arguments":{"z":1,"a":{"b":[1,2]},"m":"s"}}}]},"done":false}` + "\n" + done + "\n"}},
		{"a 400 whose body is not JSON", served{status: 400, body: "bad request, friend\n"}},
		{"a 401 with a sign-in URL", served{status: 401, body: `{"error":"unauthorized","signin_url":"https://ollama.com/connect?name=x"}` + "\n"}},
		{"a 401 whose body is not JSON", served{status: 401, body: "go away"}},
		{"a 500 with an empty body", served{status: 500, body: ""}},
		{"a 503 of several lines", served{status: 503, body: `{"error":"busy"}` + "\n" + `{"error":"second"}` + "\n"}},
		{"a 429 with an empty JSON object", served{status: 429, body: "{}\n"}},
		{"cut in the middle of a line", served{status: 200, body: line("a") + "\n" + `{"message":{"cont`, cut: true}},
		{"cut between lines", served{status: 200, body: line("a") + "\n" + line("b") + "\n", cut: true}},
		{"cut after a valid line without a newline", served{status: 200, body: line("a") + "\n" + done, cut: true}},
	}
	srv := newRawServer(t)
	u, _ := url.Parse(srv.URL)
	req := &api.ChatRequest{Model: "m", Messages: []api.Message{{Role: "user", Content: "hi"}}, Options: map[string]any{"num_ctx": 2048}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.mu.Lock()
			srv.reply, srv.reqs = tc.reply, nil
			srv.mu.Unlock()
			var outs []outcome
			for _, c := range clients {
				var o outcome
				o.err = c.make(u).Chat(context.Background(), req, func(r api.ChatResponse) error {
					o.resps = append(o.resps, r)
					return nil
				})
				outs = append(outs, o)
			}
			sameOutcome(t, outs[0], outs[1], srv.URL, srv.URL)
			srv.mu.Lock()
			reqs := srv.reqs
			srv.mu.Unlock()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			if !reflect.DeepEqual(reqs[0], reqs[1]) {
				t.Errorf("requests differ:\nofficial %+v\nweft     %+v", reqs[0], reqs[1])
			}
		})
	}
}

func TestOllamaChatSendsTheOfficialRequest(t *testing.T) {
	srv := newRawServer(t)
	srv.reply = served{status: 200, body: `{"done":true}` + "\n"}
	u, _ := url.Parse(srv.URL + "/prefix")
	err := chat.NewOllamaClient(u).Chat(context.Background(), &api.ChatRequest{Model: "m", Stream: pointer(true)},
		func(api.ChatResponse) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	r := srv.reqs[0]
	if r.method != http.MethodPost || r.path != "/prefix/api/chat" {
		t.Errorf("request %s %s, want POST /prefix/api/chat", r.method, r.path)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "Accept": "application/x-ndjson"} {
		if got := r.header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if ua := r.header.Get("User-Agent"); !strings.HasPrefix(ua, "ollama/") || !strings.Contains(ua, runtime.Version()) {
		t.Errorf("User-Agent %q, want the official client's", ua)
	}
	if r.body != `{"model":"m","messages":null,"stream":true,"options":null}` {
		t.Errorf("body %s", r.body)
	}
}

// endlessLine serves one line that never ends (at most limit bytes) and
// counts what it wrote.
func endlessLine(t *testing.T, limit int) *httptest.Server {
	chunk := []byte(strings.Repeat("a", 64<<10))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"message":{"content":"`)
		for n := 0; n < limit; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the client went away
			}
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestOllamaChatRefusesALineOverTheCapWithoutBufferingIt(t *testing.T) {
	ts := endlessLine(t, 256<<20)
	u, _ := url.Parse(ts.URL)
	c := chat.NewOllamaClient(u)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	calls := 0
	err := c.Chat(context.Background(), &api.ChatRequest{Model: "m"}, func(api.ChatResponse) error {
		calls++
		return nil
	})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, chat.ErrResponseLineTooLong) {
		t.Fatalf("err %v, want ErrResponseLineTooLong", err)
	}
	if want := "the model server sent a response line longer than 8000000 bytes"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if calls != 0 {
		t.Errorf("fn called %d times", calls)
	}
	// The line buffer doubles up to the cap: under 2 × 8 MB in all, of a
	// line that would have been 256 MB.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %.1f MB", float64(alloc)/1e6)
	if alloc > 24<<20 {
		t.Errorf("allocated %d MB reading the line", alloc>>20)
	}
}

// The one difference from the official client: past its 8 MB buffer the
// official client stops reading and returns nil, as if the answer had
// ended normally; Weft says why.
func TestOllamaChatDiffersFromTheOfficialClientOnlyOnALineOverTheCap(t *testing.T) {
	ts := endlessLine(t, 64<<20)
	u, _ := url.Parse(ts.URL)
	err := api.NewClient(u, http.DefaultClient).Chat(context.Background(), &api.ChatRequest{Model: "m"},
		func(api.ChatResponse) error { return nil })
	if err != nil {
		t.Errorf("the official client returned %v; its silent end is documented in chat.MaxResponseLine", err)
	}
	err = chat.NewOllamaClient(u).Chat(context.Background(), &api.ChatRequest{Model: "m"},
		func(api.ChatResponse) error { return nil })
	if !errors.Is(err, chat.ErrResponseLineTooLong) {
		t.Errorf("weft returned %v, want ErrResponseLineTooLong", err)
	}
}

func TestOllamaChatReadsALineJustUnderTheCap(t *testing.T) {
	content := strings.Repeat("b", chat.MaxResponseLine-100)
	srv := newRawServer(t)
	srv.reply = served{status: 200, body: fmt.Sprintf(`{"message":{"content":%q},"done":true}`+"\n", content)}
	u, _ := url.Parse(srv.URL)
	var got string
	err := chat.NewOllamaClient(u).Chat(context.Background(), &api.ChatRequest{Model: "m"}, func(r api.ChatResponse) error {
		got += r.Message.Content
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != content {
		t.Errorf("content of %d bytes, want %d", len(got), len(content))
	}
}

// BenchmarkChatStream is one streamed answer of 100 tokens from the fake
// (in the same process: its allocations count too), with each client.
func BenchmarkChatStream(b *testing.B) {
	fake := fakeollama.Start()
	defer fake.Close()
	u, _ := url.Parse(fake.URL)
	req := &api.ChatRequest{Model: "tiny", Messages: []api.Message{{Role: "user", Content: "[[tokens:100]]"}}}
	for _, c := range clients {
		b.Run(c.name, func(b *testing.B) {
			client := c.make(u)
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				if err := client.Chat(context.Background(), req, func(api.ChatResponse) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
				if n != 101 {
					b.Fatalf("%d responses, want 101", n)
				}
			}
		})
	}
}

// BenchmarkChatStreamReplayed is the same answer replayed from its recorded
// bytes by a plain handler, so that almost all of what is allocated is the
// client's.
func BenchmarkChatStreamReplayed(b *testing.B) {
	fake := fakeollama.Start()
	req := &api.ChatRequest{Model: "tiny", Messages: []api.Message{{Role: "user", Content: "[[tokens:100]]"}}}
	resp, err := http.Post(fake.URL+"/api/chat", "application/json", strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"[[tokens:100]]"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	fake.Close()
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write(body)
	}))
	defer ts.Close()
	u, _ := url.Parse(ts.URL)
	for _, c := range clients {
		b.Run(c.name, func(b *testing.B) {
			client := c.make(u)
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				if err := client.Chat(context.Background(), req, func(api.ChatResponse) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
				if n != 101 {
					b.Fatalf("%d responses, want 101", n)
				}
			}
		})
	}
}
