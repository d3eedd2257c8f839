package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Fetcher defaults.
const (
	defaultFetchBytes     = 2 << 20
	defaultFetchText      = 32 << 10
	defaultFetchTimeout   = 15 * time.Second
	defaultFetchRedirects = 5
)

// Fetcher fetches public web pages as text for the fetch_url tool. The model
// chooses the URL, so a fetch must never reach the machine's own network:
// every address is checked when it is dialled (after DNS, on every
// redirect), which a rebinding DNS answer cannot get around. Zero fields
// take the defaults.
type Fetcher struct {
	MaxBytes     int64         // body bytes read (default 2 MiB); a longer page is cut and marked Truncated
	MaxText      int           // bytes of text returned (default 32 KiB); more is cut and marked Truncated
	Timeout      time.Duration // the whole fetch, redirects and body included (default 15 s)
	MaxRedirects int           // redirects followed (default 5)

	// allow decides whether an address may be dialled (nil: checkAddr).
	// Tests use it to let exactly one local test server through.
	allow func(netip.AddrPort) error
}

// NewFetcher returns a Fetcher with the default limits.
func NewFetcher() *Fetcher {
	return &Fetcher{
		MaxBytes:     defaultFetchBytes,
		MaxText:      defaultFetchText,
		Timeout:      defaultFetchTimeout,
		MaxRedirects: defaultFetchRedirects,
	}
}

func (f *Fetcher) withDefaults() Fetcher {
	c := *f
	if c.MaxBytes <= 0 {
		c.MaxBytes = defaultFetchBytes
	}
	if c.MaxText <= 0 {
		c.MaxText = defaultFetchText
	}
	if c.Timeout <= 0 {
		c.Timeout = defaultFetchTimeout
	}
	if c.MaxRedirects <= 0 {
		c.MaxRedirects = defaultFetchRedirects
	}
	if c.allow == nil {
		c.allow = checkAddr
	}
	return c
}

// errFetchTimeout is the cause of a fetch's own deadline, told apart from
// the caller's.
var errFetchTimeout = errors.New("web fetch timed out")

// blockedError is a dial refused by the address policy.
type blockedError struct{ addr netip.AddrPort }

func (e *blockedError) Error() string { return "blocked address " + e.addr.String() }

// Fetch fetches rawURL and returns it as text. Every failure the model can
// act on (a refused URL or address, a timeout, an HTTP error, a page that is
// not text) is a *ToolError in words fit for a user; a cancelled ctx is
// returned as is.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (FetchResult, error) {
	cfg := f.withDefaults()
	u, err := fetchURL(rawURL)
	if err != nil {
		return FetchResult{}, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, errFetchTimeout)
	defer cancel()

	host := u.Hostname() // of the hop being fetched, for messages
	tr := cfg.transport()
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > cfg.MaxRedirects {
				return Errorf("web fetch stopped: the page redirects more than %d times", cfg.MaxRedirects)
			}
			if err := checkURL(req.URL, "web fetch refused a redirect"); err != nil {
				return err
			}
			host = req.URL.Hostname()
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return FetchResult{}, Errorf("web fetch cannot use this URL")
	}
	req.Header.Set("User-Agent", "Mozilla/5.0 (compatible; Weft web fetch)")
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.1")

	resp, err := client.Do(req)
	if err != nil {
		return FetchResult{}, fetchError(ctx, cfg, host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		status := fmt.Sprint(resp.StatusCode)
		if text := http.StatusText(resp.StatusCode); text != "" {
			status += " " + text
		}
		return FetchResult{}, Errorf("the server answered %s", status)
	}
	header := resp.Header.Get("Content-Type")
	mediaType := ""
	if header != "" {
		mediaType, _, _ = mime.ParseMediaType(header)
		mediaType = strings.ToLower(mediaType)
		if _, ok := textKind(mediaType); !ok {
			return FetchResult{}, notText(mediaType, header)
		}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, cfg.MaxBytes+1))
	if err != nil {
		return FetchResult{}, fetchError(ctx, cfg, host, err)
	}
	res := FetchResult{URL: resp.Request.URL.String(), Truncated: int64(len(data)) > cfg.MaxBytes}
	data = data[:min(int64(len(data)), cfg.MaxBytes)]
	if mediaType == "" { // no Content-Type: judge by the bytes
		header = http.DetectContentType(data)
		mediaType, _, _ = mime.ParseMediaType(header)
		if _, ok := textKind(mediaType); !ok {
			return FetchResult{}, notText(mediaType, header)
		}
	}
	res.ContentType = mediaType
	isHTML, _ := textKind(mediaType)
	text := decode(data, header)
	if isHTML {
		if text, err = htmlText(ctx, text); err != nil {
			return FetchResult{}, err
		}
	} else {
		text = plainText(text)
	}
	if len(text) > cfg.MaxText {
		text, res.Truncated = cutText(text, cfg.MaxText), true
	}
	res.Text = text
	return res, nil
}

// transport dials only addresses the policy allows and never goes through a
// proxy from the environment: the check must see the real destination.
func (f Fetcher) transport() *http.Transport {
	d := &net.Dialer{
		Timeout: f.Timeout,
		ControlContext: func(_ context.Context, network, address string, _ syscall.RawConn) error {
			if network != "tcp4" && network != "tcp6" {
				return fmt.Errorf("network %s: %w", network, &blockedError{})
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("address %q: %w", address, &blockedError{})
			}
			if err := f.allow(ap); err != nil {
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

// fetchURL parses the URL the model asked for.
func fetchURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.Scheme == "" {
		return nil, Errorf("web fetch needs a full URL starting with http:// or https://")
	}
	if err := checkURL(u, "web fetch refused this URL"); err != nil {
		return nil, err
	}
	return u, nil
}

// checkURL allows http and https URLs with a host and without a user name
// or password, whatever the port.
func checkURL(u *url.URL, refused string) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return Errorf("%s: only http and https pages can be fetched, not %s", refused, u.Scheme)
	case u.User != nil:
		return Errorf("%s: it contains a user name or password", refused)
	case u.Hostname() == "":
		return Errorf("%s: it has no host name", refused)
	}
	return nil
}

// fetchError turns a failed request or body read into what the model is
// told.
func fetchError(ctx context.Context, cfg Fetcher, host string, err error) error {
	var te *ToolError
	var be *blockedError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &te):
		return te
	case errors.As(err, &be):
		return Errorf("web fetch blocked: %s resolves to a private or local address", host)
	case errors.Is(context.Cause(ctx), errFetchTimeout):
		return Errorf("web fetch timed out after %s", cfg.Timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("web fetch: %w", context.Cause(ctx))
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return Errorf("web fetch failed: %s was not found", host)
	}
	return Errorf("web fetch failed: %s could not be reached", host)
}

// WebTools returns the web fetch tool. It reaches the internet, so it is
// disabled unless a workspace turns it on.
func WebTools() []Tool {
	return []Tool{{
		Name:        "fetch_url",
		Description: "Fetch a public web page (http or https) and read it as text. Pages on private or local networks cannot be fetched.",
		Class:       ClassNetwork,
		Params: []Param{
			{Name: "url", Type: "string", Description: "The full URL, starting with http:// or https://.", Required: true},
		},
		Run: runFetchURL,
	}}
}

func runFetchURL(ctx context.Context, env *Env, args Args) (Result, error) {
	rawURL, err := args.String("url", true)
	if err != nil {
		return Result{}, err
	}
	if env == nil || env.Fetch == nil {
		return Result{}, Errorf("web fetch is not available")
	}
	page, err := env.Fetch(ctx, rawURL)
	if err != nil {
		return Result{}, err
	}
	out := "URL: " + page.URL + "\n\n" + page.Text
	if page.Truncated {
		out += "\n\n[the page was cut here: it is longer than what web fetch returns]"
	}
	return Result{Output: out, Sources: []Source{{Kind: "web", Label: page.URL}}}, nil
}
