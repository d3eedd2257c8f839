package fakeollama

import (
	"encoding/json"

	"github.com/ollama/ollama/api"
)

// Structured output: a request with "format" (Ollama's "json" or a JSON
// schema) gets JSON back, as from a real model, which Ollama holds to the
// format.

// isFormatRequest: the request asks for structured output.
func isFormatRequest(req *api.ChatRequest) bool {
	return len(req.Format) > 0 && string(req.Format) != "null" && string(req.Format) != `""`
}

// formatReply is the default reply to a structured-output request: the
// last user message (directives removed) put into the format — for
// "json", that text as a JSON string; for a schema, an instance of it in
// which every string is that text, every array holds one item (or
// minItems), numbers are 0 (or the minimum), booleans false, and an enum
// or const takes its first value. A model that answers with the question
// itself, so that what a client does with it is deterministic.
func formatReply(req *api.ChatRequest) Reply {
	last := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			last = req.Messages[i].Content
			break
		}
	}
	text := parseDirectives(last).text
	var v any = text
	var schema map[string]any
	if json.Unmarshal(req.Format, &schema) == nil {
		v = instance(schema, text, 0)
	}
	b, err := json.Marshal(v) // objects come out with sorted keys: deterministic
	if err != nil {
		b = []byte("null")
	}
	return Reply{Chunks: []string{string(b)}}
}

// instance builds a value that satisfies the JSON schema s (the subset
// structured output uses: type, properties, items, minItems, enum, const,
// anyOf/oneOf, minimum), with text for strings.
func instance(s map[string]any, text string, depth int) any {
	if depth > 32 {
		return nil
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			if first, ok := alts[0].(map[string]any); ok {
				return instance(first, text, depth+1)
			}
		}
	}
	switch schemaType(s) {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			ps, _ := p.(map[string]any)
			out[name] = instance(ps, text, depth+1)
		}
		return out
	case "array":
		items, _ := s["items"].(map[string]any)
		n := 1
		if m, ok := s["minItems"].(float64); ok && m > 1 {
			n = min(int(m), 16)
		}
		out := make([]any, n)
		for i := range out {
			out[i] = instance(items, text, depth+1)
		}
		return out
	case "integer", "number":
		if m, ok := s["minimum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return false
	case "null":
		return nil
	}
	return text
}

// schemaType is the schema's type: the first one other than "null" of a
// list; "object" when it has properties and no type; "string" otherwise.
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if name, ok := x.(string); ok && name != "null" {
				return name
			}
		}
		return "null"
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	return "string"
}
