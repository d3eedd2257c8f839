// Package webfetch is Weft's one way to fetch from the web on someone's
// behalf — the agent's fetch_url tool and knowledge bases filled from the
// web both use it: an HTTP client that reaches the public internet only.
//
// Whoever names the URL (a model, a user, a sitemap) must never reach the
// machine's own network: every address is checked when it is dialled (after
// DNS, on every redirect), which a rebinding DNS answer cannot get around;
// no proxy from the environment is used, since the check would then see the
// proxy instead of the destination; bodies and time are capped. Failures a
// user can act on are *Error values worded for them (usererr.Messager).
//
// It must never decide what a fetched body means — callers read it (a
// page's <title>, Title, is all it reads).
package webfetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft/internal/usererr"
)

// Client defaults.
const (
	DefaultMaxBytes     = 2 << 20
	DefaultTimeout      = 15 * time.Second
	DefaultMaxRedirects = 5
)

// Client fetches public web pages. Zero fields take the defaults; a Client
// is a value, copied freely (each Get has its own connections).
type Client struct {
	MaxBytes     int64         // body bytes read (default 2 MiB)
	Timeout      time.Duration // the whole fetch, redirects and body included (default 15 s)
	MaxRedirects int           // redirects followed (default 5)

	// allow decides whether an address may be dialled (nil: checkAddr).
	allow func(netip.AddrPort) error
}

// Request is one GET.
type Request struct {
	URL    string
	Accept string // the Accept header (default: pages and text first)
	// IfNoneMatch and IfModifiedSince make the request conditional (a
	// re-fetch): an unchanged page answers 304, Response.NotModified.
	IfNoneMatch, IfModifiedSince string
	// Whole refuses a body over MaxBytes (an *Error) instead of returning
	// its first MaxBytes marked Truncated.
	Whole bool
}

// Response is a page fetched (a 2xx answer, or 304 to a conditional
// request).
type Response struct {
	URL         string // after redirects
	NotModified bool   // 304: Body is empty
	ContentType string // the header as sent
	MediaType   string // its media type, lower case ("" when none was sent)
	ETag        string
	// LastModified is the header as sent, to send back in If-Modified-Since.
	LastModified string
	Body         []byte
	Truncated    bool // the body was longer than MaxBytes; Body holds its start
}

// Error is a fetch that failed in a way the user (or model) can act on: a
// refused URL or address, a timeout, an HTTP error status, a body too
// large. Msg is worded for them and names no internal detail.
type Error struct {
	Msg    string
	Status int // the HTTP status, when the server answered with an error
}

func (e *Error) Error() string       { return e.Msg }
func (e *Error) UserMessage() string { return e.Msg }

func errorf(format string, a ...any) error { return &Error{Msg: fmt.Sprintf(format, a...)} }

// errTimeout is the cause of a fetch's own deadline, told apart from the
// caller's.
var errTimeout = errors.New("web fetch timed out")

// blockedError is a dial refused by the address policy.
type blockedError struct{ addr netip.AddrPort }

func (e *blockedError) Error() string { return "blocked address " + e.addr.String() }

func (c Client) withDefaults() Client {
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxRedirects <= 0 {
		c.MaxRedirects = DefaultMaxRedirects
	}
	if c.allow == nil {
		c.allow = checkAddr
	}
	return c
}

// AllowForTest returns a copy of c that may also dial exactly addrs (a
// test's local servers on 127.0.0.1); every other address still meets the
// public-internet policy. It panics outside a test binary, so no setting
// of a running server can open the machine's own network.
func (c Client) AllowForTest(addrs ...netip.AddrPort) Client {
	if !testing.Testing() {
		panic("webfetch: AllowForTest outside a test")
	}
	next := c.allow
	if next == nil {
		next = checkAddr
	}
	c.allow = func(ap netip.AddrPort) error {
		if slices.Contains(addrs, ap) {
			return nil
		}
		return next(ap)
	}
	return c
}

// Get fetches req.URL. Every failure the caller can act on is an *Error; a
// cancelled ctx is returned as is (wrapped).
func (c Client) Get(ctx context.Context, req Request) (*Response, error) {
	cfg := c.withDefaults()
	u, err := CheckURL(req.URL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, errTimeout)
	defer cancel()

	host := u.Hostname() // of the hop being fetched, for messages
	tr := cfg.transport()
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) > cfg.MaxRedirects {
				return errorf("web fetch stopped: the page redirects more than %d times", cfg.MaxRedirects)
			}
			if err := checkURL(r.URL, "web fetch refused a redirect"); err != nil {
				return err
			}
			host = r.URL.Hostname()
			return nil
		},
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, errorf("web fetch cannot use this URL")
	}
	hr.Header.Set("User-Agent", "Mozilla/5.0 (compatible; Weft web fetch)")
	hr.Header.Set("Accept", cmp.Or(req.Accept, "text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.1"))
	if req.IfNoneMatch != "" {
		hr.Header.Set("If-None-Match", req.IfNoneMatch)
	}
	if req.IfModifiedSince != "" {
		hr.Header.Set("If-Modified-Since", req.IfModifiedSince)
	}
	resp, err := client.Do(hr)
	if err != nil {
		return nil, cfg.failure(ctx, host, err)
	}
	defer resp.Body.Close()
	return cfg.read(ctx, req, host, resp)
}

// read turns an answer into a Response, or the *Error it is.
func (c Client) read(ctx context.Context, req Request, host string, resp *http.Response) (*Response, error) {
	out := &Response{URL: resp.Request.URL.String(), ContentType: resp.Header.Get("Content-Type"),
		ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified")}
	if out.ContentType != "" {
		mt, _, _ := mime.ParseMediaType(out.ContentType)
		out.MediaType = strings.ToLower(mt)
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && (req.IfNoneMatch != "" || req.IfModifiedSince != ""):
		out.NotModified = true
		return out, nil
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		status := fmt.Sprint(resp.StatusCode)
		if text := http.StatusText(resp.StatusCode); text != "" {
			status += " " + text
		}
		return nil, &Error{Msg: "the server answered " + status, Status: resp.StatusCode}
	case req.Whole && resp.ContentLength > c.MaxBytes:
		return nil, c.tooLarge()
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.MaxBytes+1))
	if err != nil {
		return nil, c.failure(ctx, host, err)
	}
	if int64(len(data)) > c.MaxBytes {
		if req.Whole {
			return nil, c.tooLarge()
		}
		data, out.Truncated = data[:c.MaxBytes], true
	}
	out.Body = data
	return out, nil
}

func (c Client) tooLarge() error {
	return errorf("the page is larger than the limit of %s", usererr.Size(c.MaxBytes))
}

// transport dials only addresses the policy allows and never goes through a
// proxy from the environment: the check must see the real destination.
func (c Client) transport() *http.Transport {
	d := &net.Dialer{
		Timeout: c.Timeout,
		ControlContext: func(_ context.Context, network, address string, _ syscall.RawConn) error {
			if network != "tcp4" && network != "tcp6" {
				return fmt.Errorf("network %s: %w", network, &blockedError{})
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("address %q: %w", address, &blockedError{})
			}
			if err := c.allow(ap); err != nil {
				return &blockedError{ap}
			}
			return nil
		},
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// CheckURL parses a URL someone asked for and checks it can be fetched:
// http or https, with a host, without a user name or password (the port is
// free). The refusal is an *Error.
func CheckURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.Scheme == "" {
		return nil, errorf("web fetch needs a full URL starting with http:// or https://")
	}
	if err := checkURL(u, "web fetch refused this URL"); err != nil {
		return nil, err
	}
	return u, nil
}

func checkURL(u *url.URL, refused string) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errorf("%s: only http and https pages can be fetched, not %s", refused, u.Scheme)
	case u.User != nil:
		return errorf("%s: it contains a user name or password", refused)
	case u.Hostname() == "":
		return errorf("%s: it has no host name", refused)
	}
	return nil
}

// failure turns a failed request or body read into what the user is told.
func (c Client) failure(ctx context.Context, host string, err error) error {
	var fe *Error
	var be *blockedError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.As(err, &be):
		return errorf("web fetch blocked: %s resolves to a private or local address", host)
	case errors.Is(context.Cause(ctx), errTimeout):
		return errorf("web fetch timed out after %s", c.Timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("web fetch: %w", context.Cause(ctx))
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return errorf("web fetch failed: %s was not found", host)
	}
	return errorf("web fetch failed: %s could not be reached", host)
}
