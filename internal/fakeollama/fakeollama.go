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
// driven by directives written in the last user message (see DefaultReply;
// a request for structured output gets JSON in its format), or by a script
// given with WithScript or SetScript.
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
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

// Version is what GET /api/version reports.
const Version = "0.17.4"

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

// WithLineHook has fn called with every NDJSON line a streamed /api/chat
// answer writes, just before it is written (fn may change its bytes, not
// its length), and the time the request arrived. For tools that stamp
// times into the stream as it is emitted (bench/load) without a proxy in
// front of the fake.
func WithLineHook(fn func(line []byte, received time.Time)) Option {
	return func(s *Server) { s.lineHook = fn }
}

// Server is a running fake Ollama server.
type Server struct {
	// URL is the base URL of the server, e.g. "http://127.0.0.1:34567".
	URL string

	ts        *httptest.Server
	catMu     sync.RWMutex // guards models (pulls add, deletes remove)
	models    []Model
	registry  []PullModel // what /api/pull can fetch
	pullDelay time.Duration
	delay     time.Duration
	lineHook  func(line []byte, received time.Time)
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

	pulls   []PullRecord
	holdAt  int           // pulls stop after this many lines (0: no hold)
	release chan struct{} // closed by ReleasePulls
	deleted []string
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
		withDefaults(&s.models[i])
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
	mux.HandleFunc("POST /api/pull", s.handlePull)
	mux.HandleFunc("DELETE /api/delete", s.handleDelete)
	mux.HandleFunc("POST /api/generate", s.handleGenerate)

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

// withDefaults gives a model its defaults.
func withDefaults(m *Model) {
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
