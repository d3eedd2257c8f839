package handlers

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/ollama/ollama/api"
)

// apiHeartbeat is how often a quiet stream gets a comment.
const apiHeartbeat = 15 * time.Second

// streamCompletion answers a completion as OpenAI's stream: a first chunk
// with the role, a chunk per piece of content, reasoning or tool calls as
// the model sends it, a last chunk with the finish reason (and Weft's
// part: route, sources, stored thread), a usage chunk when
// stream_options.include_usage asks, then "data: [DONE]". A failure after
// the stream began is an error object in the stream. The caller going
// away cancels the model request (the request's context).
func (a *apiEndpoints) streamCompletion(w http.ResponseWriter, r *http.Request, x exchange) {
	es, err := startEventStream(w)
	if err != nil {
		return
	}
	es.writeTimeout = a.writeTimeout
	// Heartbeat comments (which OpenAI's clients skip) keep proxies from
	// closing the stream while the model loads or knowledge bases are
	// searched; mu orders them with the chunks.
	var mu sync.Mutex
	send := func(data string) error {
		mu.Lock()
		defer mu.Unlock()
		return es.sendData(data)
	}
	stop := make(chan struct{})
	var beats sync.WaitGroup
	defer func() { close(stop); beats.Wait() }() // nothing writes after the handler
	beats.Go(func() {
		t := time.NewTicker(apiHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-t.C:
				mu.Lock()
				_ = es.comment()
				mu.Unlock()
			}
		}
	})
	chunk := func(delta map[string]any, finish any, extra map[string]any) error {
		c := map[string]any{"id": x.id, "object": "chat.completion.chunk", "created": x.created, "model": x.req.Model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}}
		for k, v := range extra {
			c[k] = v
		}
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		return send(string(b))
	}
	if chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil) != nil {
		return
	}
	calls := 0
	done, err := a.rt.Complete(x.ctx, x.c, func(resp api.ChatResponse) error {
		d := map[string]any{}
		if resp.Message.Content != "" {
			d["content"] = resp.Message.Content
		}
		if resp.Message.Thinking != "" {
			d["reasoning_content"] = resp.Message.Thinking
		}
		if len(resp.Message.ToolCalls) > 0 {
			list := make([]chatToolCall, len(resp.Message.ToolCalls))
			for i, tc := range resp.Message.ToolCalls {
				n := calls
				calls++
				list[i] = openAIToolCall(tc, &n)
			}
			d["tool_calls"] = list
		}
		return chunk(d, nil, nil)
	})
	if err != nil {
		if r.Context().Err() != nil {
			return // gone: the model request was cancelled with it
		}
		_, typ, code, msg := a.failure(r, stopCause(x.ctx, err), x.req.Model)
		f := apiFailure{Message: msg, Type: typ}
		if code != "" {
			f.Code = &code
		}
		if b, err := json.Marshal(map[string]apiFailure{"error": f}); err == nil {
			_ = send(string(b))
		}
		_ = send("[DONE]")
		return
	}
	if chunk(map[string]any{}, finishReason(done), map[string]any{"weft": a.weftPart(r, x, done)}) != nil {
		return
	}
	a.tokens.WithLabelValues("prompt").Add(float64(done.Usage.PromptTokens))
	a.tokens.WithLabelValues("completion").Add(float64(done.Usage.OutputTokens))
	if so := x.req.StreamOptions; so != nil && so.IncludeUsage {
		b, err := json.Marshal(map[string]any{"id": x.id, "object": "chat.completion.chunk", "created": x.created,
			"model": x.req.Model, "choices": []any{}, "usage": usage(done)})
		if err != nil || send(string(b)) != nil {
			return
		}
	}
	_ = send("[DONE]")
}
