package handlers

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/db"
)

// What /v1/chat/completions reads: OpenAI's request, and Weft's extension
// under "weft". Fields OpenAI has and Weft has no use for (user, logprobs,
// metadata, OpenAI's own store, …) are ignored.

type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int64          `json:"seed"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	N                   *int            `json:"n"`
	Tools               api.Tools       `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ResponseFormat      *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Weft *weftExtension `json:"weft"`
}

// weftExtension is Weft's part of a request: the workspace the exchange
// belongs to (default: the user's default workspace), knowledge bases to
// answer from (the rag route), and whether to store the exchange as a
// thread of that workspace.
type weftExtension struct {
	WorkspaceID    int64   `json:"workspace_id"`
	KnowledgeBases []int64 `json:"knowledge_bases"`
	Store          bool    `json:"store"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

type chatToolCall struct {
	Index    *int   `json:"index,omitempty"` // in stream deltas only
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// maxAPIMessages caps the conversation of one request.
const maxAPIMessages = 1000

// completion turns the request into the runtime's Completion (without the
// knowledge bases, which the handler authorizes); msg says what is wrong.
func (req *chatRequest) completion(user int64) (chat.Completion, string) {
	c := chat.Completion{User: user, Model: req.Model, Options: map[string]any{}}
	if len(req.Messages) == 0 {
		return c, "messages must hold at least one message."
	}
	if len(req.Messages) > maxAPIMessages {
		return c, "messages may hold at most " + strconv.Itoa(maxAPIMessages) + " messages."
	}
	if req.N != nil && *req.N != 1 {
		return c, "n must be 1: Weft answers once per request."
	}
	toolNames := map[string]string{} // tool call id → function name
	for i, m := range req.Messages {
		out, msg := m.toOllama(toolNames)
		if msg != "" {
			return c, "messages[" + strconv.Itoa(i) + "]: " + msg
		}
		c.Messages = append(c.Messages, out)
	}
	if msg := req.options(c.Options); msg != "" {
		return c, msg
	}
	choice := ""
	if len(req.ToolChoice) > 0 {
		_ = json.Unmarshal(req.ToolChoice, &choice) // an object names a function: passed as "auto"
	}
	if choice != "none" {
		c.Tools = req.Tools
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case "", "text":
		case "json_object":
			c.Format = []byte(`"json"`)
		case "json_schema":
			if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
				return c, "response_format json_schema needs json_schema.schema."
			}
			c.Format = f.JSONSchema.Schema
		default:
			return c, "response_format.type must be text, json_object or json_schema."
		}
	}
	return c, ""
}

// options maps OpenAI's sampling parameters to Ollama's options of the
// same meaning (presence and frequency penalties included: Ollama's runner
// reads them).
func (req *chatRequest) options(o map[string]any) string {
	if req.Temperature != nil {
		o["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		o["top_p"] = *req.TopP
	}
	if req.Seed != nil {
		o["seed"] = *req.Seed
	}
	if req.PresencePenalty != nil {
		o["presence_penalty"] = *req.PresencePenalty
	}
	if req.FrequencyPenalty != nil {
		o["frequency_penalty"] = *req.FrequencyPenalty
	}
	limit := req.MaxCompletionTokens
	if limit == nil {
		limit = req.MaxTokens
	}
	if limit != nil {
		if *limit < 1 {
			return "max_tokens must be at least 1."
		}
		o["num_predict"] = *limit
	}
	if len(req.Stop) > 0 && string(req.Stop) != "null" {
		var one string
		var many []string
		switch {
		case json.Unmarshal(req.Stop, &one) == nil:
			o["stop"] = []string{one}
		case json.Unmarshal(req.Stop, &many) == nil && len(many) <= 4:
			o["stop"] = many
		default:
			return "stop must be a string or an array of at most 4 strings."
		}
	}
	return ""
}

// toOllama turns one OpenAI message into Ollama's. Images come as data:
// URLs only (Weft fetches nothing on a caller's behalf).
func (m chatMessage) toOllama(toolNames map[string]string) (api.Message, string) {
	out := api.Message{Role: m.Role}
	switch m.Role {
	case "developer":
		out.Role = db.RoleSystem
	case db.RoleSystem, db.RoleUser, db.RoleAssistant:
	case "tool":
		out.ToolCallID = m.ToolCallID
		out.ToolName = toolNames[m.ToolCallID]
	default:
		return out, "role must be system, developer, user, assistant or tool."
	}
	text, images, msg := messageContent(m.Content)
	if msg != "" {
		return out, msg
	}
	if len(images) > 0 && m.Role != db.RoleUser {
		return out, "only user messages may carry images."
	}
	out.Content, out.Images = text, images
	for _, tc := range m.ToolCalls {
		args := api.NewToolCallFunctionArguments()
		if strings.TrimSpace(tc.Function.Arguments) != "" {
			if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
				return out, "tool_calls: the arguments of " + strconv.Quote(tc.Function.Name) + " are not a JSON object."
			}
		}
		out.ToolCalls = append(out.ToolCalls, api.ToolCall{ID: tc.ID, Function: api.ToolCallFunction{Name: tc.Function.Name, Arguments: args}})
		toolNames[tc.ID] = tc.Function.Name
	}
	return out, ""
}

// messageContent reads content: a string, null, or an array of text and
// image_url parts.
func messageContent(raw json.RawMessage) (string, []api.ImageData, string) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, ""
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, "content must be a string or an array of content parts."
	}
	var text strings.Builder
	var images []api.ImageData
	for _, p := range parts {
		switch p.Type {
		case "text":
			if text.Len() > 0 {
				text.WriteString("\n")
			}
			text.WriteString(p.Text)
		case "image_url":
			if p.ImageURL == nil {
				return "", nil, "an image_url part needs image_url.url."
			}
			img, msg := dataURLImage(p.ImageURL.URL)
			if msg != "" {
				return "", nil, msg
			}
			images = append(images, img)
		default:
			return "", nil, "content parts of type " + strconv.Quote(p.Type) + " are not supported (text and image_url are)."
		}
	}
	return text.String(), images, ""
}

// dataURLImage decodes a base64 data: URL of an image.
func dataURLImage(u string) (api.ImageData, string) {
	head, data, ok := strings.Cut(u, ",")
	if !ok || !strings.HasPrefix(head, "data:image/") || !strings.HasSuffix(head, ";base64") {
		return nil, "images must be sent as base64 data: URLs (data:image/png;base64,…); Weft does not fetch image URLs."
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(b) == 0 {
		return nil, "the image's data: URL is not valid base64."
	}
	if bytes.HasPrefix(b, []byte("<")) {
		return nil, "the data: URL does not hold a raster image."
	}
	return api.ImageData(b), ""
}
