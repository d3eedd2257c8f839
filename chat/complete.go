package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/usererr"
)

// This file answers the OpenAI-compatible API (issue 19): a caller's own
// conversation, sent in the request rather than read from a thread, goes
// through the same rules as a browser's answer — the instance's system
// prompt and the user's custom instructions first, num_ctx from the model,
// the same model servers, knowledge bases searched like the rag route, the
// per-user run cap — and Stop is the caller going away (its context).
// Nothing is stored here: the handler stores the exchange as a thread when
// the caller asks.

// Completion is one answer the API asks for.
type Completion struct {
	User     int64
	Model    string
	Messages []api.Message // the caller's conversation, in order
	Tools    api.Tools     // the caller's tools: passed to the model, never run
	Options  map[string]any
	Think    *api.ThinkValue
	Format   []byte // "json" or a JSON schema; nil: text
	// KBs are knowledge bases the caller may read (checked by the caller):
	// the last user message is searched in them and the sources go into
	// the system message, as on the rag route.
	KBs []db.KnowledgeBase
}

// Completed is the outcome of a Completion.
type Completed struct {
	Model      string
	Content    string
	Thinking   string
	ToolCalls  []api.ToolCall
	Route      string      // db.RouteChat or db.RouteRAG
	Sources    []db.Source // rag: the sources given to the model, cited ones marked
	Direct     bool        // answered without the model: nothing relevant found
	Usage      db.Usage
	DoneReason string // Ollama's: stop, length, …
}

// ErrRunCap refuses an API answer while the user already has
// WEFT_MAX_RUNS_PER_USER answers running (browser runs and API answers).
var ErrRunCap = usererr.New("too many answers are running for this account at once; wait for one to finish")

// ErrModelStream is a model stream that ended without its final chunk.
var ErrModelStream = errors.New("the model server ended the answer early")

// runCounter is the part of a Store that counts a user's active runs.
type runCounter interface {
	ActiveRunCount(ctx context.Context, user int64) (int, error)
}

// userContext is the part of a Store that reads the user's own parts of
// the system message.
type userContext interface {
	UserContextSources(ctx context.Context, user int64) (db.ContextSources, error)
}

// apiRuns are the API answers running on this instance, per user: they
// count against the run cap, and StopUserRuns cancels them.
type apiRuns struct {
	mu sync.Mutex
	n  map[int64]map[*apiAnswer]bool
}

// apiAnswer is one running API answer.
type apiAnswer struct{ cancel context.CancelCauseFunc }

// ErrAnswerStopped ends an API answer whose account was disabled or
// deleted while it ran.
var ErrAnswerStopped = usererr.New("this answer was stopped: its account was disabled or deleted")

// APISlot takes one of the user's run slots for an API answer, before it
// begins (a refusal is then a plain 429, not an error inside a stream):
// browser runs (running or waiting, on any instance, from the database)
// and this instance's API answers count together against PerUserRuns.
// The answer runs in the returned context, which StopUserRuns cancels
// with ErrAnswerStopped as its cause; the caller calls release when the
// answer is over.
func (rt *Runtime) APISlot(ctx context.Context, user int64) (_ context.Context, release func(), err error) {
	running := 0
	if rc, ok := rt.store.(runCounter); ok {
		n, err := rc.ActiveRunCount(ctx, user)
		if err != nil {
			return nil, nil, err
		}
		running = n
	}
	s := &rt.apiRuns
	s.mu.Lock()
	defer s.mu.Unlock()
	if running+len(s.n[user]) >= rt.cfg.PerUserRuns {
		return nil, nil, ErrRunCap
	}
	if s.n == nil {
		s.n = map[int64]map[*apiAnswer]bool{}
	}
	if s.n[user] == nil {
		s.n[user] = map[*apiAnswer]bool{}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	a := &apiAnswer{cancel: cancel}
	s.n[user][a] = true
	return ctx, func() {
		cancel(nil)
		s.mu.Lock()
		defer s.mu.Unlock()
		if delete(s.n[user], a); len(s.n[user]) == 0 {
			delete(s.n, user)
		}
	}, nil
}

// stopUser cancels the user's API answers running on this instance.
func (s *apiRuns) stopUser(user int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a := range s.n[user] {
		a.cancel(ErrAnswerStopped)
	}
}

// Complete answers c; the caller holds an APISlot. delta is called for each piece of the answer as it
// arrives (content, thinking or tool calls; it may be nil); an error it
// returns stops the model. A cancelled ctx (the caller went away) cancels
// the model request and returns ctx's error.
func (rt *Runtime) Complete(ctx context.Context, c Completion, delta func(api.ChatResponse) error) (Completed, error) {
	out := Completed{Model: c.Model, Route: db.RouteChat}
	started := time.Now()
	var cs db.ContextSources
	var err error
	if uc, ok := rt.store.(userContext); ok {
		if cs, err = uc.UserContextSources(ctx, c.User); err != nil {
			return out, fmt.Errorf("load the user's context: %w", err)
		}
	}
	numCtx := contextWindow(rt.models.ContextLength(ctx, c.Model), rt.models.maxCtx, nil, 0)
	routeContext := ""
	if len(c.KBs) > 0 {
		out.Route = db.RouteRAG
		direct, sources, err := rt.completionSources(ctx, c, numCtx)
		if err != nil {
			return out, err
		}
		if direct != "" {
			out.Content, out.Direct, out.DoneReason = direct, true, "stop"
			if delta != nil {
				if err := delta(api.ChatResponse{Message: api.Message{Role: db.RoleAssistant, Content: direct}}); err != nil {
					return out, err
				}
			}
			return out, nil
		}
		out.Sources = sources
		routeContext = ragContext(c.KBs, false, sources)
	}

	msgs := make([]api.Message, 0, len(c.Messages)+1)
	if sys := systemPrompt(cs, "", "", nil, routeContext); sys != "" {
		msgs = append(msgs, api.Message{Role: db.RoleSystem, Content: sys})
	}
	msgs = append(msgs, c.Messages...)
	opts := map[string]any{}
	for k, v := range c.Options {
		opts[k] = v
	}
	opts["num_ctx"] = numCtx
	req := &api.ChatRequest{Model: c.Model, Messages: msgs, Stream: ptr(true), Options: opts, Tools: c.Tools, Think: c.Think, Format: c.Format}

	var content, thinking strings.Builder
	var final *api.ChatResponse
	var deltaErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = rt.llm.Chat(ctx, req, func(r api.ChatResponse) error {
		content.WriteString(r.Message.Content)
		thinking.WriteString(r.Message.Thinking)
		out.ToolCalls = append(out.ToolCalls, r.Message.ToolCalls...)
		if delta != nil && (r.Message.Content != "" || r.Message.Thinking != "" || len(r.Message.ToolCalls) > 0) {
			if err := delta(r); err != nil {
				deltaErr = err
				cancel()
				return err
			}
		}
		if r.Done {
			f := r
			final = &f
		}
		return nil
	})
	out.Content, out.Thinking = content.String(), thinking.String()
	switch {
	case deltaErr != nil:
		return out, deltaErr
	case ctx.Err() != nil:
		return out, ctx.Err()
	case err != nil:
		return out, modelFailure(err)
	case final == nil:
		return out, ErrModelStream
	}
	m := final.Metrics
	out.DoneReason = final.DoneReason
	out.Usage = db.Usage{Counted: true, PromptTokens: m.PromptEvalCount, OutputTokens: m.EvalCount,
		DurationMS: m.TotalDuration.Milliseconds(), DoneReason: final.DoneReason, NumCtx: numCtx,
		WallMS: time.Since(started).Milliseconds()}
	if m.EvalDuration > 0 {
		out.Usage.TokensPerSecond = float64(m.EvalCount) / m.EvalDuration.Seconds()
	}
	if numCtx > 0 {
		out.Usage.ContextFill = float64(m.PromptEvalCount+m.EvalCount) / float64(numCtx)
	}
	if out.Sources != nil {
		out.Sources = markCited(out.Sources, out.Content)
	}
	return out, nil
}

// completionSources searches c's knowledge bases for its last user message,
// as the rag route does for a thread's: direct is the answer when nothing
// relevant was found (the model is not asked).
func (rt *Runtime) completionSources(ctx context.Context, c Completion, numCtx int) (direct string, sources []db.Source, err error) {
	question := ""
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == db.RoleUser {
			question = c.Messages[i].Content
			break
		}
	}
	if strings.TrimSpace(question) == "" {
		return "", nil, usererr.New("the knowledge bases are searched for the last user message, and it has no text")
	}
	if rt.cfg.Retriever == nil {
		return "", nil, usererr.New("knowledge bases cannot be searched on this server right now")
	}
	cpt, _ := rt.charsPerToken(ctx, c.Model)
	sources, err = rt.cfg.Retriever.Retrieve(ctx, c.User, c.KBs, question, c.Model, numCtx, SourceChars(numCtx, nil, cpt))
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		if msg, ok := usererr.Message(err); ok {
			return "", nil, usererr.Wrap(err, msg)
		}
		slog.Error("knowledge base search (api)", "user", c.User, "err", err)
		return "", nil, usererr.Wrap(err, "the knowledge base could not be searched; the server log has the details")
	}
	if len(sources) == 0 {
		return nothingFound(c.KBs, false), nil, nil
	}
	return "", sources, nil
}

// embedder is the part of the model client that embeds.
type embedder interface {
	Embed(ctx context.Context, req *api.EmbedRequest) (*api.EmbedResponse, error)
}

// Embed embeds texts with model, on the model servers chat uses; the
// caller checks the model is an embedding model.
func (rt *Runtime) Embed(ctx context.Context, model string, texts []string) (*api.EmbedResponse, error) {
	e, ok := rt.llm.(embedder)
	if !ok {
		return nil, usererr.New("embeddings are not available on this server")
	}
	resp, err := e.Embed(ctx, &api.EmbedRequest{Model: model, Input: texts, Truncate: ptr(true)})
	if err != nil {
		return nil, modelFailure(err)
	}
	if len(resp.Embeddings) != len(texts) {
		return nil, fmt.Errorf("the model returned %d embeddings for %d texts", len(resp.Embeddings), len(texts))
	}
	return resp, nil
}

// DescribeFailure is what the API tells its caller about a failed answer:
// the words the browser shows, without internals.
func (rt *Runtime) DescribeFailure(err error, model string) string { return rt.describe(err, model) }
