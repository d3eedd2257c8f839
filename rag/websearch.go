package rag

// Web search (issue 19): a search service the administrator sets up finds
// pages for a question; the pages are fetched through the SSRF-safe client
// (webfetch, the policy of knowledge bases from the web), read by extract in
// its jail, and their most relevant passages become numbered sources — the
// same db.Source a knowledge-base answer cites, with the page's URL.

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"weft/internal/usererr"
)

// WebSearchOff is why web search is unavailable until an administrator
// sets up a search service: the one sentence the composer, /tools and the
// run trace show.
const WebSearchOff = "Web search is off: no search service is set up. An administrator can set one on /admin."

// ErrWebSearchOff refuses a search while no service is set up.
var ErrWebSearchOff = usererr.New(WebSearchOff)

// Kinds of search service. SearXNG's JSON API is the self-hosted default;
// another service is another Searcher.
const SearchSearXNG = "searxng"

// Limits of a search's settings.
const (
	DefaultSearchResults = 8
	MaxSearchResults     = 20
	DefaultSearchPages   = 3
	MaxSearchPages       = 8
)

// WebSearchSettings is the administrator's search service (settings rows
// web_search_*; environment defaults WEFT_SEARCH_URL, WEFT_SEARCH_KIND).
type WebSearchSettings struct {
	Kind    string // SearchSearXNG
	URL     string // the service's base URL; "": web search is off
	Key     string // optional: sent as "Authorization: Bearer KEY"
	Results int    // results asked for (1–20)
	Pages   int    // result pages read (0–8; the rest are left out)
}

// Configured reports whether a search service is set.
func (w WebSearchSettings) Configured() bool { return w.URL != "" }

func (w WebSearchSettings) withDefaults() WebSearchSettings {
	if w.Kind == "" {
		w.Kind = SearchSearXNG
	}
	if w.Results <= 0 {
		w.Results = DefaultSearchResults
	}
	w.Results = min(w.Results, MaxSearchResults)
	w.Pages = min(max(w.Pages, 0), MaxSearchPages)
	return w
}

// Settings keys.
const (
	settingSearchKind    = "web_search_kind"
	settingSearchURL     = "web_search_url"
	settingSearchKey     = "web_search_key"
	settingSearchResults = "web_search_results"
	settingSearchPages   = "web_search_pages"
)

// Searcher is a search service: the results for query, best first, at most
// n. Failures a user can act on carry their message (usererr).
type Searcher interface {
	Search(ctx context.Context, query string, n int) ([]SearchResult, error)
}

// SearchResult is one result of a search service.
type SearchResult struct {
	URL     string
	Title   string
	Snippet string
	Engine  string
	Score   float64
}

// searcher returns the Searcher of the settings' kind.
func (s *Service) searcher(w WebSearchSettings) (Searcher, error) {
	switch w.Kind {
	case SearchSearXNG:
		return &SearXNG{BaseURL: w.URL, Key: w.Key, Timeout: s.cfg.SearchTimeout}, nil
	}
	return nil, usererr.New("The search service's kind " + strconv.Quote(w.Kind) + " is not known; an administrator can fix it on /admin.")
}

// webCache holds the search settings a little while, so that listing the
// agent's tools (which must not block) reads the database at most once
// every few seconds; the instance that saves them sees them at once.
type webCache struct {
	mu  sync.Mutex
	set WebSearchSettings
	at  time.Time
}

const webCacheFor = 5 * time.Second

// WebSearchSettings returns the search service's settings.
func (s *Service) WebSearchSettings(ctx context.Context) (WebSearchSettings, error) {
	s.web.mu.Lock()
	defer s.web.mu.Unlock()
	if !s.web.at.IsZero() && time.Since(s.web.at) < webCacheFor {
		return s.web.set, nil
	}
	def := s.cfg.Search
	get := func(key, d string) string {
		if err := ctx.Err(); err != nil {
			return d
		}
		v, err := s.store.Setting(ctx, key, d)
		if err != nil {
			slog.Warn("web search settings", "key", key, "err", err)
			return d
		}
		return v
	}
	w := WebSearchSettings{
		Kind: get(settingSearchKind, def.Kind),
		URL:  get(settingSearchURL, def.URL),
		Key:  get(settingSearchKey, def.Key),
	}
	w.Results, _ = strconv.Atoi(get(settingSearchResults, strconv.Itoa(def.Results)))
	w.Pages, _ = strconv.Atoi(get(settingSearchPages, strconv.Itoa(pagesOr(def.Pages))))
	if ctx.Err() != nil {
		return WebSearchSettings{}, ctx.Err()
	}
	w = w.withDefaults()
	s.web.set, s.web.at = w, time.Now()
	return w, nil
}

func pagesOr(n int) int {
	if n == 0 {
		return DefaultSearchPages
	}
	return n
}

// SaveWebSearch stores the search service's settings (administrators only:
// handlers check). The URL must be http or https; an empty URL turns web
// search off.
func (s *Service) SaveWebSearch(ctx context.Context, w WebSearchSettings) error {
	w.URL = strings.TrimRight(strings.TrimSpace(w.URL), "/")
	if w.URL != "" {
		if err := checkServiceURL(w.URL); err != nil {
			return err
		}
	}
	if w.Kind != SearchSearXNG {
		return usererr.New("Choose a kind of search service Weft knows (SearXNG).")
	}
	if w.Results < 1 || w.Results > MaxSearchResults {
		return usererr.New("Results per search must be between 1 and " + strconv.Itoa(MaxSearchResults) + ".")
	}
	if w.Pages < 0 || w.Pages > MaxSearchPages {
		return usererr.New("Pages read per search must be between 0 and " + strconv.Itoa(MaxSearchPages) + ".")
	}
	for key, v := range map[string]string{
		settingSearchKind: w.Kind, settingSearchURL: w.URL, settingSearchKey: w.Key,
		settingSearchResults: strconv.Itoa(w.Results), settingSearchPages: strconv.Itoa(w.Pages),
	} {
		if err := s.store.SetSetting(ctx, key, v); err != nil {
			return err
		}
	}
	s.web.mu.Lock()
	s.web.set, s.web.at = w.withDefaults(), time.Now()
	s.web.mu.Unlock()
	return nil
}

// WebSearchUnavailable says why web search cannot be used ("" when it
// can). It answers from the cached settings, reading them again (briefly)
// when they are older than a few seconds.
func (s *Service) WebSearchUnavailable() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w, err := s.WebSearchSettings(ctx)
	if err != nil || !w.Configured() {
		return WebSearchOff
	}
	return ""
}

// errSearchFailed is wrapped by every failure of the search service.
var errSearchFailed = errors.New("web search failed")
