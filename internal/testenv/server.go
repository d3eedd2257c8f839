package testenv

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/handlers"
)

// Server starts Weft's real handler on a local port over store.
func Server(t testing.TB, store *db.DB, cfg handlers.Config) *httptest.Server {
	t.Helper()
	ts, _ := ServerWithHandler(t, store, cfg)
	return ts
}

// ServerWithHandler is Server, also returning the handler (for its route list).
func ServerWithHandler(t testing.TB, store *db.DB, cfg handlers.Config) (*httptest.Server, *handlers.Server) {
	t.Helper()
	if cfg.LoginLimit.Window == 0 {
		cfg.LoginLimit = handlers.LoginLimit{PerIP: 1000, PerAccount: 1000, Window: time.Minute}
	}
	srv := handlers.New(cfg, store, chat.New(store))
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	return ts, srv
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
