package rag_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testwait"
	"weft/rag"
)

func urlset(locs ...string) sitePage {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, l := range locs {
		b.WriteString("<url><loc>" + l + "</loc><lastmod>2024-01-01</lastmod></url>")
	}
	return sitePage{contentType: "application/xml", body: b.String() + "</urlset>"}
}

func sitemapIndex(locs ...string) sitePage {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, l := range locs {
		b.WriteString("<sitemap><loc>" + l + "</loc></sitemap>")
	}
	return sitePage{contentType: "application/xml", body: b.String() + "</sitemapindex>"}
}

// crawled starts a crawl and waits until it is settled.
func (e *env) crawled(kb db.KnowledgeBase, in rag.WebInput) db.WebCrawl {
	e.t.Helper()
	if _, err := e.svc.AddFromWeb(context.Background(), e.user.ID, kb, in, 0); err != nil {
		e.t.Fatal(err)
	}
	var c db.WebCrawl
	testwait.For(e.t, "the crawl", 60*time.Second, func() bool {
		cs, err := e.store.WebCrawls(context.Background(), e.user.ID, kb.ID, 1)
		if err != nil {
			e.t.Fatal(err)
		}
		c = cs[0]
		return c.Status != db.CrawlRunning
	})
	return c
}

// sourceURLs lists a knowledge base's web documents' paths, sorted.
func (e *env) sourceURLs(kb db.KnowledgeBase, base string) []string {
	e.t.Helper()
	docs, err := e.store.Documents(context.Background(), e.user.ID, kb.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range docs {
		out = append(out, strings.TrimPrefix(d.SourceURL, base))
	}
	sort.Strings(out)
	return out
}

func TestASitemapIndexAddsItsPagesWithinThePageCapIgnoringOffSiteAndLoopingLinks(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	u := s.URL
	s.set("/sitemap_index.xml", sitemapIndex(u+"/sitemap-a.xml", u+"/sitemap_index.xml", "https://elsewhere.example/sitemap.xml", u+"/sitemap-b.xml"))
	s.set("/sitemap-a.xml", urlset(u+"/a1", u+"/a2", "https://elsewhere.example/x", u+"/a1#again", u+"/a3"))
	s.set("/sitemap-b.xml", sitemapIndex(u+"/sitemap-c.xml", u+"/sitemap_index.xml"))
	s.set("/sitemap-c.xml", urlset(u+"/c1", u+"/c2", u+"/c3", u+"/c4"))
	for i := range 10 {
		for _, p := range []string{"a", "c"} {
			s.html(fmt.Sprintf("/%s%d", p, i), fmt.Sprintf("Page %s%d", p, i), fmt.Sprintf("<p>Page %s%d talks about lighthouse number %d.</p>", p, i, i))
		}
	}
	e := newEnv(t, webConfig(rag.Config{Workers: 4}, s))
	kb := e.kb(e.user, e.ws, "Site", "embedder")

	c := e.crawled(kb, rag.WebInput{URL: u + "/sitemap_index.xml", Sitemap: true, MaxPages: "5"})
	if c.Status != db.CrawlDone || c.Pages != 5 {
		t.Fatalf("crawl %s with %d pages: %s", c.Status, c.Pages, c.Message)
	}
	if got, want := strings.Join(e.sourceURLs(kb, u), " "), "/a1 /a2 /a3 /c1 /c2"; got != want {
		t.Errorf("pages %s, want %s", got, want)
	}
	for _, want := range []string{"Read 4 sitemap(s)", "5 page(s) added", "2 on other sites", "2 over the limit of 5 pages"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("the crawl's message %q does not say %q", c.Message, want)
		}
	}
	if n := s.count(s.hits, "/sitemap_index.xml"); n != 1 {
		t.Errorf("the index that lists itself was read %d times", n)
	}
	docs, _ := e.store.Documents(context.Background(), e.user.ID, kb.ID)
	for _, d := range docs {
		if d = e.settled(d); d.Status != db.DocReady {
			t.Errorf("%s: %s %q", d.SourceURL, d.Status, d.Error)
		}
	}

	// Read again with a shallower depth: sitemap-c is not reached, and
	// the pages already here are not added twice.
	c = e.crawled(kb, rag.WebInput{URL: u + "/sitemap_index.xml", Sitemap: true, MaxDepth: "2"})
	if c.Status != db.CrawlDone || c.Pages != 0 || !strings.Contains(c.Message, "3 already in this knowledge base") ||
		!strings.Contains(c.Message, "1 sitemap(s) nested deeper than 2 levels") {
		t.Errorf("second crawl %s, %d pages: %s", c.Status, c.Pages, c.Message)
	}
	if n := s.count(s.hits, "/sitemap-c.xml"); n != 1 {
		t.Errorf("sitemap-c was read %d times, want once (by the first crawl)", n)
	}
}

func TestACrawlFromAPageFindsTheSitesSitemapAndTakesOnlyThePagesUnderIt(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	u := s.URL
	s.html("/docs/intro", "Intro", "<p>Start here.</p>")
	s.set("/robots.txt", sitePage{contentType: "text/plain", body: "User-agent: *\nSitemap: " + u + "/maps/all.xml\n"})
	s.set("/maps/all.xml", urlset(u+"/docs/a", u+"/docs/b", u+"/blog/post", u+"/docs"))
	s.html("/docs/a", "A", "<p>Docs page A.</p>")
	s.html("/docs/b", "B", "<p>Docs page B.</p>")
	e := newEnv(t, webConfig(rag.Config{}, s))
	kb := e.kb(e.user, e.ws, "Docs", "embedder")

	c := e.crawled(kb, rag.WebInput{URL: u + "/docs/intro", Sitemap: true})
	if c.Status != db.CrawlDone || c.Pages != 2 || !strings.Contains(c.Message, "2 on other sites or outside /docs/") {
		t.Fatalf("crawl %s with %d pages: %s", c.Status, c.Pages, c.Message)
	}
	if got := strings.Join(e.sourceURLs(kb, u), " "); got != "/docs/a /docs/b" {
		t.Errorf("pages %s", got)
	}
	for _, p := range []string{"/docs/sitemap.xml", "/sitemap.xml"} {
		if s.count(s.hits, p) != 1 {
			t.Errorf("%s was not looked for", p)
		}
	}
}

func TestACrawlWithNoSitemapFailsSayingWhereItLooked(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.html("/", "Home", "<p>No sitemap here.</p>")
	e := newEnv(t, webConfig(rag.Config{}, s))
	kb := e.kb(e.user, e.ws, "Nothing", "embedder")
	c := e.crawled(kb, rag.WebInput{URL: s.URL + "/", Sitemap: true})
	want := "No sitemap was found: tried " + s.URL + "/ (not a sitemap), " + s.URL + "/sitemap.xml (the server answered 404 Not Found) and robots.txt."
	if c.Status != db.CrawlFailed || c.Message != want {
		t.Errorf("%s: %q\nwant %q", c.Status, c.Message, want)
	}
	if docs, _ := e.store.Documents(context.Background(), e.user.ID, kb.ID); len(docs) != 0 {
		t.Errorf("%d documents added", len(docs))
	}
}

func TestTheWebFormsBoundsAreChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Bounds", "embedder")
	for _, in := range []rag.WebInput{
		{URL: ""},
		{URL: "ftp://example.com/"},
		{URL: "example.com"},
		{URL: "https://example.com/", Sitemap: true, MaxPages: "1001"},
		{URL: "https://example.com/", Sitemap: true, MaxPages: "ten"},
		{URL: "https://example.com/", Sitemap: true, MaxDepth: "6"},
		{URL: "https://example.com/" + strings.Repeat("x", 2000)},
	} {
		if _, err := e.svc.AddFromWeb(context.Background(), e.user.ID, kb, in, 0); err == nil {
			t.Errorf("%+v was accepted", in)
		}
	}
	if docs, _ := e.store.Documents(context.Background(), e.user.ID, kb.ID); len(docs) != 0 {
		t.Errorf("%d documents added", len(docs))
	}
}
