package handlers

import (
	"encoding/json"
	"net/http"

	"github.com/ollama/ollama/api"
)

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
		return es.sendData(string(b))
	}
	if chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil) != nil {
		return
	}
	calls := 0
	done, err := a.rt.Complete(r.Context(), x.c, func(resp api.ChatResponse) error {
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
		_, typ, code, msg := a.failure(r, err, x.req.Model)
		f := apiFailure{Message: msg, Type: typ}
		if code != "" {
			f.Code = &code
		}
		if b, err := json.Marshal(map[string]apiFailure{"error": f}); err == nil {
			_ = es.sendData(string(b))
		}
		_ = es.sendData("[DONE]")
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
		if err != nil || es.sendData(string(b)) != nil {
			return
		}
	}
	_ = es.sendData("[DONE]")
}
