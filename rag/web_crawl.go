package rag

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/riverqueue/river"

	"weft/db"
	"weft/internal/usererr"
	"weft/internal/webfetch"
)

// A crawl reads a site's sitemaps into a knowledge base. Its scope is one
// site: the host of the address given (with or without "www.", same port);
// when that address is a page rather than a sitemap, only the pages under
// its directory (a page at /docs/intro takes /docs/…). Sitemap indexes are
// followed breadth first, each sitemap once (an index listing itself or a
// cycle ends there), at most MaxDepth levels deep and maxSitemapFetches in
// all; the first MaxPages pages in scope are added, each fetched by its own
// job. robots.txt is read only for its Sitemap lines.

type webCrawlWorker struct {
	river.WorkerDefaults[WebCrawlArgs]
	s *Service
}

func (w *webCrawlWorker) Work(ctx context.Context, job *river.Job[WebCrawlArgs]) error {
	s := w.s
	c, err := s.store.WebCrawlForJob(ctx, job.Args.CrawlID)
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var cr *crawler
	if s.cfg.WebOff {
		err = permanent{msg: usererr.Capitalize(webOffReason) + "."}
	} else {
		cr, err = s.crawl(ctx, c)
	}
	var perm permanent
	switch {
	case errors.As(err, &perm):
		if ferr := s.store.FinishWebCrawl(context.WithoutCancel(ctx), c.ID, db.CrawlFailed, perm.msg, 0); ferr != nil {
			return ferr
		}
		return river.JobCancel(err)
	case err != nil && ctx.Err() == nil && job.Attempt >= job.MaxAttempts:
		slog.Error("reading a sitemap failed for good", "crawl", c.ID, "err", err)
		_ = s.store.FinishWebCrawl(context.WithoutCancel(ctx), c.ID, db.CrawlFailed, "Reading the sitemap kept failing; the server log has the details.", 0)
		return err
	case err != nil:
		return err
	}
	added, existing, err := s.store.AddWebPages(ctx, c.OwnerID, c.KBID, cr.pages, s.enqueueWebFetch(ctx, job.Args.MaxUserBytes))
	if errors.Is(err, db.ErrNotFound) {
		return nil // the knowledge base was deleted meanwhile
	}
	if err != nil {
		return err
	}
	return s.store.FinishWebCrawl(ctx, c.ID, db.CrawlDone, cr.message(len(added), existing), len(added))
}

// crawler is one crawl's reading of sitemaps.
type crawler struct {
	s         *Service
	c         db.WebCrawl
	start     *url.URL
	scope     siteScope
	pages     []db.NewWebPage
	seenPages map[string]bool
	seenMaps  map[string]bool
	fetches   int
	// What was read and left out, for the message.
	read, offSite, overCap, tooDeep, unreadable, tooMany int
}

type sitemapRef struct {
	url   string
	depth int
	got   *sitemap // already read (the first one)
}

// crawl reads the crawl's sitemaps and collects the pages to add.
func (s *Service) crawl(ctx context.Context, c db.WebCrawl) (*crawler, error) {
	start, err := webURL(c.URL)
	if err != nil {
		return nil, permanent{msg: usererr.Or(err, "This address cannot be fetched.")}
	}
	cr := &crawler{s: s, c: c, start: start, seenPages: map[string]bool{}, seenMaps: map[string]bool{}}
	first, at, prefix, err := cr.findSitemap(ctx)
	if err != nil {
		return nil, err
	}
	cr.scope = newScope(start, prefix)
	cr.seenMaps[at] = true
	queue := []sitemapRef{{url: at, depth: 1, got: &first}}
	for len(queue) > 0 && len(cr.pages) < c.MaxPages {
		ref := queue[0]
		queue = queue[1:]
		if ref.got == nil {
			if cr.fetches >= maxSitemapFetches {
				cr.tooMany++
				continue
			}
			got, err := cr.fetch(ctx, ref.url)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				cr.unreadable++
				continue
			}
			ref.got = &got
		}
		cr.read++
		cr.take(ref.got.pages)
		queue = append(queue, cr.nested(ref)...)
		if err := s.store.TouchWebCrawl(ctx, c.ID, len(cr.pages)); err != nil {
			return nil, err
		}
	}
	return cr, nil
}

// take keeps the pages of a sitemap that are in scope, new, and within the
// page limit.
func (cr *crawler) take(locs []string) {
	for _, loc := range locs {
		u, offSite, ok := cr.scope.page(loc)
		if !ok {
			if offSite {
				cr.offSite++
			}
			continue
		}
		key := u.String()
		switch {
		case cr.seenPages[key]:
		case len(cr.pages) >= cr.c.MaxPages:
			cr.overCap++
		default:
			cr.seenPages[key] = true
			cr.pages = append(cr.pages, db.NewWebPage{URL: key, Name: pageName(u)})
		}
	}
}

// nested returns the sitemaps an index lists that are still to read.
func (cr *crawler) nested(ref sitemapRef) []sitemapRef {
	var next []sitemapRef
	for _, loc := range ref.got.sitemaps {
		u, err := webURL(loc)
		switch {
		case err != nil:
		case !cr.scope.sameSite(u):
			cr.offSite++
		case cr.seenMaps[u.String()]: // a loop: read already
		case ref.depth >= cr.c.MaxDepth:
			cr.tooDeep++
		default:
			cr.seenMaps[u.String()] = true
			next = append(next, sitemapRef{url: u.String(), depth: ref.depth + 1})
		}
	}
	return next
}

// findSitemap finds the crawl's first sitemap: the address itself (then
// the whole site is in scope), else sitemap.xml in its directory, at the
// root, or named by robots.txt (then the address's directory is). It
// returns the sitemap, its URL and the scope's path prefix.
func (cr *crawler) findSitemap(ctx context.Context) (sitemap, string, string, error) {
	start := cr.start.String()
	var tried []string // what each try found, for the message
	done := map[string]bool{}
	try := func(at string) (sitemap, bool, error) {
		if done[at] {
			return sitemap{}, false, nil
		}
		done[at] = true
		got, err := cr.fetch(ctx, at)
		if ctx.Err() != nil {
			return sitemap{}, false, ctx.Err()
		}
		if err != nil {
			tried = append(tried, at+" ("+usererr.Or(err, "it could not be read")+")")
			return sitemap{}, false, nil
		}
		return got, true, nil
	}
	if got, ok, err := try(start); ok || err != nil {
		return got, start, "/", err
	}
	prefix := dirOf(cr.start)
	candidates := []string{cr.resolve(prefix + "sitemap.xml"), cr.resolve("/sitemap.xml")}
	candidates = append(candidates, cr.robotsSitemaps(ctx)...)
	for _, at := range candidates {
		if got, ok, err := try(at); ok || err != nil {
			return got, at, prefix, err
		}
	}
	return sitemap{}, "", "", permanent{msg: "No sitemap was found: tried " + strings.Join(tried, ", ") + " and robots.txt."}
}

// resolve is a path on the crawl's host.
func (cr *crawler) resolve(p string) string {
	return cr.start.ResolveReference(&url.URL{Path: p}).String()
}

// fetch reads one sitemap.
func (cr *crawler) fetch(ctx context.Context, at string) (sitemap, error) {
	cr.fetches++
	resp, err := cr.s.webClient(maxSitemapBytes).Get(ctx, webfetch.Request{URL: at, Whole: true,
		Accept: "application/xml,text/xml;q=0.9,application/gzip;q=0.5,*/*;q=0.1"})
	if err != nil {
		return sitemap{}, err
	}
	got, err := parseSitemap(resp.Body)
	if err != nil {
		return sitemap{}, usererr.Wrap(err, "not a sitemap")
	}
	return got, nil
}

// robotsSitemaps returns the sitemaps robots.txt names on the crawl's site.
func (cr *crawler) robotsSitemaps(ctx context.Context) []string {
	resp, err := cr.s.webClient(512<<10).Get(ctx, webfetch.Request{URL: cr.resolve("/robots.txt"), Accept: "text/plain", Whole: true})
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(resp.Body))
	for sc.Scan() && len(out) < 10 {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(key), "sitemap") {
			continue
		}
		if u, err := webURL(value); err == nil && newScope(cr.start, "/").sameSite(u) {
			out = append(out, u.String())
		}
	}
	return out
}

// message says what the crawl did, for the user.
func (cr *crawler) message(added, existing int) string {
	var left []string
	note := func(n int, format string, a ...any) {
		if n > 0 {
			left = append(left, fmt.Sprintf("%d "+format, append([]any{n}, a...)...))
		}
	}
	note(existing, "already in this knowledge base")
	where := "on other sites"
	if cr.scope.prefix != "/" {
		where += " or outside " + cr.scope.prefix
	}
	note(cr.offSite, "%s", where)
	note(cr.overCap, "over the limit of %d pages", cr.c.MaxPages)
	note(cr.tooDeep, "sitemap(s) nested deeper than %d levels", cr.c.MaxDepth)
	note(cr.unreadable, "sitemap(s) that could not be read")
	note(cr.tooMany, "sitemap(s) beyond the %d one crawl reads", maxSitemapFetches)
	msg := fmt.Sprintf("Read %d sitemap(s) of %s: %d page(s) added", cr.read, cr.start.Host, added)
	if len(left) > 0 {
		msg += "; left out: " + strings.Join(left, ", ")
	}
	return msg + "."
}
