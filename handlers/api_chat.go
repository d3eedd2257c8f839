package handlers

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/db"
	"weft/internal/usererr"
)

// maxAPIKBs caps the knowledge bases of one request.
const maxAPIKBs = 10

// chatCompletions serves POST /v1/chat/completions: parse, authorize the
// extension's objects (each the token user's, or 404), answer through the
// runtime, streamed as OpenAI's chunks or whole.
func (a *apiEndpoints) chatCompletions(w http.ResponseWriter, r *http.Request) {
	use := tokenUse(r)
	var req chatRequest
	if !decodeAPIBody(w, r, &req) {
		return
	}
	c, msg := req.completion(use.User.ID)
	if msg != "" {
		apiBadRequest(w, msg)
		return
	}
	if !a.checkModel(w, r, req.Model, "completion") {
		return
	}
	ext := req.Weft
	if ext == nil {
		ext = &weftExtension{}
	}
	var ws db.Workspace
	var err error
	switch {
	case ext.WorkspaceID != 0:
		ws, err = a.store.Workspace(r.Context(), use.User.ID, ext.WorkspaceID)
	case ext.Store:
		ws, err = a.store.DefaultWorkspace(r.Context(), use.User.ID)
	}
	if errors.Is(err, db.ErrNotFound) {
		apiNotFound(w, "workspace_not_found", "There is no workspace "+strconv.FormatInt(ext.WorkspaceID, 10)+" of yours.")
		return
	} else if err != nil {
		apiServerError(w, r, err)
		return
	}
	if ext.Store && ws.Archived() {
		apiBadRequest(w, "The workspace is archived: an exchange cannot be stored in it.")
		return
	}
	if c.KBs, msg = a.knowledgeBases(w, r, use, ext.KnowledgeBases); msg == "stop" {
		return
	}
	ctx, release, err := a.rt.APISlot(r.Context(), use.User.ID)
	if err != nil {
		a.completionError(w, r, err, req.Model)
		return
	}
	defer release()
	x := exchange{ctx: ctx, id: "chatcmpl-" + strings.ToLower(rand.Text()), created: a.now().Unix(), req: &req, c: c, ws: ws, store: ext.Store}
	if req.Stream {
		a.streamCompletion(w, r, x)
		return
	}
	done, err := a.rt.Complete(ctx, c, nil)
	if err != nil {
		a.completionError(w, r, stopCause(ctx, err), req.Model)
		return
	}
	resp := a.finish(r, x, done)
	writeAPIJSON(w, http.StatusOK, resp)
}

// knowledgeBases loads the extension's knowledge bases as the token's user
// (the kb scope is needed; a foreign or unknown id is a 404). "stop": an
// answer was written.
func (a *apiEndpoints) knowledgeBases(w http.ResponseWriter, r *http.Request, use db.TokenUse, ids []int64) ([]db.KnowledgeBase, string) {
	if len(ids) == 0 {
		return nil, ""
	}
	if !use.Token.Has(db.ScopeKB) {
		apiError(w, http.StatusForbidden, "permission_error", "insufficient_scope",
			"This API token does not have the kb scope, which knowledge bases need; make one with it on /settings.")
		return nil, "stop"
	}
	if len(ids) > maxAPIKBs {
		apiBadRequest(w, "weft.knowledge_bases may name at most "+strconv.Itoa(maxAPIKBs)+" knowledge bases.")
		return nil, "stop"
	}
	kbs := make([]db.KnowledgeBase, 0, len(ids))
	for _, id := range ids {
		kb, err := a.store.KB(r.Context(), use.User.ID, id)
		if errors.Is(err, db.ErrNotFound) {
			apiNotFound(w, "knowledge_base_not_found", "There is no knowledge base "+strconv.FormatInt(id, 10)+" of yours.")
			return nil, "stop"
		} else if err != nil {
			apiServerError(w, r, err)
			return nil, "stop"
		}
		kbs = append(kbs, kb)
	}
	return kbs, ""
}

// exchange is one request being answered.
type exchange struct {
	ctx     context.Context // the answer's: the request's, ended also by StopUserRuns
	id      string
	created int64
	req     *chatRequest
	c       chat.Completion
	ws      db.Workspace
	store   bool
}

// completionError answers a failed completion (nothing when the caller
// went away: the model request was cancelled with it).
func (a *apiEndpoints) completionError(w http.ResponseWriter, r *http.Request, err error, model string) {
	if r.Context().Err() != nil {
		return
	}
	status, typ, code, msg := a.failure(r, err, model)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "5")
	}
	apiError(w, status, typ, code, msg)
}

// failure classifies a failed completion: the run cap (429), the model
// server (502), a refusal that carries its words (400), anything else
// (500, logged).
func (a *apiEndpoints) failure(r *http.Request, err error, model string) (status int, typ, code, msg string) {
	var me *chat.ModelError
	switch {
	case errors.Is(err, chat.ErrAnswerStopped):
		return http.StatusUnauthorized, "invalid_request_error", "answer_stopped", usererr.Capitalize(err.Error()) + "."
	case errors.Is(err, chat.ErrRunCap):
		return http.StatusTooManyRequests, "requests", "too_many_runs", usererr.Capitalize(err.Error()) + "."
	case errors.As(err, &me), errors.Is(err, chat.ErrModelStream):
		return http.StatusBadGateway, "server_error", "model_error", a.rt.DescribeFailure(err, model)
	case usererr.Is(err):
		m, _ := usererr.Message(err)
		return http.StatusBadRequest, "invalid_request_error", "", usererr.Capitalize(m) + "."
	}
	apiServerError(nopWriter{}, r, err)
	return http.StatusInternalServerError, "server_error", "", "The server failed to answer; its log has the details."
}

// stopCause is the answer's error: ctx's cause when the runtime stopped
// it (the account was disabled), else err.
func stopCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// nopWriter lets failure log through apiServerError without writing.
type nopWriter struct{}

func (nopWriter) Header() http.Header         { return http.Header{} }
func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriter) WriteHeader(int)             {}

// finish stores the exchange when asked and builds the whole answer.
func (a *apiEndpoints) finish(r *http.Request, x exchange, done chat.Completed) map[string]any {
	a.tokens.WithLabelValues("prompt").Add(float64(done.Usage.PromptTokens))
	a.tokens.WithLabelValues("completion").Add(float64(done.Usage.OutputTokens))
	msg := map[string]any{"role": "assistant", "content": done.Content}
	if done.Thinking != "" {
		msg["reasoning_content"] = done.Thinking
	}
	if len(done.ToolCalls) > 0 {
		calls := make([]chatToolCall, len(done.ToolCalls))
		for i, tc := range done.ToolCalls {
			calls[i] = openAIToolCall(tc, nil)
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": x.id, "object": "chat.completion", "created": x.created, "model": x.req.Model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finishReason(done), "logprobs": nil}},
		"usage":   usage(done),
		"weft":    a.weftPart(r, x, done),
	}
}

// weftPart is Weft's part of an answer: the route, the sources (rag) and
// the stored thread (store).
func (a *apiEndpoints) weftPart(r *http.Request, x exchange, done chat.Completed) map[string]any {
	part := map[string]any{"route": done.Route}
	if done.Route == db.RouteRAG {
		part["sources"] = apiSources(done.Sources)
	}
	if x.store {
		t, err := a.storeExchange(context.WithoutCancel(r.Context()), x, done)
		if err != nil {
			apiServerError(nopWriter{}, r, err)
			part["store_error"] = "The exchange could not be stored; the server log has the details."
		} else {
			part["thread_id"] = t.ID
			part["thread_url"] = absoluteURL(r, a.publicURL, "/t/"+strconv.FormatInt(t.ID, 10))
		}
	}
	return part
}

func finishReason(done chat.Completed) string {
	switch {
	case len(done.ToolCalls) > 0:
		return "tool_calls"
	case done.DoneReason == "length":
		return "length"
	}
	return "stop"
}

func usage(done chat.Completed) map[string]int {
	return map[string]int{"prompt_tokens": done.Usage.PromptTokens, "completion_tokens": done.Usage.OutputTokens,
		"total_tokens": done.Usage.PromptTokens + done.Usage.OutputTokens}
}

// openAIToolCall is a model's tool call as OpenAI writes it (arguments as
// a JSON string); index is set in stream deltas.
func openAIToolCall(tc api.ToolCall, index *int) chatToolCall {
	var c chatToolCall
	c.Index, c.ID, c.Type = index, tc.ID, "function"
	if c.ID == "" {
		c.ID = "call_" + strings.ToLower(rand.Text())[:24]
	}
	c.Function.Name = tc.Function.Name
	args, err := json.Marshal(tc.Function.Arguments)
	if err != nil || string(args) == "null" {
		args = []byte("{}")
	}
	c.Function.Arguments = string(args)
	return c
}

type apiSource struct {
	N               int      `json:"n"`
	KnowledgeBaseID int64    `json:"knowledge_base_id"`
	KnowledgeBase   string   `json:"knowledge_base"`
	DocumentID      int64    `json:"document_id"`
	Document        string   `json:"document"`
	Page            int      `json:"page,omitempty"`
	Headings        []string `json:"headings,omitempty"`
	Text            string   `json:"text"`
	Score           float64  `json:"score"`
	Similarity      float64  `json:"similarity"`
	Cited           bool     `json:"cited"`
}

func apiSources(ss []db.Source) []apiSource {
	out := make([]apiSource, len(ss))
	for i, s := range ss {
		out[i] = apiSource{N: s.N, KnowledgeBaseID: s.KBID, KnowledgeBase: s.KB, DocumentID: s.DocumentID, Document: s.Document,
			Page: s.Page, Headings: s.Headings, Text: s.Text, Score: s.Fused, Similarity: s.Similarity, Cited: s.Cited}
	}
	return out
}

// storeExchange stores the exchange as a thread of the workspace: the
// caller's user and assistant turns, then the answer with its route,
// model, usage and sources, as a browser's answer carries them. System
// and tool messages, tool calls and images are not stored.
func (a *apiEndpoints) storeExchange(ctx context.Context, x exchange, done chat.Completed) (db.Thread, error) {
	in := db.ImportedThread{Model: x.req.Model, ActiveLeaf: -1}
	parent := -1
	for _, m := range x.c.Messages {
		if (m.Role != db.RoleUser && m.Role != db.RoleAssistant) || strings.TrimSpace(m.Content) == "" {
			continue
		}
		if in.Title == "" && m.Role == db.RoleUser {
			in.Title = apiTitle(m.Content)
		}
		in.Messages = append(in.Messages, db.ImportedMessage{Parent: parent, Role: m.Role, Content: m.Content, Status: db.MsgComplete})
		parent = len(in.Messages) - 1
	}
	if in.Title == "" {
		in.Title = "API conversation"
	}
	meta, err := json.Marshal(db.MessageMeta{Route: done.Route, Model: x.req.Model, Usage: done.Usage, Sources: done.Sources,
		NothingFound: done.Direct, Thinking: done.Thinking})
	if err != nil {
		return db.Thread{}, err
	}
	in.Messages = append(in.Messages, db.ImportedMessage{Parent: parent, Role: db.RoleAssistant, Content: done.Content,
		Metadata: meta, Status: db.MsgComplete})
	return a.store.ImportThread(ctx, x.c.User, x.ws.ID, in)
}

// apiTitle is a stored exchange's title: its first user message, on one
// line, cut to 80 characters.
func apiTitle(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > 80 {
		s = string([]rune(s)[:79]) + "…"
	}
	return s
}
