package rag

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"weft/db"
	"weft/internal/usererr"
	"weft/internal/webfetch"
)

// Knowledge bases filled from the web: one page, or the pages a site's
// sitemap lists (web_sitemap.go). Each page is a document whose bytes a
// job fetches through webfetch (the agent's SSRF-safe client) and then
// ingests as an upload (web_fetch.go); a re-fetch asks the server whether
// the page changed and reads it again only when it did, the old version
// answering until the new one replaces it (web_update.go).

// Bounds of the "Add from the web" form.
const (
	DefaultWebPages = 200
	MaxWebPages     = 1000
	DefaultWebDepth = 3 // sitemap levels: an index, its sitemaps, theirs
	MaxWebDepth     = 5
	maxWebURL       = 2000
	// webTimeout bounds one page's fetch, redirects and body included.
	webTimeout = time.Minute
)

// WebInput is the "Add from the web" form as sent: text, "" for defaults.
type WebInput struct {
	URL      string
	Sitemap  bool // the pages of the site's sitemap, not the page itself
	MaxPages string
	MaxDepth string
}

// AddFromWeb adds the page at in.URL to kb, or starts reading the site's
// sitemap into it; the jobs fetch in the background, bounded by the
// owner's storage limit of maxUserBytes (0: none). It returns what to tell
// the user; a refusal is a usererr error.
func (s *Service) AddFromWeb(ctx context.Context, user int64, kb db.KnowledgeBase, in WebInput, maxUserBytes int64) (string, error) {
	if s.cfg.WebOff {
		return "", ErrWebOff
	}
	u, err := webURL(in.URL)
	if err != nil {
		return "", err
	}
	if !in.Sitemap {
		added, _, err := s.store.AddWebPages(ctx, user, kb.ID, []db.NewWebPage{{URL: u.String(), Name: pageName(u)}},
			s.enqueueWebFetch(ctx, maxUserBytes))
		if err != nil {
			return "", err
		}
		if len(added) == 0 {
			return "", usererr.New(u.String() + " is already in this knowledge base; re-fetch it from its row to update it.")
		}
		return "Fetching " + u.String() + "; it is read and indexed next.", nil
	}
	pages, err := bounded("the number of pages", in.MaxPages, DefaultWebPages, 1, MaxWebPages)
	if err != nil {
		return "", err
	}
	depth, err := bounded("the sitemap depth", in.MaxDepth, DefaultWebDepth, 1, MaxWebDepth)
	if err != nil {
		return "", err
	}
	_, err = s.store.StartWebCrawl(ctx, user, kb.ID, u.String(), pages, depth, func(tx pgx.Tx, c db.WebCrawl) error {
		return s.jobs.InsertTx(ctx, tx, WebCrawlArgs{CrawlID: c.ID, MaxUserBytes: maxUserBytes}, &river.InsertOpts{MaxAttempts: webAttempts})
	})
	if errors.Is(err, db.ErrConflict) {
		return "", usererr.Wrap(err, "A sitemap is being read into this knowledge base already; wait until it is done.")
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Reading the sitemap of %s (at most %d pages); its pages appear here as they are found.", u.Host, pages), nil
}

// webURL is the URL a user typed, checked as webfetch checks it, without
// its fragment.
func webURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, usererr.New("Enter the address of a web page (https://…).")
	}
	if len(raw) > maxWebURL {
		return nil, usererr.New(fmt.Sprintf("The address is longer than %d characters.", maxWebURL))
	}
	u, err := webfetch.CheckURL(raw)
	if err != nil {
		return nil, usererr.Wrap(err, usererr.Capitalize(usererr.Or(err, "This address cannot be fetched"))+".")
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// bounded reads a whole number from a form field, def when empty.
func bounded(what, text string, def, lo, hi int) (int, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return def, nil
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < lo || n > hi {
		return 0, usererr.New(fmt.Sprintf("%s must be a whole number from %d to %d.", usererr.Capitalize(what), lo, hi))
	}
	return n, nil
}

// ErrWebOff refuses knowledge from the web on a server that turned it off
// (Config.WebOff).
var ErrWebOff = usererr.New("Adding pages from the web is turned off on this server (WEFT_KB_WEB=off).")

// Refetch fetches one of the user's web documents again: a changed page is
// read again (its current version answers meanwhile), an unchanged one
// stays as it is.
func (s *Service) Refetch(ctx context.Context, user, doc int64, maxUserBytes int64) error {
	if s.cfg.WebOff {
		return ErrWebOff
	}
	err := s.store.StartRefetch(ctx, user, doc, s.enqueueWebFetch(ctx, maxUserBytes))
	if errors.Is(err, db.ErrNotFound) {
		return usererr.Wrap(err, "This document is being fetched or read already (or it did not come from the web).")
	}
	return err
}

// RefetchAll is Refetch for every web document of kb that is not being
// fetched or read; it returns what to tell the user.
func (s *Service) RefetchAll(ctx context.Context, user int64, kb db.KnowledgeBase, maxUserBytes int64) (string, error) {
	if s.cfg.WebOff {
		return "", ErrWebOff
	}
	n, err := s.store.StartRefetchAll(ctx, user, kb.ID, s.enqueueWebFetch(ctx, maxUserBytes))
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "No page of this knowledge base can be fetched again now: they are all being fetched or read.", nil
	}
	return fmt.Sprintf("Fetching %d page(s) again; those that changed are read again, the others stay as they are.", n), nil
}

// webAttempts is how many times a fetch or crawl job runs. A failure of
// the fetch itself is final (the user re-fetches); only the embedding model,
// the jail or the database being away make another attempt.
const webAttempts = 4

// WebFetchArgs is the job that fetches one web document.
type WebFetchArgs struct {
	DocumentID   int64 `json:"document_id"`
	MaxUserBytes int64 `json:"max_user_bytes,omitempty"`
}

// Kind names the job in River's table.
func (WebFetchArgs) Kind() string { return "kb_web_fetch" }

// WebCrawlArgs is the job that reads a sitemap into a knowledge base.
type WebCrawlArgs struct {
	CrawlID      int64 `json:"crawl_id"`
	MaxUserBytes int64 `json:"max_user_bytes,omitempty"`
}

// Kind names the job in River's table.
func (WebCrawlArgs) Kind() string { return "kb_web_crawl" }

// enqueueWebFetch is the enqueue step of the db calls that queue fetches.
func (s *Service) enqueueWebFetch(ctx context.Context, maxUserBytes int64) func(tx pgx.Tx, doc db.Document) error {
	return func(tx pgx.Tx, doc db.Document) error {
		return s.jobs.InsertTx(ctx, tx, WebFetchArgs{DocumentID: doc.ID, MaxUserBytes: maxUserBytes}, &river.InsertOpts{MaxAttempts: webAttempts})
	}
}

// addWebWorkers registers the fetch and crawl workers.
func (s *Service) addWebWorkers(w *river.Workers) error {
	if err := river.AddWorkerSafely(w, &webFetchWorker{s: s}); err != nil {
		return err
	}
	return river.AddWorkerSafely(w, &webCrawlWorker{s: s})
}

// webClient is Config.Web with at most maxBytes of body (a page may be as
// large as an uploaded file, a sitemap less).
func (s *Service) webClient(maxBytes int64) webfetch.Client {
	c := s.cfg.Web
	if c.MaxBytes <= 0 || c.MaxBytes > maxBytes {
		c.MaxBytes = maxBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = webTimeout
	}
	return c
}
