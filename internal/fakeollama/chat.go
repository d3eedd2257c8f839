package fakeollama

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/ollama/ollama/api"
)

// /api/chat: replies, what the fake records of a request, the context
// window, and why a reply stops early.

// HTTPError is a reply made of an HTTP status and an Ollama error body
// ({"error": Message}).
type HTTPError struct {
	Status  int    // default 500
	Message string // default: Ollama's "model not found" text for 404, "internal error" otherwise
}

func (e *HTTPError) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Message) }

// Reply describes how the fake answers one /api/chat request.
//
// Streamed, the lines are: one per Thinking chunk (message.thinking), one per
// content chunk (message.content), one with all ToolCalls, then the final
// done line with metrics. Non-streamed ("stream": false), the same reply is
// sent as one JSON object with the joined thinking and content, the tool
// calls, done=true and the metrics, after the sum of the per-chunk delays.
type Reply struct {
	Thinking  []string       // chunks streamed in message.thinking before the content
	Chunks    []string       // content chunks, one NDJSON line each
	ToolCalls []api.ToolCall // sent in one line after the content; empty IDs become "call_xxxxxxxx", Function.Index is set to the position
	// Delay is waited before each thinking, content and tool-call line;
	// overrides WithTokenDelay when > 0.
	Delay time.Duration
	// ErrorBefore, when set, is sent instead of the reply: that status with
	// {"error": Message}. The client's Chat returns an api.StatusError
	// (api.AuthorizationError for 401).
	ErrorBefore *HTTPError
	// ErrorAfter, when > 0, ends the stream after this many content chunks
	// (after all of them if there are fewer) with an {"error": ErrorText} line,
	// as Ollama does when a runner fails mid-stream; the client's Chat returns
	// errors.New(ErrorText). Non-streamed, it becomes a 500 with that error.
	ErrorAfter int
	ErrorText  string // default "fake: model crashed"
	// PromptEvalCount is reported in the final metrics; default: the tokens
	// (TokensOf with the model's CharsPerToken) of the messages the model
	// saw after truncation (Recorded.Seen), capped at min(context window,
	// ContextLength) as Ollama's runner does (see the package doc).
	PromptEvalCount int
	// Hang, after the chunks, never sends the done line: the request stays
	// open until the client goes away (or SetDown(true) or Close).
	Hang bool
}

// Recorded is one /api/chat request as the fake saw it.
type Recorded struct {
	Path string           // "/api/chat"
	Chat *api.ChatRequest // the decoded request (nil if the body did not decode); do not modify
	// NumCtx is options.num_ctx of the request (0 when absent).
	NumCtx int
	// PromptTokens is the token count (TokensOf) of all the request's
	// messages, before truncation (0 until the request passed the model
	// checks).
	PromptTokens int
	// Truncated is how many messages were dropped from the front of the
	// history to fit the context window (system messages are never dropped).
	Truncated int
	// Seen is the messages the model saw after truncation: the system
	// messages of the dropped part, then the kept messages. Nil when the
	// model never ran (errors before it, load/unload requests, and a
	// "truncate": false request that does not fit). Do not modify.
	Seen []api.Message
	// Status is the HTTP status sent (0 while nothing was sent yet, or when
	// the connection was cut before a status was sent).
	Status int
	// Error is the error text sent to the client, either as an error status
	// body or as a mid-stream {"error": ...} line ("" when none).
	Error string
	// Cancelled: the client went away (cancelled its context, closed the
	// body) before the reply was complete.
	Cancelled bool
	// Completed: the reply was sent in full (done line, or the whole
	// non-streamed object). False for error replies.
	Completed bool
	// ChunksSent counts the NDJSON lines written so far (thinking, content,
	// tool-call, done and error lines); a non-streamed reply counts as 1.
	// It is updated live while the stream runs.
	ChunksSent int
}

// stop tells why a chat reply stopped early.
type stop int

const (
	stopNone   stop = iota
	stopClient      // the client went away
	stopDown        // SetDown(true)
	stopClosed      // Close
)

// chatRun is the state of one /api/chat request.
type chatRun struct {
	s       *Server
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     context.Context
	down    <-chan struct{}
	idx     int
	model   string
	start   time.Time
	written bool // status and headers sent

	status    int
	errText   string
	completed bool
	cancelled bool
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := io.ReadAll(r.Body)

	s.mu.Lock()
	run := &chatRun{s: s, w: w, rc: http.NewResponseController(w), ctx: r.Context(), down: s.downCh, start: start}
	script := s.script
	var req *api.ChatRequest
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		req = new(api.ChatRequest)
		if json.Unmarshal(body, req) != nil {
			req = nil
		}
	}
	rec := Recorded{Path: r.URL.Path, Chat: req}
	if req != nil {
		rec.NumCtx = numCtxOf(req.Options)
	}
	s.records = append(s.records, rec)
	run.idx = len(s.records) - 1
	s.active++
	s.notifyLocked()
	s.mu.Unlock()
	defer run.finish()

	if err != nil {
		run.cancelled = true
		return
	}
	var parsed api.ChatRequest // the copy given to the script
	if len(bytes.TrimSpace(body)) == 0 {
		run.fail(http.StatusBadRequest, "missing request body")
		return
	}
	if err := json.Unmarshal(body, &parsed); err != nil {
		run.fail(http.StatusBadRequest, err.Error())
		return
	}
	run.model = parsed.Model

	// The checks of Ollama's ChatHandler, in its order and wording.
	if parsed.TopLogprobs < 0 || parsed.TopLogprobs > 20 {
		run.fail(http.StatusBadRequest, "top_logprobs must be between 0 and 20")
		return
	}
	if parsed.Model == "" {
		run.fail(http.StatusBadRequest, "model is required")
		return
	}
	m, ok := s.lookup(parsed.Model)
	if !ok {
		run.fail(http.StatusNotFound, fmt.Sprintf("model '%s' not found", parsed.Model))
		return
	}
	if len(parsed.Messages) == 0 && parsed.KeepAlive != nil && parsed.KeepAlive.Duration == 0 {
		s.unload(m)
		run.sendObject(api.ChatResponse{
			Model: parsed.Model, CreatedAt: time.Now().UTC(),
			Message: api.Message{Role: "assistant"}, Done: true, DoneReason: "unload",
		})
		return
	}
	if !m.has(CapThinking) && parsed.Think != nil && parsed.Think.Bool() {
		run.fail(http.StatusBadRequest, fmt.Sprintf("%q does not support thinking", parsed.Model))
		return
	}
	if !m.has(CapCompletion) {
		run.fail(http.StatusBadRequest, fmt.Sprintf("%q does not support chat", parsed.Model))
		return
	}
	if len(parsed.Tools) > 0 && !m.has(CapTools) {
		run.fail(http.StatusBadRequest, qualified(m.Name)+" does not support tools")
		return
	}
	s.touch(m, parsed.KeepAlive, numCtxOf(parsed.Options))
	if len(parsed.Messages) == 0 {
		run.sendObject(api.ChatResponse{
			Model: parsed.Model, CreatedAt: time.Now().UTC(),
			Message: api.Message{Role: "assistant"}, Done: true, DoneReason: "load",
		})
		return
	}
	loaded := time.Since(start)

	// Context window and truncation, like Ollama's ChatHandler/chatPrompt
	// and its runner (see fitContext).
	window := contextWindow(m, parsed.Options)
	runnerCtx := min(window, m.ContextLength)
	total := TokensOf(m.CharsPerToken, parsed.Messages)
	truncate := parsed.Truncate == nil || *parsed.Truncate
	s.mu.Lock()
	s.records[run.idx].PromptTokens = total
	s.mu.Unlock()
	if !truncate && total > runnerCtx {
		// Ollama v0.17.4: with truncate false, chatPrompt keeps every
		// message and the runner refuses the prompt (errorInputTooLong in
		// runner/ollamarunner and llamarunner, http.Error 400); llmServer
		// turns that into an api.StatusError and ChatHandler sends it as
		// {"error": ..., "status": 400}, i.e. a 400 status with that text
		// before anything is streamed (streamResponse) or as the whole
		// reply (stream false). The script is not called: the model never
		// ran.
		run.fail(http.StatusBadRequest, ErrInputTooLong)
		return
	}
	seen, dropped := fitContext(m.CharsPerToken, window, parsed.Messages, truncate)
	s.mu.Lock()
	s.records[run.idx].Truncated = dropped
	s.records[run.idx].Seen = seen
	s.mu.Unlock()

	if script == nil {
		script = DefaultReply
	}
	// When even the kept messages exceed the runner's context, Ollama's
	// runner truncates the prompt tokens itself: it never evaluates more
	// than its context.
	promptCount := min(TokensOf(m.CharsPerToken, seen), runnerCtx)
	rep := script(&parsed)
	if rep.PromptEvalCount <= 0 {
		rep.PromptEvalCount = promptCount
	}
	if rep.Delay <= 0 {
		rep.Delay = s.delay
	}
	if rep.ErrorAfter > 0 && rep.ErrorText == "" {
		rep.ErrorText = "fake: model crashed"
	}
	rep.ToolCalls = fillToolCalls(rep.ToolCalls, run.idx)

	if rep.ErrorBefore != nil {
		st, msg := rep.ErrorBefore.Status, rep.ErrorBefore.Message
		if st == 0 {
			st = http.StatusInternalServerError
		}
		if msg == "" {
			if st == http.StatusNotFound {
				msg = fmt.Sprintf("model %q not found, try pulling it first", parsed.Model)
			} else {
				msg = "internal error"
			}
		}
		run.fail(st, msg)
		return
	}

	if parsed.Stream != nil && !*parsed.Stream {
		run.serveWhole(rep, loaded)
	} else {
		run.serveStream(rep, loaded)
	}
}

// ErrInputTooLong is the error text of a "truncate": false chat request
// whose messages do not fit the context (status 400), as Ollama's runner
// words it.
const ErrInputTooLong = "the input length exceeds the context length"

// contextWindow is the num_ctx Ollama's ChatHandler truncates the history
// to: options.num_ctx of the request, or when absent (or <= 0) the default.
// Ollama's default is VRAM-based (4096 below 24 GiB); the fake uses
// min(ContextLength, 4096), the context /api/ps reports.
func contextWindow(m Model, opts map[string]any) int {
	if n := numCtxOf(opts); n > 0 {
		return n
	}
	return min(m.ContextLength, 4096)
}

// fitContext mimics Ollama v0.17.4's chatPrompt (server/prompt.go): starting
// with all messages, it drops messages from the front until the tokens fit
// window, keeping the system messages of the dropped part (moved in front of
// the kept messages) and always keeping the last message. Without truncate
// nothing is dropped. It returns the messages the model sees (a new slice)
// and how many messages were dropped.
func fitContext(cpt float64, window int, msgs []api.Message, truncate bool) ([]api.Message, int) {
	last := len(msgs) - 1
	for i := 0; i <= last; i++ {
		var system []api.Message
		for _, m := range msgs[:i] {
			if m.Role == "system" {
				system = append(system, m)
			}
		}
		seen := append(system, msgs[i:]...)
		if !truncate || TokensOf(cpt, seen) <= window || i == last {
			return seen, i - len(system)
		}
	}
	return nil, 0 // no messages
}

func fillToolCalls(calls []api.ToolCall, reqIdx int) []api.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := slices.Clone(calls)
	for i := range out {
		out[i].Function.Index = i
		if out[i].ID == "" {
			h := sha256.Sum256(fmt.Appendf(nil, "%d/%d/%s", reqIdx, i, out[i].Function.Name))
			const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
			id := make([]byte, 8)
			for j := range id {
				id[j] = letters[int(h[j])%len(letters)]
			}
			out[i].ID = "call_" + string(id)
		}
	}
	return out
}
