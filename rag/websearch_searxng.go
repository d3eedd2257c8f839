package rag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"weft/internal/usererr"
)

// SearXNG is a SearXNG instance's JSON API: GET {base}/search?q=…&format=json
// (the instance must list json under search.formats in its settings.yml).
// The instance is the administrator's choice, so it may be on a private
// address: it is reached with a plain client, not webfetch's policy — the
// pages its results name are what webfetch guards.
type SearXNG struct {
	BaseURL string
	Key     string        // optional Bearer token (for a proxy in front of it)
	Timeout time.Duration // the whole request (default 10 s)
	Client  *http.Client  // nil: a client without redirects
}

// maxSearchBody caps the JSON read from the service; maxSearchDecoded caps
// the results kept from it.
const (
	maxSearchBody    = 2 << 20
	maxSearchDecoded = 100
)

type searxngReply struct {
	Results []struct {
		URL     string  `json:"url"`
		Title   string  `json:"title"`
		Content string  `json:"content"`
		Engine  string  `json:"engine"`
		Score   float64 `json:"score"`
	} `json:"results"`
}

// Search asks the instance for query; at most n results are returned, in
// its order.
func (x *SearXNG) Search(ctx context.Context, query string, n int) ([]SearchResult, error) {
	timeout := x.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errSearchTimeout)
	defer cancel()
	u := x.BaseURL + "/search?" + url.Values{"q": {query}, "format": {"json"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, usererr.Wrap(fmt.Errorf("%w: %w", errSearchFailed, err), "the search service's address is not valid")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "Weft web search")
	if x.Key != "" {
		req.Header.Set("Authorization", "Bearer "+x.Key)
	}
	c := x.Client
	if c == nil {
		c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := c.Do(req)
	if err != nil {
		switch {
		case context.Cause(ctx) == errSearchTimeout:
			return nil, usererr.Wrap(fmt.Errorf("%w: %w", errSearchFailed, err), "the search service did not answer within "+strconv.Itoa(int(timeout.Seconds()))+" s")
		case ctx.Err() != nil:
			return nil, fmt.Errorf("web search: %w", context.Cause(ctx))
		}
		return nil, usererr.Wrap(fmt.Errorf("%w: %w", errSearchFailed, err), "the search service could not be reached")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg := "the search service answered " + resp.Status
		if resp.StatusCode == http.StatusForbidden {
			msg += " (is json listed under search.formats in SearXNG's settings.yml?)"
		}
		return nil, usererr.Wrap(fmt.Errorf("%w: status %d", errSearchFailed, resp.StatusCode), msg)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSearchBody+1))
	if err != nil {
		if context.Cause(ctx) == errSearchTimeout {
			return nil, usererr.Wrap(fmt.Errorf("%w: %w", errSearchFailed, err), "the search service did not answer within "+strconv.Itoa(int(timeout.Seconds()))+" s")
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("web search: %w", context.Cause(ctx))
		}
		return nil, usererr.Wrap(fmt.Errorf("%w: %w", errSearchFailed, err), "the search service's answer was cut off")
	}
	if len(body) > maxSearchBody {
		return nil, usererr.Wrap(errSearchFailed, "the search service's answer is larger than 2 MB")
	}
	var rep searxngReply
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, usererr.Wrap(fmt.Errorf("%w: %w", errSearchFailed, err), "the search service's answer is not SearXNG's JSON (is json listed under search.formats in its settings.yml?)")
	}
	out := make([]SearchResult, 0, min(len(rep.Results), n))
	for _, r := range rep.Results[:min(len(rep.Results), maxSearchDecoded)] {
		out = append(out, SearchResult{URL: r.URL, Title: r.Title, Snippet: r.Content, Engine: r.Engine, Score: r.Score})
	}
	return out, nil
}

var errSearchTimeout = errors.New("search service timeout")

// checkServiceURL checks the administrator's service address.
func checkServiceURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return usererr.New("The search service's URL must start with http:// or https:// and name a host (no user name).")
	}
	// "/search?q=…" is added to it: a URL copied from a search in the
	// browser would make every search fail.
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return usererr.New("The search service's URL is its base address, without ?… or #… (for example http://searxng:8080).")
	}
	return nil
}
