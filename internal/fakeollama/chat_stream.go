package fakeollama

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/ollama/ollama/api"
)

// Writing one chat reply: streamed line by line with pauses, hangs and
// aborts, or whole.

// finish makes the record final.
func (run *chatRun) finish() {
	s := run.s
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := &s.records[run.idx]
	rec.Status = run.status
	rec.Error = run.errText
	rec.Completed = run.completed
	rec.Cancelled = run.cancelled && !run.completed
	if rec.Cancelled {
		s.cancelled++
	}
	s.active--
	s.notifyLocked()
}

func (run *chatRun) fail(status int, msg string) {
	run.status, run.errText = status, msg
	writeError(run.w, status, msg)
	run.written = true
	run.countLine()
}

func (run *chatRun) countLine() {
	s := run.s
	s.mu.Lock()
	s.records[run.idx].ChunksSent++
	s.notifyLocked()
	s.mu.Unlock()
}

// sendObject sends one complete JSON response (Ollama's c.JSON).
func (run *chatRun) sendObject(resp api.ChatResponse) {
	run.status = http.StatusOK
	writeJSON(run.w, http.StatusOK, resp)
	run.written = true
	if err := run.rc.Flush(); err != nil {
		run.cancelled = true
		return
	}
	run.completed = true
	run.countLine()
}

// pause waits d, or less when the request must stop.
func (run *chatRun) pause(d time.Duration) stop {
	return pause(run.ctx, run.down, run.s.closing, d)
}

// pause waits d, or less when ctx ends (stopClient), down is closed
// (stopDown) or closing is closed (stopClosed). With d <= 0 it only checks
// whether the request must stop.
func pause(ctx context.Context, down, closing <-chan struct{}, d time.Duration) stop {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return stopClient
	case <-down:
		return stopDown
	case <-closing:
		return stopClosed
	default:
	}
	if timer == nil {
		return stopNone
	}
	select {
	case <-timer:
		return stopNone
	case <-ctx.Done():
		return stopClient
	case <-down:
		return stopDown
	case <-closing:
		return stopClosed
	}
}

// hang blocks until the request must stop.
func (run *chatRun) hang() stop {
	select {
	case <-run.ctx.Done():
		return stopClient
	case <-run.down:
		return stopDown
	case <-run.s.closing:
		return stopClosed
	}
}

// abort ends the request early for the given reason.
func (run *chatRun) abort(why stop) {
	switch why {
	case stopClient:
		run.cancelled = true
	case stopDown:
		run.errText = "fake: server down"
		cutConnection(run.w)
	case stopClosed:
		run.errText = "fake: server closed"
		cutConnection(run.w)
	}
}

// line writes and flushes one NDJSON line; false when the client is gone.
func (run *chatRun) line(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	b = append(b, '\n')
	if run.s.lineHook != nil {
		run.s.lineHook(b, run.start)
	}
	if !run.written {
		run.w.Header().Set("Content-Type", "application/x-ndjson")
		run.w.WriteHeader(http.StatusOK)
		run.status = http.StatusOK
		run.written = true
	}
	if _, err := run.w.Write(b); err != nil {
		run.cancelled = true
		return false
	}
	if err := run.rc.Flush(); err != nil {
		run.cancelled = true
		return false
	}
	run.countLine()
	return true
}

func (run *chatRun) chunk(msg api.Message) api.ChatResponse {
	msg.Role = "assistant"
	return api.ChatResponse{Model: run.model, CreatedAt: time.Now().UTC(), Message: msg}
}

func (run *chatRun) metrics(rep Reply, loaded, evalStart time.Duration) api.Metrics {
	load := max(loaded, time.Microsecond)
	promptDur := time.Duration(rep.PromptEvalCount) * 10 * time.Microsecond
	eval := max(time.Since(run.start)-evalStart, time.Microsecond)
	total := max(time.Since(run.start), load+promptDur+eval)
	return api.Metrics{
		TotalDuration:      total,
		LoadDuration:       load,
		PromptEvalCount:    rep.PromptEvalCount,
		PromptEvalDuration: promptDur,
		EvalCount:          len(rep.Chunks),
		EvalDuration:       eval,
	}
}

func (run *chatRun) serveStream(rep Reply, loaded time.Duration) {
	evalStart := time.Since(run.start)
	for _, t := range rep.Thinking {
		if why := run.pause(rep.Delay); why != stopNone {
			run.abort(why)
			return
		}
		if !run.line(run.chunk(api.Message{Thinking: t})) {
			return
		}
	}
	crashed := false
	crash := func() {
		crashed = true
		run.errText = rep.ErrorText
		if !run.written {
			// Like Ollama's streamResponse: an error before anything was
			// written becomes an error status.
			run.fail(http.StatusInternalServerError, rep.ErrorText)
			return
		}
		run.line(map[string]string{"error": rep.ErrorText})
	}
	for i, c := range rep.Chunks {
		if why := run.pause(rep.Delay); why != stopNone {
			run.abort(why)
			return
		}
		if !run.line(run.chunk(api.Message{Content: c})) {
			return
		}
		if rep.ErrorAfter > 0 && i+1 == rep.ErrorAfter {
			crash()
			return
		}
	}
	if rep.ErrorAfter > 0 && !crashed {
		crash()
		return
	}
	if len(rep.ToolCalls) > 0 {
		if why := run.pause(rep.Delay); why != stopNone {
			run.abort(why)
			return
		}
		if !run.line(run.chunk(api.Message{ToolCalls: rep.ToolCalls})) {
			return
		}
	}
	if rep.Hang {
		run.abort(run.hang())
		return
	}
	if why := run.pause(0); why != stopNone {
		run.abort(why)
		return
	}
	final := run.chunk(api.Message{})
	final.Done = true
	final.DoneReason = "stop"
	final.Metrics = run.metrics(rep, loaded, evalStart)
	if run.line(final) {
		run.completed = true
	}
}

func (run *chatRun) serveWhole(rep Reply, loaded time.Duration) {
	evalStart := time.Since(run.start)
	n := len(rep.Thinking) + len(rep.Chunks)
	if len(rep.ToolCalls) > 0 {
		n++
	}
	if rep.ErrorAfter > 0 {
		n = len(rep.Thinking) + min(rep.ErrorAfter, len(rep.Chunks))
	}
	if why := run.pause(time.Duration(n) * rep.Delay); why != stopNone {
		run.abort(why)
		return
	}
	if rep.ErrorAfter > 0 {
		// Ollama's non-streaming path turns a runner error into a 500.
		run.fail(http.StatusInternalServerError, rep.ErrorText)
		return
	}
	if rep.Hang {
		run.abort(run.hang())
		return
	}
	resp := run.chunk(api.Message{
		Content:   strings.Join(rep.Chunks, ""),
		Thinking:  strings.Join(rep.Thinking, ""),
		ToolCalls: rep.ToolCalls,
	})
	resp.Done = true
	resp.DoneReason = "stop"
	resp.Metrics = run.metrics(rep, loaded, evalStart)
	run.sendObject(resp)
}
