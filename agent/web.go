package agent

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"net/netip"
	"time"

	"weft/internal/webfetch"
)

// Fetcher defaults.
const (
	defaultFetchBytes     = webfetch.DefaultMaxBytes
	defaultFetchText      = 32 << 10
	defaultFetchTimeout   = webfetch.DefaultTimeout
	defaultFetchRedirects = webfetch.DefaultMaxRedirects
)

// Fetcher fetches public web pages as text for the fetch_url tool, through
// webfetch: the model chooses the URL, so every address is checked when it
// is dialled (after DNS, on every redirect). Zero fields take the defaults.
type Fetcher struct {
	MaxBytes     int64         // body bytes read (default 2 MiB); a longer page is cut and marked Truncated
	MaxText      int           // bytes of text returned (default 32 KiB); more is cut and marked Truncated
	Timeout      time.Duration // the whole fetch, redirects and body included (default 15 s)
	MaxRedirects int           // redirects followed (default 5)

	// allowed are local addresses tests let through (webfetch's
	// AllowForTest); nil in every running server.
	allowed []netip.AddrPort
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
	return c
}

// client is the webfetch client with the Fetcher's limits.
func (f Fetcher) client() webfetch.Client {
	c := webfetch.Client{MaxBytes: f.MaxBytes, Timeout: f.Timeout, MaxRedirects: f.MaxRedirects}
	if len(f.allowed) > 0 {
		c = c.AllowForTest(f.allowed...)
	}
	return c
}

// Fetch fetches rawURL and returns it as text. Every failure the model can
// act on (a refused URL or address, a timeout, an HTTP error, a page that is
// not text) is a *ToolError in words fit for a user; a cancelled ctx is
// returned as is.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (FetchResult, error) {
	cfg := f.withDefaults()
	resp, err := cfg.client().Get(ctx, webfetch.Request{URL: rawURL})
	if err != nil {
		var we *webfetch.Error
		if errors.As(err, &we) {
			return FetchResult{}, Errorf("%s", we.Msg)
		}
		return FetchResult{}, err
	}
	header, mediaType := resp.ContentType, resp.MediaType
	if header != "" {
		if _, ok := textKind(mediaType); !ok {
			return FetchResult{}, notText(mediaType, header)
		}
	}
	data := resp.Body
	res := FetchResult{URL: resp.URL, Truncated: resp.Truncated}
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
