// Package fakeollama is an in-process fake of the Ollama HTTP API, for tests
// and benchmarks only. It must never be used by production code.
//
// The fake speaks Ollama's real wire format (the one of
// github.com/ollama/ollama v0.17.4), so code talking to it through the
// official api.Client cannot tell it from a real server for the features it
// covers: streamed and non-streamed /api/chat (content, thinking, tool calls,
// errors before and in the middle of a stream, final metrics), /api/tags,
// /api/show, /api/embed, /api/embeddings, /api/version, /api/ps and the
// "Ollama is running" root. Replies are deterministic: by default they are
// driven by directives written in the last user message (see DefaultReply),
// or by a script given with WithScript or SetScript.
//
// The directives of DefaultReply (details there):
//
//	[[slow:D]] [[tokens:N]] [[think]] [[error-before:S]] [[error-after:N]] [[hang]]
//	[[tool:NAME {json}]]     a tool call in round 0
//	[[tool@N:NAME {json}]]   a tool call in round N
//	[[tool*:NAME {json}]]    a tool call in every round ("{{round}}" in the JSON becomes the round number)
//	[[error@N]]              round N fails with a 500 "fake: model crashed"
//
// A tool loop is scripted with rounds: the round of a streamed request is
// the number of assistant messages after its last user message. Round 0
// behaves as without tool loops; in later rounds the scheduled tool calls
// are made, directives in the "tool" result messages are obeyed too (a
// gullible model, to test prompt injection), and a round without tool calls
// answers "Done after N tool rounds. Last result: ...". [[slow]] applies to
// every round, [[tokens]], [[think]], [[error-before]], [[error-after]] and
// [[hang]] of the user message to round 0 only.
//
// Prompts are counted in tokens with TokensOf (per model, see
// Model.CharsPerToken) and truncated like Ollama's chatPrompt does: the
// context window is options.num_ctx of the request, or min(ContextLength,
// 4096) when absent; when the messages do not fit, messages are dropped from
// the front (system messages and the last message are kept) unless the
// request says "truncate": false, which gets a 400 ErrInputTooLong instead.
// The context actually available is min(window, ContextLength) (Ollama's
// runner caps num_ctx at the model's trained context): "truncate": false
// fails when the messages exceed it, and prompt_eval_count never exceeds it.
// Scripts still get the whole request; what the model saw is in
// Recorded.Seen.
//
// Every /api/chat request is recorded (see Requests), including whether the
// client abandoned it, so tests can assert that cancellation reaches the
// model server. SetDown simulates an unreachable server.
//
// Embeddings (/api/embed, /api/embeddings) come from Vector, a deterministic
// lexical embedder: texts about the same thing (shared words, up to crude
// stemming) get clearly closer vectors than unrelated texts, so retrieval
// can be tested. /api/embed truncates inputs longer than the model's
// context like Ollama (or fails with "truncate": false), records every
// request (EmbedRequests), can fail on demand (FailEmbeds), can be slowed
// down (WithEmbedDelay) and tracks its peak concurrency
// (MaxConcurrentEmbeds).
//
// Typical use:
//
//	fake := fakeollama.New(t)
//	u, _ := url.Parse(fake.URL)
//	client := api.NewClient(u, http.DefaultClient)
package fakeollama

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"
)

// Version is what GET /api/version reports.
const Version = "0.17.4"

// Capability names, as Ollama reports them in /api/show.
const (
	CapCompletion = "completion"
	CapThinking   = "thinking"
	CapTools      = "tools"
	CapVision     = "vision"
	CapEmbedding  = "embedding"
)

// Model is a model the fake offers in /api/tags and /api/show and accepts
// in /api/chat and /api/embed.
//
// Name is matched like Ollama does: case-insensitively and with ":latest"
// implied when no tag is given, so "tiny", "tiny:latest" and "TINY" are the
// same model. /api/tags lists the name with its tag ("tiny:latest"), as
// Ollama does.
type Model struct {
	Name         string
	Capabilities []string // default: ["completion"]
	// ContextLength is reported as "<family>.context_length" in /api/show
	// model_info (default 4096).
	ContextLength int
	// EmbeddingLength is the length of /api/embed vectors and is reported as
	// "<family>.embedding_length" when > 0 (default 256 for models with the
	// "embedding" capability, else 0). See Vector.
	EmbeddingLength int
	Family          string // default "llama"
	// CharsPerToken is how many characters (runes) of message content make
	// one token for this model (default 4 when <= 0). See TokensOf.
	CharsPerToken float64
}

// MessageOverhead is how many tokens the fake's chat template adds to each
// message (role markers and the like), on top of its content. See TokensOf.
const MessageOverhead = 4

// defaultCharsPerToken is Model.CharsPerToken when not set.
const defaultCharsPerToken = 4

// TokensOf is the number of prompt tokens the fake counts for msgs with a
// model of cpt characters per token (default 4 when cpt <= 0): the sum over
// the messages of MessageOverhead + ceil(runes(content) / cpt). Only the
// content counts; thinking, tool calls and images are free. It is what the
// fake uses for truncation and for the default prompt_eval_count, so tests
// can compute what it will report.
func TokensOf(cpt float64, msgs []api.Message) int {
	if cpt <= 0 {
		cpt = defaultCharsPerToken
	}
	n := 0
	for _, m := range msgs {
		n += MessageOverhead + int(math.Ceil(float64(utf8.RuneCountInString(m.Content))/cpt))
	}
	return n
}

// PromptTokens is TokensOf for the model named model (matched like in
// /api/chat; an unknown model counts with the default 4 characters per
// token).
func (s *Server) PromptTokens(model string, msgs []api.Message) int {
	m, _ := s.lookup(model)
	return TokensOf(m.CharsPerToken, msgs)
}

// DefaultModels is the model set used when no WithModels option is given.
func DefaultModels() []Model {
	return []Model{
		{Name: "tiny", Capabilities: []string{CapCompletion}, ContextLength: 4096, Family: "llama"},
		{Name: "thinker", Capabilities: []string{CapCompletion, CapThinking}, ContextLength: 4096, Family: "llama"},
		{Name: "toolie", Capabilities: []string{CapCompletion, CapTools}, ContextLength: 4096, Family: "llama"},
		{Name: "vision", Capabilities: []string{CapCompletion, CapVision}, ContextLength: 4096, Family: "llama"},
		{Name: "embedder", Capabilities: []string{CapEmbedding}, ContextLength: 2048, EmbeddingLength: 256, Family: "bert"},
		{Name: "embedder-small", Capabilities: []string{CapEmbedding}, ContextLength: 512, EmbeddingLength: 64, Family: "bert"},
	}
}

func (m Model) has(c string) bool { return slices.Contains(m.Capabilities, c) }

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

// Option configures a Server.
type Option func(*Server)

// WithModels replaces the default model set.
func WithModels(ms ...Model) Option {
	return func(s *Server) { s.models = append([]Model(nil), ms...) }
}

// WithTokenDelay sets the default delay before each streamed chunk (default
// 0: instant). Reply.Delay overrides it.
func WithTokenDelay(d time.Duration) Option {
	return func(s *Server) { s.delay = d }
}

// WithEmbedDelay makes every /api/embed request that reaches the model (a
// known embedding model; failures injected with FailEmbeds do not wait)
// take d before it answers, whatever the number of inputs, to test
// timeouts and bounded concurrency. The wait ends early when the client goes
// away (nothing is sent then), on SetDown(true) and on Close (the
// connection is cut).
func WithEmbedDelay(d time.Duration) Option {
	return func(s *Server) { s.embedDelay = d }
}

// WithScript replaces the default reply logic (DefaultReply). The function
// gets its own copy of the decoded request and may be called concurrently.
// Model existence and capability checks still run before it, as in Ollama.
func WithScript(fn func(req *api.ChatRequest) Reply) Option {
	return func(s *Server) { s.script = fn }
}

// Server is a running fake Ollama server.
type Server struct {
	// URL is the base URL of the server, e.g. "http://127.0.0.1:34567".
	URL string

	ts        *httptest.Server
	models    []Model
	delay     time.Duration
	closing   chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	script    func(*api.ChatRequest) Reply
	down      bool
	downCh    chan struct{} // closed while down
	records   []Recorded
	cancelled int
	active    int
	changed   chan struct{} // closed and replaced whenever records change
	loaded    map[string]loadedModel

	embedDelay  time.Duration
	embeds      []EmbedRecord
	embedActive int
	embedMax    int
	failEmbeds  int // how many of the next /api/embed requests fail
	failStatus  int
}

type loadedModel struct {
	m       Model
	expires time.Time
	ctxLen  int
}

// New starts a fake server for a test; it is closed on t.Cleanup.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := Start(opts...)
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake server; the caller must Close it. For benchmarks and
// tools; tests should use New.
func Start(opts ...Option) *Server {
	s := &Server{
		closing: make(chan struct{}),
		downCh:  make(chan struct{}),
		changed: make(chan struct{}),
		loaded:  map[string]loadedModel{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.models == nil {
		s.models = DefaultModels()
	}
	for i := range s.models {
		m := &s.models[i]
		m.Capabilities = append([]string(nil), m.Capabilities...)
		if len(m.Capabilities) == 0 {
			m.Capabilities = []string{CapCompletion}
		}
		if m.ContextLength <= 0 {
			m.ContextLength = 4096
		}
		if m.Family == "" {
			m.Family = "llama"
		}
		if m.CharsPerToken <= 0 {
			m.CharsPerToken = defaultCharsPerToken
		}
		if m.EmbeddingLength <= 0 && m.has(CapEmbedding) {
			m.EmbeddingLength = defaultEmbeddingLength
		}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.handleRoot) // also HEAD
	mux.HandleFunc("GET /api/version", s.handleVersion)
	mux.HandleFunc("GET /api/tags", s.handleTags)
	mux.HandleFunc("GET /api/ps", s.handlePs)
	mux.HandleFunc("POST /api/show", s.handleShow)
	mux.HandleFunc("POST /api/chat", s.handleChat)
	mux.HandleFunc("POST /api/embed", s.handleEmbed)
	mux.HandleFunc("POST /api/embeddings", s.handleEmbeddings)

	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.isDown() {
			cutConnection(w)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	s.URL = s.ts.URL
	return s
}

// Close stops the server: streams still running (hanging ones included) are
// cut, and Close waits for every handler to return. It is safe to call more
// than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.ts.Close()
	})
}

// Client returns an api.Client for the server, using http.DefaultClient.
func (s *Server) Client() *api.Client {
	u, err := url.Parse(s.URL)
	if err != nil {
		panic(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

// SetScript replaces the reply logic at run time; nil restores DefaultReply.
// Requests already streaming keep the reply they started with.
func (s *Server) SetScript(fn func(req *api.ChatRequest) Reply) {
	s.mu.Lock()
	s.script = fn
	s.mu.Unlock()
}

// SetDown simulates an unreachable server. While down, every request's
// connection is closed without a response, so clients get a transport error
// (a *url.Error, e.g. EOF or connection reset). Streams running when the
// server goes down are cut the same way (the client's Chat then returns nil
// after a truncated stream, as with a crashed Ollama). SetDown(false) makes
// the server answer again.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if down == s.down {
		return
	}
	s.down = down
	if down {
		close(s.downCh)
	} else {
		s.downCh = make(chan struct{})
	}
}

func (s *Server) isDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

// Requests returns every /api/chat request received so far, in arrival
// order, including ones still running.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.records)
}

// Cancellations returns how many chat requests the client abandoned before
// their reply was complete.
func (s *Server) Cancellations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

// ActiveStreams returns how many /api/chat requests are being served now.
// A request is no longer active once its record is final.
func (s *Server) ActiveStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// WaitCancelled blocks until at least n cancellations were recorded, or ctx
// ends (then it returns ctx.Err()). When it returns nil, the cancelled
// requests' records are final and they no longer count in ActiveStreams.
func (s *Server) WaitCancelled(ctx context.Context, n int) error {
	return s.wait(ctx, func() bool { return s.cancelled >= n })
}

// WaitRequests blocks until at least n /api/chat requests have arrived, or
// ctx ends.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	return s.wait(ctx, func() bool { return len(s.records) >= n })
}

// WaitChunks blocks until the i-th recorded request (0-based) has sent at
// least n lines, or ctx ends.
func (s *Server) WaitChunks(ctx context.Context, i, n int) error {
	return s.wait(ctx, func() bool { return i < len(s.records) && s.records[i].ChunksSent >= n })
}

func (s *Server) wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// ---- models ----

// canonical is the lookup key of a model name: lower case, ":latest" when
// no tag.
func canonical(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "" {
		return ""
	}
	slash := strings.LastIndex(n, "/")
	if !strings.Contains(n[slash+1:], ":") {
		n += ":latest"
	}
	return n
}

// displayName is how /api/tags shows a model: with its tag.
func displayName(name string) string {
	slash := strings.LastIndex(name, "/")
	if !strings.Contains(name[slash+1:], ":") {
		return name + ":latest"
	}
	return name
}

// qualified is the fully qualified name Ollama puts in some errors.
func qualified(name string) string {
	n := displayName(name)
	switch strings.Count(n, "/") {
	case 0:
		return "registry.ollama.ai/library/" + n
	case 1:
		return "registry.ollama.ai/" + n
	}
	return n
}

func (s *Server) lookup(name string) (Model, bool) {
	c := canonical(name)
	for _, m := range s.models {
		if canonical(m.Name) == c {
			return m, true
		}
	}
	return Model{}, false
}

// modifiedAt gives models fixed, distinct modification times, the first
// model being the most recent (Ollama lists the most recent first).
func modifiedAt(i int) time.Time {
	return time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).Add(-time.Duration(i) * time.Hour)
}

func digest(name string) string {
	h := sha256.Sum256([]byte("fakeollama:" + canonical(name)))
	return hex.EncodeToString(h[:])
}

func size(name string) int64 {
	h := sha256.Sum256([]byte(canonical(name)))
	return 1_000_000 + int64(binary.BigEndian.Uint32(h[:4])%1_000_000)
}

func details(m Model) api.ModelDetails {
	return api.ModelDetails{
		Format:            "gguf",
		Family:            m.Family,
		Families:          []string{m.Family},
		ParameterSize:     "1M",
		QuantizationLevel: "Q4_0",
	}
}

func (s *Server) touch(m Model, ka *api.Duration, numCtx int) {
	exp := time.Now().Add(5 * time.Minute)
	if ka != nil {
		switch {
		case ka.Duration < 0:
			exp = time.Now().Add(math.MaxInt64 / 2)
		default:
			exp = time.Now().Add(ka.Duration)
		}
	}
	ctxLen := min(m.ContextLength, 4096)
	if numCtx > 0 {
		ctxLen = numCtx
	}
	s.mu.Lock()
	s.loaded[canonical(m.Name)] = loadedModel{m: m, expires: exp, ctxLen: ctxLen}
	s.mu.Unlock()
}

func (s *Server) unload(m Model) {
	s.mu.Lock()
	delete(s.loaded, canonical(m.Name))
	s.mu.Unlock()
}

// ---- plain handlers ----

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"fake: cannot encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// cutConnection closes the client connection without a response.
func cutConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // the server closes (or resets) the connection
	}
	_ = conn.Close()
}

// decodeBody decodes a JSON request body like Ollama (gin's ShouldBindJSON)
// does, writing the 400 itself on failure.
func decodeBody(w http.ResponseWriter, body []byte, v any) bool {
	if len(bytes.TrimSpace(body)) == 0 {
		writeError(w, http.StatusBadRequest, "missing request body")
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

func (s *Server) handleRoot(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, "Ollama is running")
	}
}

func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": Version})
}

func (s *Server) handleTags(w http.ResponseWriter, r *http.Request) {
	resp := api.ListResponse{Models: []api.ListModelResponse{}}
	for i, m := range s.models {
		n := displayName(m.Name)
		resp.Models = append(resp.Models, api.ListModelResponse{
			Name:       n,
			Model:      n,
			ModifiedAt: modifiedAt(i),
			Size:       size(m.Name),
			Digest:     digest(m.Name),
			Details:    details(m),
		})
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handlePs(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	resp := api.ProcessResponse{Models: []api.ProcessModelResponse{}}
	s.mu.Lock()
	for k, l := range s.loaded {
		if !l.expires.After(now) {
			delete(s.loaded, k)
			continue
		}
		n := displayName(l.m.Name)
		resp.Models = append(resp.Models, api.ProcessModelResponse{
			Name:          n,
			Model:         n,
			Size:          size(l.m.Name),
			Digest:        digest(l.m.Name),
			Details:       details(l.m),
			ExpiresAt:     l.expires,
			ContextLength: l.ctxLen,
		})
	}
	s.mu.Unlock()
	slices.SortStableFunc(resp.Models, func(a, b api.ProcessModelResponse) int {
		if c := b.ExpiresAt.Compare(a.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req api.ShowRequest
	if !decodeBody(w, body, &req) {
		return
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := s.lookup(req.Model)
	if !ok {
		// Ollama v0.17.4 ShowHandler wording.
		writeError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model))
		return
	}
	idx := slices.IndexFunc(s.models, func(x Model) bool { return canonical(x.Name) == canonical(m.Name) })
	info := map[string]any{
		"general.architecture":             m.Family,
		"general.parameter_count":          1_000_000,
		"general.file_type":                2,
		m.Family + ".context_length":       m.ContextLength,
		m.Family + ".block_count":          4,
		"general.quantization_version":     2,
		"tokenizer.ggml.model":             "llama",
		m.Family + ".attention.head_count": 4,
		"general.basename":                 strings.SplitN(displayName(m.Name), ":", 2)[0],
	}
	if m.EmbeddingLength > 0 {
		info[m.Family+".embedding_length"] = m.EmbeddingLength
	}
	if m.has(CapEmbedding) {
		info[m.Family+".pooling_type"] = 1
	}
	if m.has(CapVision) {
		info[m.Family+".vision.block_count"] = 2
	}
	caps := make([]model.Capability, 0, len(m.Capabilities))
	for _, c := range m.Capabilities {
		caps = append(caps, model.Capability(c))
	}
	short := displayName(m.Name)
	resp := api.ShowResponse{
		Modelfile: "# Modelfile generated by \"ollama show\"\n" +
			"# To build a new Modelfile based on this, replace FROM with:\n" +
			"# FROM " + short + "\n\n" +
			"FROM /fake/blobs/sha256-" + digest(m.Name) + "\n" +
			"TEMPLATE {{ .Prompt }}\n",
		Parameters:   fmt.Sprintf("%-30s %d", "num_ctx", min(m.ContextLength, 4096)),
		Template:     "{{ .Prompt }}",
		Details:      details(m),
		ModelInfo:    info,
		Capabilities: caps,
		ModifiedAt:   modifiedAt(idx),
	}
	writeJSON(w, http.StatusOK, resp)
}

func numCtxOf(opts map[string]any) int {
	switch v := opts["num_ctx"].(type) {
	case float64:
		return int(v)
	case int:
		return v
	case json.Number:
		n, _ := v.Int64()
		return int(n)
	}
	return 0
}

// ---- chat ----

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
