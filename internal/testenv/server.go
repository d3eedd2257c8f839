package testenv

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"weft/agent"
	"weft/chat"
	"weft/db"
	"weft/handlers"
	"weft/importer"
	"weft/internal/app"
	"weft/internal/fakeollama"
	"weft/internal/jobs"
	"weft/mcp"
	"weft/media"
	"weft/rag"
)

// Options configure the app under test.
type Options struct {
	HTTP         handlers.Config
	Chat         chat.Config
	Fake         *fakeollama.Server // nil: a fresh fake with its default models
	DefaultModel string             // WEFT_DEFAULT_MODEL; "" means "tiny"
	// MoreFakes are more model servers next to Fake (OLLAMA_HOST listing
	// several), tuned by Servers.
	MoreFakes []*fakeollama.Server
	Servers   chat.ServersConfig
	RAG       rag.Config
	Import    importer.Limits // imports of other apps' exports
	Agent     agent.Config    // DataDir "" : a temporary directory
	Media     media.Config    // DataDir "" : a temporary directory
	// Fetch replaces the agent's web fetch (nil: the real, SSRF-safe one).
	Fetch func(ctx context.Context, url string) (agent.FetchResult, error)
	MCP   mcp.Config // the MCP servers (none by default)
	// Listener is where the test server listens (nil: a fresh local port),
	// for a test that must know Weft's URL before it starts (a public URL).
	Listener net.Listener
}

// App is a running Weft over a test database and a fake Ollama: the
// services and handler app.New built, its test server and its fake.
type App struct {
	*app.App
	TS   *httptest.Server
	Fake *fakeollama.Server
}

// Start runs Weft, built as the weft command builds it (app.New), over
// store and a fake Ollama on a local port; it stops when the test ends.
func Start(t testing.TB, store *db.DB, o Options) *App {
	t.Helper()
	if o.HTTP.LoginLimit.Window == 0 {
		o.HTTP.LoginLimit = handlers.LoginLimit{PerIP: 1000, PerAccount: 1000, Window: time.Minute}
	}
	if o.HTTP.EmbedModel == "" {
		o.HTTP.EmbedModel = "embedder"
	}
	if o.Fake == nil {
		o.Fake = fakeollama.New(t)
	}
	if o.DefaultModel == "" {
		o.DefaultModel = "tiny"
	}
	if o.Chat.Instance == "" {
		o.Chat.Instance = t.Name()
	}
	if o.RAG.RetryBackoff == 0 {
		o.RAG.RetryBackoff = 20 * time.Millisecond
	}
	if o.Media.DataDir == "" {
		o.Media.DataDir = t.TempDir()
	}
	if o.Agent.DataDir == "" {
		o.Agent.DataDir = t.TempDir()
	}
	u, err := url.Parse(o.Fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	servers := []*url.URL{u}
	for _, f := range o.MoreFakes {
		m, err := url.Parse(f.URL)
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, m)
	}
	a, err := app.New(store, app.Config{Ollama: servers, Servers: o.Servers, DefaultModel: o.DefaultModel,
		Chat: o.Chat, RAG: o.RAG, Import: o.Import, Media: o.Media, Agent: o.Agent, HTTP: o.HTTP, Fetch: o.Fetch, MCP: o.MCP})
	if err != nil {
		t.Fatalf("build the app: %v", err)
	}
	if err := a.Start(context.Background()); err != nil {
		a.Close()
		t.Fatalf("start the app: %v", err)
	}
	ts := httptest.NewUnstartedServer(a.Handler)
	if o.Listener != nil {
		ts.Listener.Close()
		ts.Listener = o.Listener
	}
	ts.Start()
	t.Cleanup(func() {
		// Streams end first: the test server's Close waits for every
		// connection, and an event stream would hold it for a whole run.
		a.Handler.StartShutdown()
		ts.Close()
		a.Shutdown(context.Background(), 5*time.Second)
		a.Close()
	})
	return &App{App: a, TS: ts, Fake: o.Fake}
}

// StartJobs starts a job queue a test built (its parts registered), and
// stops it when the test ends.
func StartJobs(t testing.TB, q *jobs.Queue) {
	t.Helper()
	if err := q.Start(context.Background()); err != nil {
		t.Fatalf("start the job queue: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = q.Stop(ctx)
	})
}

// Server starts Weft over store with a fresh fake Ollama.
func Server(t testing.TB, store *db.DB, cfg handlers.Config) *httptest.Server {
	t.Helper()
	return Start(t, store, Options{HTTP: cfg}).TS
}

// ServerWithHandler is Server, also returning the handler (for its route list).
func ServerWithHandler(t testing.TB, store *db.DB, cfg handlers.Config) (*httptest.Server, *handlers.Server) {
	t.Helper()
	a := Start(t, store, Options{HTTP: cfg})
	return a.TS, a.Handler
}

// Client is a cookie-keeping HTTP client for one person. It does not follow
// redirects, so tests see exactly what the server answered.
type Client struct {
	t    testing.TB
	Base string
	HTTP *http.Client
}

// NewClient returns a client with an empty cookie jar.
func NewClient(t testing.TB, base string) *Client {
	jar, _ := cookiejar.New(nil)
	return &Client{t: t, Base: base, HTTP: &http.Client{
		Jar:           jar,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Response is a finished response with its body read.
type Response struct {
	*http.Response
	Body string
}

// Get fetches path.
func (c *Client) Get(path string) Response {
	c.t.Helper()
	return c.Do(http.MethodGet, path, nil)
}

// Post submits form values to path.
func (c *Client) Post(path string, form url.Values) Response {
	c.t.Helper()
	return c.Do(http.MethodPost, path, form)
}

// Do sends a request with an optional form body.
func (c *Client) Do(method, path string, form url.Values) Response {
	c.t.Helper()
	return c.DoHeader(method, path, form, nil)
}

// Send sends a prepared request (its URL must be absolute).
func (c *Client) Send(req *http.Request) Response {
	c.t.Helper()
	resp, err := c.HTTP.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	return Response{Response: resp, Body: string(b)}
}

// HTMX posts form as htmx does (HX-Request: true).
func (c *Client) HTMX(path string, form url.Values) Response {
	c.t.Helper()
	return c.DoHeader(http.MethodPost, path, form, http.Header{"Hx-Request": {"true"}})
}

// DoHeader sends a request with extra headers.
func (c *Client) DoHeader(method, path string, form url.Values, h http.Header) Response {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.Base+path, body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return Response{Response: resp, Body: string(b)}
}

// Register creates an account and leaves the client signed in.
func (c *Client) Register(email, password string) {
	c.t.Helper()
	r := c.Post("/register", url.Values{"email": {email}, "password": {password}})
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		c.t.Fatalf("register %s: status %d, location %q, body %.300s", email, r.StatusCode, r.Header.Get("Location"), r.Body)
	}
}

// Login signs an existing account in.
func (c *Client) Login(email, password string) {
	c.t.Helper()
	r := c.Post("/login", url.Values{"email": {email}, "password": {password}})
	if r.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("login %s: status %d, body %.300s", email, r.StatusCode, r.Body)
	}
}

// SessionCookie returns the current session cookie's value ("" if none).
func (c *Client) SessionCookie() string {
	u, _ := url.Parse(c.Base)
	for _, ck := range c.HTTP.Jar.Cookies(u) {
		if ck.Name == "weft_session" {
			return ck.Value
		}
	}
	return ""
}
