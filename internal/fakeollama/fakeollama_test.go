package fakeollama

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

func client(t testing.TB, s *Server) *api.Client {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

func ptr[T any](v T) *T { return &v }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func user(s string) []api.Message { return []api.Message{{Role: "user", Content: s}} }

// collect runs a chat and returns every response the client saw.
func collect(t testing.TB, c *api.Client, ctx context.Context, req *api.ChatRequest) ([]api.ChatResponse, error) {
	t.Helper()
	var out []api.ChatResponse
	err := c.Chat(ctx, req, func(r api.ChatResponse) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

func joined(rs []api.ChatResponse) (content, thinking string) {
	var c, th strings.Builder
	for _, r := range rs {
		c.WriteString(r.Message.Content)
		th.WriteString(r.Message.Thinking)
	}
	return c.String(), th.String()
}

func TestStreamEchoJoinsBackExactly(t *testing.T) {
	s := New(t)
	c := client(t, s)
	msg := "  hello   world,\thow are\nyou? ünïcödé  "
	msgs := []api.Message{
		{Role: "system", Content: "be nice"},
		{Role: "user", Content: "an older message"},
		{Role: "assistant", Content: "an older answer"},
		{Role: "user", Content: msg},
	}
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	content, thinking := joined(rs)
	if want := "You said: " + msg; content != want {
		t.Fatalf("content = %q, want %q", content, want)
	}
	if thinking != "" {
		t.Fatalf("unexpected thinking %q", thinking)
	}
	if len(rs) < 4 {
		t.Fatalf("expected several chunks, got %d", len(rs))
	}
	contentChunks := 0
	for i, r := range rs {
		if r.CreatedAt.IsZero() {
			t.Errorf("line %d has no created_at", i)
		}
		if r.Model != "tiny" {
			t.Errorf("line %d model = %q", i, r.Model)
		}
		if r.Message.Role != "assistant" {
			t.Errorf("line %d role = %q", i, r.Message.Role)
		}
		if r.Done != (i == len(rs)-1) {
			t.Errorf("line %d done = %v", i, r.Done)
		}
		if r.Message.Content != "" {
			contentChunks++
		}
	}
	final := rs[len(rs)-1]
	if final.DoneReason != "stop" || final.Message.Content != "" {
		t.Errorf("final = %+v", final)
	}
	m := final.Metrics
	if m.EvalCount != contentChunks || m.EvalCount != len(SplitWords("You said: "+msg)) {
		t.Errorf("eval_count = %d, content chunks %d", m.EvalCount, contentChunks)
	}
	if want := TokensOf(4, msgs); m.PromptEvalCount != want || want != s.PromptTokens("tiny", msgs) {
		t.Errorf("prompt_eval_count = %d, want %d", m.PromptEvalCount, want)
	}
	if m.TotalDuration <= 0 || m.LoadDuration <= 0 || m.PromptEvalDuration <= 0 || m.EvalDuration <= 0 {
		t.Errorf("durations missing: %+v", m)
	}
	if m.TotalDuration < m.LoadDuration+m.PromptEvalDuration+m.EvalDuration {
		t.Errorf("total_duration smaller than its parts: %+v", m)
	}

	recs := s.Requests()
	if len(recs) != 1 {
		t.Fatalf("recorded %d requests", len(recs))
	}
	r := recs[0]
	if r.Path != "/api/chat" || !r.Completed || r.Cancelled || r.Status != 200 || r.ChunksSent != len(rs) {
		t.Errorf("record = %+v (client saw %d lines)", r, len(rs))
	}
	if r.Chat == nil || r.Chat.Model != "tiny" || len(r.Chat.Messages) != 4 {
		t.Errorf("recorded chat = %+v", r.Chat)
	}
	if s.ActiveStreams() != 0 || s.Cancellations() != 0 {
		t.Errorf("active %d, cancellations %d", s.ActiveStreams(), s.Cancellations())
	}
}

func TestWireFormat(t *testing.T) {
	// Checks the raw bytes: NDJSON content type, one JSON object per line.
	s := New(t)
	resp, err := http.Post(s.URL+"/api/chat", "application/json",
		strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"[[tokens:3]]"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var lines []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 4 {
		t.Fatalf("got %d lines", len(lines))
	}
	for i, l := range lines[:3] {
		msg := l["message"].(map[string]any)
		if msg["content"] != fmt.Sprintf("tok%d ", i+1) || l["done"] != false {
			t.Errorf("line %d = %v", i, l)
		}
		if _, ok := l["eval_count"]; ok {
			t.Errorf("metrics on a non-final line: %v", l)
		}
	}
	last := lines[3]
	for _, k := range []string{"created_at", "done_reason", "total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"} {
		if _, ok := last[k]; !ok {
			t.Errorf("final line lacks %s: %v", k, last)
		}
	}
	if last["eval_count"] != float64(3) {
		t.Errorf("eval_count %v", last["eval_count"])
	}
}

func TestTokensAndSlow(t *testing.T) {
	s := New(t)
	c := client(t, s)
	start := time.Now()
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("go [[tokens:4]] [[slow:30ms]]")})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 120*time.Millisecond {
		t.Errorf("4 chunks at 30ms took only %v", el)
	}
	var got []string
	for _, r := range rs {
		if r.Message.Content != "" {
			got = append(got, r.Message.Content)
		}
	}
	if want := []string{"tok1 ", "tok2 ", "tok3 ", "tok4 "}; !slices.Equal(got, want) {
		t.Errorf("chunks = %q", got)
	}
	if rs[len(rs)-1].EvalCount != 4 {
		t.Errorf("eval_count %d", rs[len(rs)-1].EvalCount)
	}
}

func TestTokenDelayOption(t *testing.T) {
	s := New(t, WithTokenDelay(25*time.Millisecond))
	c := client(t, s)
	start := time.Now()
	if _, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:4]]")}); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Errorf("took %v, want >= 100ms", el)
	}
}

func TestThinking(t *testing.T) {
	s := New(t)
	c := client(t, s)
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "thinker", Messages: user("why? [[think]]")})
	if err != nil {
		t.Fatal(err)
	}
	content, thinking := joined(rs)
	if thinking != strings.Join(ThinkingChunks, "") {
		t.Errorf("thinking = %q", thinking)
	}
	if content != "You said: why?" {
		t.Errorf("content = %q", content)
	}
	// Thinking comes first, in its own lines.
	for i := range 3 {
		if rs[i].Message.Thinking != ThinkingChunks[i] || rs[i].Message.Content != "" {
			t.Errorf("line %d = %+v", i, rs[i].Message)
		}
	}
	for _, r := range rs[3:] {
		if r.Message.Thinking != "" {
			t.Errorf("thinking after content: %+v", r.Message)
		}
	}

	// "think": false switches the directive off.
	rs, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "thinker", Think: &api.ThinkValue{Value: false}, Messages: user("[[think]] x")})
	if err != nil {
		t.Fatal(err)
	}
	if _, th := joined(rs); th != "" {
		t.Errorf("thinking with think=false: %q", th)
	}
}

func TestCapabilityErrors(t *testing.T) {
	s := New(t)
	c := client(t, s)
	tool := api.Tool{Type: "function", Function: api.ToolFunction{Name: "f"}}
	cases := []struct {
		name string
		req  api.ChatRequest
		code int
		msg  string
	}{
		{"think on non-thinking", api.ChatRequest{Model: "tiny", Think: &api.ThinkValue{Value: true}, Messages: user("x")}, 400, `"tiny" does not support thinking`},
		{"tools on non-tools", api.ChatRequest{Model: "tiny", Tools: api.Tools{tool}, Messages: user("x")}, 400, "registry.ollama.ai/library/tiny:latest does not support tools"},
		{"chat on embedder", api.ChatRequest{Model: "embedder", Messages: user("x")}, 400, `"embedder" does not support chat`},
		{"unknown model", api.ChatRequest{Model: "nope", Messages: user("x")}, 404, "model 'nope' not found"},
		{"no model", api.ChatRequest{Messages: user("x")}, 400, "model is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			err := c.Chat(ctxT(t), &tc.req, func(api.ChatResponse) error { n++; return nil })
			var se api.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v (%T), want StatusError", err, err)
			}
			if se.StatusCode != tc.code || se.ErrorMessage != tc.msg {
				t.Errorf("got %d %q, want %d %q", se.StatusCode, se.ErrorMessage, tc.code, tc.msg)
			}
			if n != 0 {
				t.Errorf("callback called %d times", n)
			}
		})
	}
	// Thinking is allowed on the thinking model, tools on the tools model.
	if _, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "thinker", Think: &api.ThinkValue{Value: "high"}, Messages: user("x")}); err != nil {
		t.Error(err)
	}
	if _, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "toolie", Tools: api.Tools{tool}, Messages: user("x")}); err != nil {
		t.Error(err)
	}
}

func TestModelNamesMatchLikeOllama(t *testing.T) {
	s := New(t)
	c := client(t, s)
	for _, name := range []string{"tiny", "tiny:latest", "TINY"} {
		rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: name, Messages: user("hi")})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rs[0].Model != name {
			t.Errorf("response model %q, want the requested %q", rs[0].Model, name)
		}
	}
	_, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny:7b", Messages: user("hi")})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Errorf("tiny:7b: %v", err)
	}
}

func TestToolCalls(t *testing.T) {
	s := New(t)
	c := client(t, s)
	tools := api.Tools{{Type: "function", Function: api.ToolFunction{Name: "get_weather"}}}
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "toolie", Tools: tools, Messages: user(
		`weather? [[tool:get_weather {"city":"Paris","unit":"c","days":[[1,2]],"nested":{"a":true}}]] [[tool:now]]`)})
	if err != nil {
		t.Fatal(err)
	}
	var calls []api.ToolCall
	for _, r := range rs {
		calls = append(calls, r.Message.ToolCalls...)
		if len(r.Message.ToolCalls) > 0 && r.Message.Content != "" {
			t.Errorf("tool call line with content %q", r.Message.Content)
		}
	}
	if content, _ := joined(rs); content != "" {
		t.Errorf("content %q with a tool directive", content)
	}
	if len(calls) != 2 {
		t.Fatalf("calls = %+v", calls)
	}
	f := calls[0].Function
	if f.Name != "get_weather" || f.Index != 0 || !strings.HasPrefix(calls[0].ID, "call_") || len(calls[0].ID) != 13 {
		t.Errorf("call 0 = %+v", calls[0])
	}
	if v, ok := f.Arguments.Get("city"); !ok || v != "Paris" {
		t.Errorf("city = %v %v", v, ok)
	}
	var keys []string
	for k := range f.Arguments.All() {
		keys = append(keys, k)
	}
	if !slices.Equal(keys, []string{"city", "unit", "days", "nested"}) {
		t.Errorf("argument order = %v", keys)
	}
	if days, _ := f.Arguments.Get("days"); fmt.Sprint(days) != "[[1 2]]" {
		t.Errorf("days = %v", days)
	}
	if calls[1].Function.Name != "now" || calls[1].Function.Index != 1 || calls[1].Function.Arguments.Len() != 0 {
		t.Errorf("call 1 = %+v", calls[1])
	}
	if !rs[len(rs)-1].Done || rs[len(rs)-1].DoneReason != "stop" {
		t.Errorf("final = %+v", rs[len(rs)-1])
	}

	// A scripted tool call with explicit ID keeps it.
	args := api.NewToolCallFunctionArguments()
	args.Set("q", "x")
	s.SetScript(func(*api.ChatRequest) Reply {
		return Reply{Chunks: []string{"Looking. "}, ToolCalls: []api.ToolCall{{ID: "mine", Function: api.ToolCallFunction{Name: "search", Arguments: args}}}}
	})
	rs, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "toolie", Tools: tools, Messages: user("x")})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[1].Message.ToolCalls[0].ID != "mine" || rs[0].Message.Content != "Looking. " {
		t.Errorf("scripted = %+v", rs)
	}
}

func TestErrorBefore(t *testing.T) {
	s := New(t)
	c := client(t, s)
	n := 0
	err := c.Chat(ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("[[error-before:404]]")}, func(api.ChatResponse) error { n++; return nil })
	var se api.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v (%T)", err, err)
	}
	if se.StatusCode != 404 || se.ErrorMessage != `model "tiny" not found, try pulling it first` || se.Status != "404 Not Found" {
		t.Errorf("StatusError = %#v", se)
	}
	if err.Error() != `404 Not Found: model "tiny" not found, try pulling it first` {
		t.Errorf("Error() = %q", err.Error())
	}
	if n != 0 {
		t.Errorf("callback ran %d times", n)
	}

	err = c.Chat(ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("[[error-before:503]]")}, func(api.ChatResponse) error { return nil })
	if !errors.As(err, &se) || se.StatusCode != 503 || se.ErrorMessage != "internal error" {
		t.Errorf("503: %#v", err)
	}

	// Scripted, with a default message.
	s.SetScript(func(*api.ChatRequest) Reply { return Reply{ErrorBefore: &HTTPError{Status: 404}} })
	err = c.Chat(ctxT(t), &api.ChatRequest{Model: "vision", Messages: user("x")}, func(api.ChatResponse) error { return nil })
	if !errors.As(err, &se) || se.ErrorMessage != `model "vision" not found, try pulling it first` {
		t.Errorf("scripted: %v", err)
	}
	recs := s.Requests()
	for _, r := range recs {
		if r.Completed || r.Cancelled || r.Status < 400 || r.Error == "" || r.ChunksSent != 1 {
			t.Errorf("record %+v", r)
		}
	}
}

func TestErrorAfter(t *testing.T) {
	s := New(t)
	c := client(t, s)
	var got []string
	err := c.Chat(ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:5]][[error-after:2]]")}, func(r api.ChatResponse) error {
		if r.Done {
			t.Error("done after an error")
		}
		got = append(got, r.Message.Content)
		return nil
	})
	if err == nil || err.Error() != CrashText {
		t.Fatalf("err = %v", err)
	}
	var se api.StatusError
	if errors.As(err, &se) {
		t.Errorf("mid-stream error is a StatusError: %#v", se)
	}
	if !slices.Equal(got, []string{"tok1 ", "tok2 "}) {
		t.Errorf("chunks before the error = %q", got)
	}
	r := s.Requests()[0]
	if r.Completed || r.Cancelled || r.Status != 200 || r.Error != CrashText || r.ChunksSent != 3 {
		t.Errorf("record %+v", r)
	}

	// More than the chunks: the error comes after all of them.
	got = nil
	err = c.Chat(ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:2]][[error-after:9]]")}, func(r api.ChatResponse) error {
		got = append(got, r.Message.Content)
		return nil
	})
	if err == nil || len(got) != 2 {
		t.Errorf("err %v, chunks %q", err, got)
	}

	// error-after:0 fails before anything is written: an error status.
	err = c.Chat(ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("[[error-after:0]]")}, func(api.ChatResponse) error { return nil })
	if !errors.As(err, &se) || se.StatusCode != 500 || se.ErrorMessage != CrashText {
		t.Errorf("error-after:0: %v", err)
	}

	// Scripted with a custom text.
	s.SetScript(func(*api.ChatRequest) Reply {
		return Reply{Thinking: []string{"hm"}, Chunks: []string{"a", "b"}, ErrorAfter: 1, ErrorText: "runner died"}
	})
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("x")})
	if err == nil || err.Error() != "runner died" || len(rs) != 2 {
		t.Errorf("err %v, responses %+v", err, rs)
	}
}

func TestCancelMidStream(t *testing.T) {
	s := New(t)
	c := client(t, s)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	n := 0
	start := time.Now()
	err := c.Chat(ctx, &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:1000]][[slow:20ms]]")}, func(r api.ChatResponse) error {
		n++
		if n == 3 {
			cancel()
		}
		return nil
	})
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Chat took %v to return after cancel", el)
	}
	// In v0.17.4 the client's stream loop stops on the read error without
	// reporting it: Chat returns nil; ctx.Err() tells the story.
	t.Logf("Chat returned %v after the cancel", err)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if ctx.Err() == nil {
		t.Error("ctx not cancelled")
	}
	if n >= 1000 {
		t.Errorf("got all %d chunks", n)
	}
	if err := s.WaitCancelled(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	r := s.Requests()[0]
	if !r.Cancelled || r.Completed || r.ChunksSent >= 1000 || r.ChunksSent < 3 {
		t.Errorf("record %+v", r)
	}
	if s.Cancellations() != 1 || s.ActiveStreams() != 0 {
		t.Errorf("cancellations %d, active %d", s.Cancellations(), s.ActiveStreams())
	}
}

func TestCallbackErrorAbandonsStream(t *testing.T) {
	s := New(t)
	c := client(t, s)
	stopErr := errors.New("enough")
	n := 0
	err := c.Chat(ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:1000]][[slow:5ms]]")}, func(api.ChatResponse) error {
		n++
		if n == 2 {
			return stopErr
		}
		return nil
	})
	if !errors.Is(err, stopErr) {
		t.Fatalf("err = %v", err)
	}
	// Closing the body closes the connection: the fake sees the client leave.
	if err := s.WaitCancelled(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
}

func TestCancelBeforeFirstChunk(t *testing.T) {
	s := New(t)
	c := client(t, s)
	ctx, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Chat(ctx, &api.ChatRequest{Model: "tiny", Messages: user("[[slow:10s]]")}, func(api.ChatResponse) error {
		t.Error("got a chunk")
		return nil
	})
	// Nothing was written, so the client is still waiting for the headers:
	// here the cancellation does surface as an error.
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Error("Chat did not return promptly")
	}
	if err := s.WaitCancelled(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	if r := s.Requests()[0]; !r.Cancelled || r.ChunksSent != 0 {
		t.Errorf("record %+v", r)
	}
}

func TestHang(t *testing.T) {
	s := New(t)
	c := client(t, s)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	done := make(chan error, 1)
	var mu sync.Mutex
	var got []string
	go func() {
		done <- c.Chat(ctx, &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:2]][[hang]]")}, func(r api.ChatResponse) error {
			mu.Lock()
			got = append(got, r.Message.Content)
			mu.Unlock()
			if r.Done {
				t.Error("done line on a hanging reply")
			}
			return nil
		})
	}()
	if err := s.WaitChunks(ctxT(t), 0, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Chat returned while hanging: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if s.ActiveStreams() != 1 {
		t.Errorf("active = %d", s.ActiveStreams())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Chat did not return after cancel")
	}
	if err := s.WaitCancelled(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []string{"tok1 ", "tok2 "}) {
		t.Errorf("got %q", got)
	}
}

func TestCloseCutsHangingStreams(t *testing.T) {
	s := Start()
	c := client(t, s)
	done := make(chan error, 1)
	var n int
	go func() {
		done <- c.Chat(context.Background(), &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:1]][[hang]]")}, func(api.ChatResponse) error { n++; return nil })
	}()
	if err := s.WaitChunks(ctxT(t), 0, 1); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked on a hanging stream")
	}
	select {
	case err := <-done:
		// A truncated stream: the client reports nothing, no done line came.
		if err != nil {
			t.Logf("Chat after Close: %v", err)
		}
		if n != 1 {
			t.Errorf("callbacks %d", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Chat did not return after Close")
	}
	if s.ActiveStreams() != 0 || s.Cancellations() != 0 {
		t.Errorf("active %d cancellations %d", s.ActiveStreams(), s.Cancellations())
	}
	s.Close() // idempotent
}

func TestNonStreaming(t *testing.T) {
	s := New(t)
	c := client(t, s)
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Stream: ptr(false), Messages: []api.Message{
		{Role: "system", Content: "You write titles."},
		{Role: "user", Content: "How do [[slow:5s]] magnets work, really?"},
		{Role: "assistant", Content: "They..."},
		{Role: "user", Content: "Write the title of this conversation. [[error-before:500]]"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("got %d responses", len(rs))
	}
	r := rs[0]
	if r.Message.Content != "Title: How do magnets" || !r.Done || r.DoneReason != "stop" || r.Message.Role != "assistant" {
		t.Errorf("response = %+v", r)
	}
	if r.EvalCount != 1 || r.PromptEvalCount == 0 || r.TotalDuration == 0 || r.CreatedAt.IsZero() {
		t.Errorf("metrics = %+v", r.Metrics)
	}
	if rec := s.Requests()[0]; !rec.Completed || rec.ChunksSent != 1 {
		t.Errorf("record %+v", rec)
	}

	// Raw: one JSON object, application/json.
	resp, err := http.Post(s.URL+"/api/chat", "application/json", strings.NewReader(`{"model":"tiny","stream":false,"messages":[{"role":"user","content":"one"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" || strings.Count(strings.TrimSpace(string(body)), "\n") != 0 {
		t.Errorf("content type %q body %q", ct, body)
	}

	// A scripted reply, non-streamed: everything joined.
	args := api.NewToolCallFunctionArguments()
	args.Set("x", 1.0)
	s.SetScript(func(*api.ChatRequest) Reply {
		return Reply{Thinking: []string{"a", "b"}, Chunks: []string{"c", "d", "e"}, ToolCalls: []api.ToolCall{{Function: api.ToolCallFunction{Name: "t", Arguments: args}}}, PromptEvalCount: 42}
	})
	rs, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "thinker", Stream: ptr(false), Messages: user("x")})
	if err != nil || len(rs) != 1 {
		t.Fatalf("err %v, %d responses", err, len(rs))
	}
	r = rs[0]
	if r.Message.Thinking != "ab" || r.Message.Content != "cde" || len(r.Message.ToolCalls) != 1 || r.PromptEvalCount != 42 || r.EvalCount != 3 {
		t.Errorf("scripted non-streamed = %+v", r)
	}

	// A scripted mid-stream error, non-streamed: a 500.
	s.SetScript(func(*api.ChatRequest) Reply { return Reply{Chunks: []string{"a", "b"}, ErrorAfter: 1} })
	_, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Stream: ptr(false), Messages: user("x")})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 || se.ErrorMessage != CrashText {
		t.Errorf("err = %v", err)
	}
}

func TestScriptAndRecording(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	s := New(t, WithScript(func(req *api.ChatRequest) Reply {
		mu.Lock()
		seen = append(seen, req.Messages[len(req.Messages)-1].Content)
		mu.Unlock()
		req.Messages[0].Content = "mutated by the script" // must not change the record
		return Reply{Chunks: []string{"scripted"}, PromptEvalCount: 7}
	}))
	c := client(t, s)
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("q1"), Options: map[string]any{"num_ctx": 2048, "temperature": 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if content, _ := joined(rs); content != "scripted" || rs[len(rs)-1].PromptEvalCount != 7 {
		t.Errorf("got %q / %+v", content, rs[len(rs)-1].Metrics)
	}
	rec := s.Requests()[0]
	if rec.NumCtx != 2048 || rec.Chat.Options["num_ctx"] != float64(2048) || rec.Chat.Messages[0].Content != "q1" {
		t.Errorf("record %+v / %+v", rec, rec.Chat)
	}

	// Back to the default at run time.
	s.SetScript(nil)
	rs, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("q2")})
	if err != nil {
		t.Fatal(err)
	}
	if content, _ := joined(rs); content != "You said: q2" {
		t.Errorf("got %q", content)
	}
	// Scripts can wrap the default.
	s.SetScript(func(req *api.ChatRequest) Reply {
		r := DefaultReply(req)
		r.Chunks = append([]string{">> "}, r.Chunks...)
		return r
	})
	rs, _ = collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("q3")})
	if content, _ := joined(rs); content != ">> You said: q3" {
		t.Errorf("got %q", content)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []string{"q1"}) {
		t.Errorf("script saw %q", seen)
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("%d records", n)
	}
}

func TestTokenCounting(t *testing.T) {
	msg := []api.Message{{Role: "user", Content: "abcdefghi"}} // 9 runes
	if got := TokensOf(0, msg); got != MessageOverhead+3 {
		t.Errorf("default cpt: %d", got)
	}
	if got := TokensOf(2.5, msg); got != MessageOverhead+4 { // ceil(3.6)
		t.Errorf("cpt 2.5: %d", got)
	}
	two := []api.Message{{Role: "system", Content: ""}, {Role: "user", Content: "ünï"}} // 0 and 3 runes
	if got := TokensOf(2.5, two); got != 2*MessageOverhead+2 {
		t.Errorf("two messages: %d", got)
	}

	s := New(t, WithModels(
		Model{Name: "dense", CharsPerToken: 2.5},
		Model{Name: "plain"},
	))
	if got := s.PromptTokens("dense", msg); got != 8 {
		t.Errorf("dense: %d", got)
	}
	if got := s.PromptTokens("DENSE:latest", msg); got != 8 {
		t.Errorf("dense by another name: %d", got)
	}
	if got, want := s.PromptTokens("plain", msg), TokensOf(4, msg); got != want {
		t.Errorf("plain: %d, want %d", got, want)
	}
	if got, want := s.PromptTokens("unknown", msg), TokensOf(4, msg); got != want {
		t.Errorf("unknown: %d, want %d", got, want)
	}

	// The final done chunk (and a non-streamed reply) report the count.
	c := client(t, s)
	msgs := []api.Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: "How long is a piece of string?"},
		{Role: "assistant", Content: "Twice half its length."},
		{Role: "user", Content: "Très drôle. [[tokens:2]]"},
	}
	want := TokensOf(2.5, msgs)
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "dense", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	final := rs[len(rs)-1]
	if !final.Done || final.PromptEvalCount != want {
		t.Errorf("final = %+v, want prompt_eval_count %d", final, want)
	}
	for _, r := range rs[:len(rs)-1] {
		if r.PromptEvalCount != 0 {
			t.Errorf("prompt_eval_count on a non-final line: %+v", r)
		}
	}
	rs, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "dense", Stream: ptr(false), Messages: msgs})
	if err != nil || len(rs) != 1 || rs[0].PromptEvalCount != want {
		t.Errorf("non-streamed: %v %+v", err, rs)
	}
	rec := s.Requests()[0]
	if rec.PromptTokens != want || rec.Truncated != 0 || len(rec.Seen) != len(msgs) || rec.Seen[3].Content != msgs[3].Content {
		t.Errorf("record %+v", rec)
	}
}

// longMsgs is 119 tokens with 1 char per token: 7 + 44 + 44 + 7 + 17.
func longMsgs() []api.Message {
	return []api.Message{
		{Role: "system", Content: "sys"},
		{Role: "user", Content: strings.Repeat("u", 40)},
		{Role: "assistant", Content: strings.Repeat("a", 40)},
		{Role: "system", Content: "mid"},
		{Role: "user", Content: "last question"},
	}
}

func TestTruncation(t *testing.T) {
	s := New(t, WithModels(Model{Name: "small", ContextLength: 100, CharsPerToken: 1}))
	c := client(t, s)
	var mu sync.Mutex
	var scriptSaw []int
	s.SetScript(func(req *api.ChatRequest) Reply {
		mu.Lock()
		scriptSaw = append(scriptSaw, len(req.Messages))
		mu.Unlock()
		return DefaultReply(req)
	})
	msgs := longMsgs()
	if n := s.PromptTokens("small", msgs); n != 119 {
		t.Fatalf("test setup: %d tokens", n)
	}

	// Window 60: the first user and assistant messages go; the leading
	// system message moves in front; the middle system message and the
	// last message stay. 7 + 7 + 17 = 31 tokens.
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "small", Messages: msgs, Options: map[string]any{"num_ctx": 60}})
	if err != nil {
		t.Fatal(err)
	}
	if content, _ := joined(rs); content != "You said: last question" {
		t.Errorf("content %q", content)
	}
	if got := rs[len(rs)-1].PromptEvalCount; got != 31 {
		t.Errorf("prompt_eval_count %d, want 31", got)
	}
	rec := s.Requests()[0]
	var seen []string
	for _, m := range rec.Seen {
		seen = append(seen, m.Role+":"+m.Content)
	}
	if want := []string{"system:sys", "system:mid", "user:last question"}; !slices.Equal(seen, want) {
		t.Errorf("seen %q", seen)
	}
	if rec.Truncated != 2 || rec.PromptTokens != 119 || rec.NumCtx != 60 || len(rec.Chat.Messages) != 5 {
		t.Errorf("record %+v", rec)
	}

	// Explicit "truncate": true is the same; a window that fits drops nothing.
	if _, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "small", Truncate: ptr(true), Messages: msgs, Options: map[string]any{"num_ctx": 60}}); err != nil {
		t.Fatal(err)
	}
	if rec := s.Requests()[1]; rec.Truncated != 2 || len(rec.Seen) != 3 {
		t.Errorf("truncate true: %+v", rec)
	}
	rs, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "small", Messages: msgs[1:]}) // 112 tokens, window min(100, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if rec := s.Requests()[2]; rec.Truncated != 1 || len(rec.Seen) != 3 || rec.Seen[0].Role != "assistant" {
		t.Errorf("default window: %+v", rec)
	}
	if got := rs[len(rs)-1].PromptEvalCount; got != 44+7+17 {
		t.Errorf("prompt_eval_count %d", got)
	}

	// Even the last message alone does not fit: it is kept with the system
	// messages, and the runner evaluates at most its context.
	huge := []api.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "x"}, {Role: "user", Content: strings.Repeat("y", 30)}}
	rs, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "small", Messages: huge, Options: map[string]any{"num_ctx": 20}})
	if err != nil {
		t.Fatal(err)
	}
	if got := rs[len(rs)-1].PromptEvalCount; got != 20 {
		t.Errorf("prompt_eval_count %d, want the context 20", got)
	}
	if rec := s.Requests()[3]; rec.Truncated != 1 || len(rec.Seen) != 2 || rec.Seen[1].Content != huge[2].Content || rec.PromptTokens != 7+5+34 {
		t.Errorf("huge: %+v", rec)
	}

	// num_ctx above the model's context: no message is dropped (chatPrompt
	// uses num_ctx) but the runner caps the prompt at ContextLength.
	rs, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "small", Messages: msgs, Options: map[string]any{"num_ctx": 200}})
	if err != nil {
		t.Fatal(err)
	}
	if rec := s.Requests()[4]; rec.Truncated != 0 || len(rec.Seen) != 5 || rs[len(rs)-1].PromptEvalCount != 100 {
		t.Errorf("num_ctx 200: %+v / %+v", rec, rs[len(rs)-1].Metrics)
	}

	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(scriptSaw, []int{5, 5, 4, 3, 5}) {
		t.Errorf("the script saw %v messages", scriptSaw)
	}
}

func TestTruncateFalse(t *testing.T) {
	s := New(t, WithModels(Model{Name: "small", ContextLength: 100, CharsPerToken: 1}))
	c := client(t, s)
	called := 0
	var mu sync.Mutex
	s.SetScript(func(req *api.ChatRequest) Reply {
		mu.Lock()
		called++
		mu.Unlock()
		return DefaultReply(req)
	})
	msgs := longMsgs() // 119 tokens
	cases := []struct {
		name   string
		stream *bool
		numCtx any
	}{
		{"streamed", nil, 60},
		{"non-streamed", ptr(false), 60},
		{"default window", nil, nil},
		{"num_ctx above ContextLength", nil, 200}, // the runner's context is 100
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &api.ChatRequest{Model: "small", Stream: tc.stream, Truncate: ptr(false), Messages: msgs}
			if tc.numCtx != nil {
				req.Options = map[string]any{"num_ctx": tc.numCtx}
			}
			n := 0
			err := c.Chat(ctxT(t), req, func(api.ChatResponse) error { n++; return nil })
			var se api.StatusError
			if !errors.As(err, &se) || se.StatusCode != 400 || se.ErrorMessage != ErrInputTooLong || n != 0 {
				t.Fatalf("err = %#v, %d callbacks", err, n)
			}
			rec := s.Requests()[i]
			if rec.Status != 400 || rec.Error != ErrInputTooLong || rec.PromptTokens != 119 || rec.Truncated != 0 || rec.Seen != nil || rec.Completed {
				t.Errorf("record %+v", rec)
			}
		})
	}
	mu.Lock()
	if called != 0 {
		t.Errorf("script called %d times", called)
	}
	mu.Unlock()

	// It fits: a normal reply, nothing dropped.
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "small", Truncate: ptr(false), Messages: msgs[2:], Options: map[string]any{"num_ctx": 68}})
	if err != nil {
		t.Fatal(err)
	}
	if content, _ := joined(rs); content != "You said: last question" || rs[len(rs)-1].PromptEvalCount != 68 {
		t.Errorf("fits: %q %+v", content, rs[len(rs)-1].Metrics)
	}
	if rec := s.Requests()[len(cases)]; rec.Truncated != 0 || len(rec.Seen) != 3 || rec.PromptTokens != 68 {
		t.Errorf("fits: record %+v", rec)
	}
}

func TestDefaultContextWindow(t *testing.T) {
	s := New(t, WithModels(
		Model{Name: "big", ContextLength: 8192, CharsPerToken: 1},
		Model{Name: "short", ContextLength: 50, CharsPerToken: 1},
	))
	c := client(t, s)
	// 5 + 4004 + 6 + 104 = 4119 tokens: over 4096, under 8192.
	msgs := []api.Message{
		{Role: "system", Content: "s"},
		{Role: "user", Content: strings.Repeat("w", 4000)},
		{Role: "assistant", Content: "ok"},
		{Role: "user", Content: strings.Repeat("z", 100)},
	}
	if _, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "big", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	if rec := s.Requests()[0]; rec.PromptTokens != 4119 || rec.Truncated != 1 || len(rec.Seen) != 3 {
		t.Errorf("big, no num_ctx (window 4096): %+v", rec)
	}
	if _, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "big", Messages: msgs, Options: map[string]any{"num_ctx": 8192}}); err != nil {
		t.Fatal(err)
	}
	if rec := s.Requests()[1]; rec.Truncated != 0 || len(rec.Seen) != 4 {
		t.Errorf("big, num_ctx 8192: %+v", rec)
	}

	// 34 + 24 = 58 tokens: fits 4096 but not the model's 50.
	two := []api.Message{{Role: "user", Content: strings.Repeat("a", 30)}, {Role: "user", Content: strings.Repeat("b", 20)}}
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "short", Messages: two})
	if err != nil {
		t.Fatal(err)
	}
	if rec := s.Requests()[2]; rec.Truncated != 1 || len(rec.Seen) != 1 || rec.Seen[0].Content != two[1].Content || rs[len(rs)-1].PromptEvalCount != 24 {
		t.Errorf("short, no num_ctx (window 50): %+v", rec)
	}
	err = c.Chat(ctxT(t), &api.ChatRequest{Model: "short", Truncate: ptr(false), Messages: two}, func(api.ChatResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 {
		t.Errorf("short, truncate false: %v", err)
	}
}

func TestSummaryReply(t *testing.T) {
	s := New(t)
	c := client(t, s)
	convo := []api.Message{
		{Role: "system", Content: "You SUMMARIZE conversations."},
		{Role: "user", Content: "first question here, not this one"},
		{Role: "assistant", Content: "An answer."},
		{Role: "user", Content: "Please [[tokens:3]] summarize: one two three four five six seven eight nine ten eleven twelve [[hang]]"},
	}
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Stream: ptr(false), Messages: convo})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Message.Content != "Summary: Please summarize: one two three four five six seven eight nine ten" || !rs[0].Done || rs[0].EvalCount != 1 {
		t.Errorf("summary = %+v", rs)
	}

	// Fewer than 12 words; no user message at all.
	rs, _ = collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Stream: ptr(false), Messages: []api.Message{
		{Role: "system", Content: "Write a summary."}, {Role: "user", Content: "short one"},
	}})
	if len(rs) != 1 || rs[0].Message.Content != "Summary: short one" {
		t.Errorf("short = %+v", rs)
	}
	rs, _ = collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Stream: ptr(false), Messages: []api.Message{{Role: "system", Content: "summarise"}}})
	if len(rs) != 1 || rs[0].Message.Content != "Summary: Empty" {
		t.Errorf("empty = %+v", rs)
	}

	// "summar" only in a user message: still a title request.
	rs, _ = collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Stream: ptr(false), Messages: user("summary of magnets please")})
	if len(rs) != 1 || rs[0].Message.Content != "Title: summary of magnets" {
		t.Errorf("title = %+v", rs)
	}
	// Streamed: the directives drive the reply as usual.
	rs, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Messages: []api.Message{convo[0], user("x [[tokens:2]]")[0]}})
	if content, _ := joined(rs); err != nil || content != "tok1 tok2 " {
		t.Errorf("streamed: %v %q", err, content)
	}
}

func TestLoadAndUnload(t *testing.T) {
	s := New(t)
	c := client(t, s)
	rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny"})
	if err != nil || len(rs) != 1 || rs[0].DoneReason != "load" || !rs[0].Done {
		t.Fatalf("load: %v %+v", err, rs)
	}
	ps, err := c.ListRunning(ctxT(t))
	if err != nil || len(ps.Models) != 1 || ps.Models[0].Name != "tiny:latest" || ps.Models[0].ContextLength != 4096 {
		t.Fatalf("ps: %v %+v", err, ps)
	}
	if until := time.Until(ps.Models[0].ExpiresAt); until < 4*time.Minute || until > 6*time.Minute {
		t.Errorf("expires in %v", until)
	}
	rs, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", KeepAlive: &api.Duration{Duration: 0}})
	if err != nil || len(rs) != 1 || rs[0].DoneReason != "unload" {
		t.Fatalf("unload: %v %+v", err, rs)
	}
	ps, _ = c.ListRunning(ctxT(t))
	if len(ps.Models) != 0 {
		t.Errorf("still running: %+v", ps.Models)
	}
	if _, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "thinker", Messages: user("x"), Options: map[string]any{"num_ctx": 1024}}); err != nil {
		t.Fatal(err)
	}
	ps, _ = c.ListRunning(ctxT(t))
	if len(ps.Models) != 1 || ps.Models[0].ContextLength != 1024 {
		t.Errorf("ps = %+v", ps.Models)
	}
}

func TestListShowVersion(t *testing.T) {
	s := New(t)
	c := client(t, s)
	ctx := ctxT(t)
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, m := range list.Models {
		names = append(names, m.Name)
		if m.Model != m.Name || len(m.Digest) != 64 || m.Size <= 0 || m.ModifiedAt.IsZero() || m.Details.Family == "" || m.Details.Format != "gguf" {
			t.Errorf("model %d = %+v", i, m)
		}
		if i > 0 && !m.ModifiedAt.Before(list.Models[i-1].ModifiedAt) {
			t.Errorf("not most-recent-first")
		}
	}
	if want := []string{"tiny:latest", "thinker:latest", "toolie:latest", "vision:latest", "embedder:latest"}; !slices.Equal(names, want) {
		t.Errorf("names = %v", names)
	}

	wantCaps := map[string][]string{
		"tiny":     {"completion"},
		"thinker":  {"completion", "thinking"},
		"toolie":   {"completion", "tools"},
		"vision":   {"completion", "vision"},
		"embedder": {"embedding"},
	}
	for name, caps := range wantCaps {
		show, err := c.Show(ctx, &api.ShowRequest{Model: name + ":latest"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, c := range show.Capabilities {
			got = append(got, string(c))
		}
		if !slices.Equal(got, caps) {
			t.Errorf("%s capabilities = %v", name, got)
		}
		arch, _ := show.ModelInfo["general.architecture"].(string)
		if arch != show.Details.Family || arch == "" {
			t.Errorf("%s architecture %q, family %q", name, arch, show.Details.Family)
		}
		if _, ok := show.ModelInfo[arch+".context_length"].(float64); !ok {
			t.Errorf("%s: no %s.context_length in %v", name, arch, show.ModelInfo)
		}
	}
	show, _ := c.Show(ctx, &api.ShowRequest{Model: "tiny"})
	if show.ModelInfo["llama.context_length"] != float64(4096) || show.Details.Family != "llama" {
		t.Errorf("tiny show = %+v", show)
	}
	show, _ = c.Show(ctx, &api.ShowRequest{Model: "embedder"})
	if show.ModelInfo["bert.embedding_length"] != float64(8) {
		t.Errorf("embedder model_info = %v", show.ModelInfo)
	}

	_, err = c.Show(ctx, &api.ShowRequest{Model: "nope"})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || se.ErrorMessage != "model 'nope' not found" {
		t.Errorf("show nope: %#v", err)
	}

	v, err := c.Version(ctx)
	if err != nil || v != Version {
		t.Errorf("version %q %v", v, err)
	}
	if err := c.Heartbeat(ctx); err != nil {
		t.Errorf("heartbeat: %v", err)
	}
	resp, err := http.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "Ollama is running" || resp.StatusCode != 200 {
		t.Errorf("GET / = %d %q", resp.StatusCode, body)
	}
}

func TestWithModels(t *testing.T) {
	s := New(t, WithModels(
		Model{Name: "qwen3:0.6b", Capabilities: []string{"completion", "thinking", "tools"}, ContextLength: 40960, Family: "qwen3"},
		Model{Name: "me/custom"},
	))
	c := client(t, s)
	list, err := c.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 2 || list.Models[0].Name != "qwen3:0.6b" || list.Models[1].Name != "me/custom:latest" {
		t.Errorf("list = %+v", list.Models)
	}
	show, err := c.Show(ctxT(t), &api.ShowRequest{Model: "qwen3:0.6b"})
	if err != nil || show.ModelInfo["qwen3.context_length"] != float64(40960) {
		t.Errorf("show = %v %+v", err, show)
	}
	show, err = c.Show(ctxT(t), &api.ShowRequest{Model: "me/custom"})
	if err != nil || show.ModelInfo["llama.context_length"] != float64(4096) || len(show.Capabilities) != 1 || show.Capabilities[0] != "completion" {
		t.Errorf("defaults: %v %+v", err, show)
	}
	_, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("x")})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Errorf("tiny should not exist: %v", err)
	}
	_, err = collect(t, c, ctxT(t), &api.ChatRequest{Model: "me/custom", Tools: api.Tools{{Type: "function"}}, Messages: user("x")})
	if !errors.As(err, &se) || se.ErrorMessage != "registry.ollama.ai/me/custom:latest does not support tools" {
		t.Errorf("tools on me/custom: %v", err)
	}
}

func TestEmbed(t *testing.T) {
	s := New(t)
	c := client(t, s)
	ctx := ctxT(t)
	resp, err := c.Embed(ctx, &api.EmbedRequest{Model: "embedder", Input: []string{"hello", "world", "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "embedder" || len(resp.Embeddings) != 3 || resp.PromptEvalCount == 0 || resp.TotalDuration == 0 {
		t.Fatalf("resp = %+v", resp)
	}
	for i, v := range resp.Embeddings {
		if len(v) != 8 {
			t.Errorf("vector %d has length %d", i, len(v))
		}
		var sum float64
		for _, x := range v {
			sum += float64(x) * float64(x)
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("vector %d norm² = %v", i, sum)
		}
	}
	if !slices.Equal(resp.Embeddings[0], resp.Embeddings[2]) || slices.Equal(resp.Embeddings[0], resp.Embeddings[1]) {
		t.Error("vectors are not a function of the input")
	}
	again, err := c.Embed(ctx, &api.EmbedRequest{Model: "embedder", Input: "hello"})
	if err != nil || !slices.Equal(again.Embeddings[0], resp.Embeddings[0]) || !slices.Equal(again.Embeddings[0], Vector("hello", 8)) {
		t.Errorf("not deterministic: %v", err)
	}
	small, err := c.Embed(ctx, &api.EmbedRequest{Model: "embedder", Input: "hello", Dimensions: 4})
	if err != nil || len(small.Embeddings[0]) != 4 {
		t.Errorf("dimensions: %v %+v", err, small)
	}
	empty, err := c.Embed(ctx, &api.EmbedRequest{Model: "embedder"})
	if err != nil || empty.Embeddings == nil || len(empty.Embeddings) != 0 {
		t.Errorf("empty: %v %+v", err, empty)
	}

	var se api.StatusError
	_, err = c.Embed(ctx, &api.EmbedRequest{Model: "tiny", Input: "x"})
	if !errors.As(err, &se) || se.StatusCode != http.StatusNotImplemented || se.ErrorMessage != "this model does not support embeddings" {
		t.Errorf("tiny: %#v", err)
	}
	_, err = c.Embed(ctx, &api.EmbedRequest{Model: "nope", Input: "x"})
	if !errors.As(err, &se) || se.StatusCode != 404 || se.ErrorMessage != `model "nope" not found, try pulling it first` {
		t.Errorf("nope: %#v", err)
	}
	_, err = c.Embed(ctx, &api.EmbedRequest{Model: "embedder", Input: 42})
	if !errors.As(err, &se) || se.StatusCode != 400 || se.ErrorMessage != "invalid input type" {
		t.Errorf("bad input: %#v", err)
	}

	legacy, err := c.Embeddings(ctx, &api.EmbeddingRequest{Model: "embedder", Prompt: "hello"})
	if err != nil || len(legacy.Embedding) != 8 || float32(legacy.Embedding[0]) != resp.Embeddings[0][0] {
		t.Errorf("legacy: %v %+v", err, legacy)
	}
	if len(s.Requests()) != 0 {
		t.Error("embeddings recorded as chat requests")
	}
}

func TestSetDown(t *testing.T) {
	s := New(t)
	c := client(t, s)
	ctx := ctxT(t)
	s.SetDown(true)
	if err := c.Heartbeat(ctx); err == nil {
		t.Error("heartbeat succeeded while down")
	}
	_, err := c.List(ctx)
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Errorf("List while down: %v (%T), want a *url.Error", err, err)
	}
	n := 0
	err = c.Chat(ctx, &api.ChatRequest{Model: "tiny", Messages: user("x")}, func(api.ChatResponse) error { n++; return nil })
	if !errors.As(err, &ue) || n != 0 {
		t.Errorf("Chat while down: %v, %d callbacks", err, n)
	}
	var se api.StatusError
	if errors.As(err, &se) {
		t.Errorf("a StatusError while down: %v", err)
	}
	if len(s.Requests()) != 0 {
		t.Error("requests recorded while down")
	}
	s.SetDown(false)
	if _, err := c.List(ctx); err != nil {
		t.Errorf("List after SetDown(false): %v", err)
	}
	if _, err := collect(t, c, ctx, &api.ChatRequest{Model: "tiny", Messages: user("x")}); err != nil {
		t.Errorf("Chat after SetDown(false): %v", err)
	}
}

func TestSetDownCutsRunningStream(t *testing.T) {
	s := New(t)
	c := client(t, s)
	done := make(chan error, 1)
	var mu sync.Mutex
	var got []api.ChatResponse
	go func() {
		done <- c.Chat(ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:1000]][[slow:10ms]]")}, func(r api.ChatResponse) error {
			mu.Lock()
			got = append(got, r)
			mu.Unlock()
			return nil
		})
	}()
	if err := s.WaitChunks(ctxT(t), 0, 2); err != nil {
		t.Fatal(err)
	}
	s.SetDown(true)
	select {
	case err := <-done:
		// The real client reports a truncated stream as success.
		if err != nil {
			t.Logf("Chat after the cut: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Chat did not return after SetDown(true)")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || got[len(got)-1].Done || len(got) >= 1000 {
		t.Errorf("got %d responses", len(got))
	}
	if err := s.wait(ctxT(t), func() bool { return s.active == 0 }); err != nil {
		t.Fatal(err)
	}
	r := s.Requests()[0]
	if r.Completed || r.Cancelled || r.Error != "fake: server down" {
		t.Errorf("record %+v", r)
	}
}

func TestConcurrentStreams(t *testing.T) {
	s := New(t, WithTokenDelay(time.Millisecond))
	c := client(t, s)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			msg := fmt.Sprintf("stream %d [[tokens:%d]]", i, 10+i)
			rs, err := collect(t, c, ctxT(t), &api.ChatRequest{Model: "tiny", Messages: user(msg)})
			if err != nil {
				errs <- err
				return
			}
			if got := rs[len(rs)-1].EvalCount; got != 10+i {
				errs <- fmt.Errorf("stream %d: eval_count %d", i, got)
			}
			_ = s.ActiveStreams()
			_ = s.Requests()
		})
	}
	// Cancel a few more concurrently.
	for range 4 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Millisecond)
			defer cancel()
			_, _ = collect(t, c, ctx, &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:3]][[hang]]")})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A hanging request may time out before it even reaches the server;
	// every one that did must end up recorded as cancelled.
	if err := s.wait(ctxT(t), func() bool { return s.active == 0 }); err != nil {
		t.Fatalf("%v; records %+v", err, s.Requests())
	}
	hung := 0
	for _, r := range s.Requests() {
		if strings.Contains(r.Chat.Messages[0].Content, "[[hang]]") {
			hung++
			if !r.Cancelled {
				t.Errorf("hung request not cancelled: %+v", r)
			}
		} else if !r.Completed {
			t.Errorf("not completed: %+v", r)
		}
	}
	if s.Cancellations() != hung || len(s.Requests()) != n+hung {
		t.Errorf("cancellations %d, hung %d, requests %d", s.Cancellations(), hung, len(s.Requests()))
	}
}

func TestWaitCancelledHonoursContext(t *testing.T) {
	s := New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.WaitCancelled(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}

func TestBadRequests(t *testing.T) {
	s := New(t)
	for _, tc := range []struct{ body, msg string }{
		{"", "missing request body"},
		{"{", "unexpected end of JSON input"},
	} {
		resp, err := http.Post(s.URL+"/api/chat", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || e.Error != tc.msg {
			t.Errorf("%q: %d %q", tc.body, resp.StatusCode, e.Error)
		}
	}
	recs := s.Requests()
	if len(recs) != 2 || recs[0].Chat != nil || recs[0].Status != 400 {
		t.Errorf("records %+v", recs)
	}
}

func TestSplitWords(t *testing.T) {
	for _, s := range []string{"", " ", "a", "a b", "  a  b  ", "You said: hi\nthere\t!", "日本 語"} {
		if got := strings.Join(SplitWords(s), ""); got != s {
			t.Errorf("%q -> %q", s, got)
		}
	}
	if got := SplitWords("You said: a  b"); !slices.Equal(got, []string{"You ", "said: ", "a  ", "b"}) {
		t.Errorf("got %q", got)
	}
}

func TestDirectiveParsing(t *testing.T) {
	d := parseDirectives(`x [[slow:15]] [[tokens:2]] y [[nope]] [[tool:a {"k":"]]"}]] [[tool:b]] [[think]] [[hang]] z`)
	if d.slow != 15*time.Millisecond || d.tokens != 2 || !d.think || !d.hang || len(d.tools) != 2 {
		t.Errorf("%+v", d)
	}
	if v, _ := d.tools[0].Function.Arguments.Get("k"); v != "]]" {
		t.Errorf("tool args %v", v)
	}
	if d.text != "x y [[nope]] z" {
		t.Errorf("text %q", d.text)
	}
	if d := parseDirectives("plain [[ text"); d.text != "plain [[ text" {
		t.Errorf("text %q", d.text)
	}
}

func BenchmarkStream(b *testing.B) {
	s := Start()
	defer s.Close()
	c := client(b, s)
	req := &api.ChatRequest{Model: "tiny", Messages: user("[[tokens:100]]")}
	b.ResetTimer()
	for b.Loop() {
		if err := c.Chat(context.Background(), req, func(api.ChatResponse) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
