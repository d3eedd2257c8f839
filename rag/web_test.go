package rag_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testwait"
	"weft/internal/usererr"
	"weft/rag"
)

// site is a local web server whose pages a test sets and changes. A page
// with an ETag answers 304 to a request that sends it back.
type site struct {
	*httptest.Server
	mu          sync.Mutex
	pages       map[string]sitePage
	hits        map[string]int
	conditional map[string]int
}

type sitePage struct {
	status      int // 0: 200
	contentType string
	body        string
	etag        string
}

func newSite(t *testing.T) *site {
	t.Helper()
	s := &site{pages: map[string]sitePage{}, hits: map[string]int{}, conditional: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p, ok := s.pages[r.URL.Path]
	s.hits[r.URL.Path]++
	if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" {
		s.conditional[r.URL.Path]++
	}
	s.mu.Unlock()
	switch {
	case !ok:
		http.NotFound(w, r)
	case p.etag != "" && r.Header.Get("If-None-Match") == p.etag:
		w.WriteHeader(http.StatusNotModified)
	default:
		if p.etag != "" {
			w.Header().Set("ETag", p.etag)
		}
		w.Header().Set("Content-Type", p.contentType)
		w.WriteHeader(max(p.status, 200))
		fmt.Fprint(w, p.body)
	}
}

func (s *site) set(path string, p sitePage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages[path] = p
}

func (s *site) html(path, title, body string) {
	s.set(path, sitePage{contentType: "text/html; charset=utf-8",
		body: "<!doctype html><html><head><title>" + title + "</title></head><body>" + body + "</body></html>"})
}

func (s *site) count(m map[string]int, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m[path]
}

func (s *site) addr() netip.AddrPort { return netip.MustParseAddrPort(s.Listener.Addr().String()) }

// webConfig lets the services fetch from the test's own sites only; any
// other local address stays refused.
func webConfig(cfg rag.Config, sites ...*site) rag.Config {
	var addrs []netip.AddrPort
	for _, s := range sites {
		addrs = append(addrs, s.addr())
	}
	cfg.Web = cfg.Web.AllowForTest(addrs...)
	return cfg
}

// addURL adds one page through the service and returns its document.
func (e *env) addURL(kb db.KnowledgeBase, u string) db.Document {
	e.t.Helper()
	if _, err := e.svc.AddFromWeb(context.Background(), e.user.ID, kb, rag.WebInput{URL: u}, 0); err != nil {
		e.t.Fatal(err)
	}
	u, _, _ = strings.Cut(u, "#")
	return e.docByURL(kb, u)
}

func (e *env) docByURL(kb db.KnowledgeBase, u string) db.Document {
	e.t.Helper()
	docs, err := e.store.Documents(context.Background(), e.user.ID, kb.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, d := range docs {
		if d.SourceURL == u {
			return d
		}
	}
	e.t.Fatalf("no document for %s among %d", u, len(docs))
	return db.Document{}
}

// settled waits until a document is ready or failed with no fetch going on.
func (e *env) settled(doc db.Document) db.Document {
	e.t.Helper()
	var d db.Document
	if !testwait.Until(90*time.Second, func() bool {
		var err error
		if d, err = e.store.Document(context.Background(), e.user.ID, doc.ID); err != nil {
			e.t.Fatal(err)
		}
		return d.WebState == "" && (d.Status == db.DocReady || d.Status == db.DocFailed)
	}) {
		e.t.Fatalf("document %d still %s/%q", d.ID, d.Status, d.WebState)
	}
	return d
}

// texts is what a search of kb finds for q (all of it), joined.
func (e *env) texts(kb db.KnowledgeBase, q string) string {
	e.t.Helper()
	kb, err := e.store.KB(context.Background(), e.user.ID, kb.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.svc.Search(context.Background(), rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: q, All: true})
	if err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range res {
		b.WriteString(r.Text + "\n")
	}
	return b.String()
}

func TestAWebPageIsFetchedIngestedAndFoundBySearch(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.html("/guide/trams", "Lisbon trams", "<nav>Home | Up</nav><h1>Trams</h1><p>Tram 28 climbs from Martim Moniz through Alfama.</p>")
	e := newEnv(t, webConfig(rag.Config{}, s))
	kb := e.kb(e.user, e.ws, "Web", "embedder")
	d := e.settled(e.addURL(kb, s.URL+"/guide/trams#top"))
	if d.Status != db.DocReady || d.Chunks == 0 {
		t.Fatalf("%s with %d chunks: %s", d.Status, d.Chunks, d.Error)
	}
	if d.Name != "Lisbon trams" || d.Format != rag.FormatHTML || d.FetchedAt == nil {
		t.Errorf("name %q, format %q, fetched at %v: want the page's title, html, a time", d.Name, d.Format, d.FetchedAt)
	}
	kb, _ = e.store.KB(context.Background(), e.user.ID, kb.ID)
	res, err := e.svc.Search(context.Background(), rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb}, Text: "which tram goes through Alfama?"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 || !strings.Contains(res[0].Text, "Tram 28") || res[0].DocumentID != d.ID {
		t.Fatalf("search found %+v", res)
	}
	// The same page again is refused, saying so.
	_, err = e.svc.AddFromWeb(context.Background(), e.user.ID, kb, rag.WebInput{URL: s.URL + "/guide/trams#again"}, 0)
	if msg, _ := usererr.Message(err); !strings.Contains(msg, "already in this knowledge base") {
		t.Errorf("adding the page twice: %v", err)
	}
}

func TestTheProductionFetcherRefusesTheLocalTestServer(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.html("/secret", "Secret", "<p>internal only</p>")
	e := newEnv(t, rag.Config{}) // no test address allowed: what a running server has
	kb := e.kb(e.user, e.ws, "Web", "embedder")
	d := e.settled(e.addURL(kb, s.URL+"/secret"))
	if d.Status != db.DocFailed || d.Error != "Web fetch blocked: 127.0.0.1 resolves to a private or local address." {
		t.Errorf("%s: %q", d.Status, d.Error)
	}
	if n := s.count(s.hits, "/secret"); n != 0 {
		t.Errorf("the local server got %d requests", n)
	}
}

func TestWebFetchFailuresAreShownOnTheirDocument(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	private := newSite(t) // on 127.0.0.1 too, but not let through
	private.html("/admin", "Admin", "<p>secret</p>")
	s.set("/big", sitePage{contentType: "text/plain", body: strings.Repeat("word ", 2000)})
	s.set("/logo", sitePage{contentType: "image/png", body: "\x89PNG\r\n\x1a\n"})
	s.set("/gone", sitePage{status: http.StatusGone, contentType: "text/plain", body: "gone"})
	s.html("/away", "Away", "")
	e := newEnv(t, webConfig(rag.Config{MaxFileBytes: 4096}, s))
	kb := e.kb(e.user, e.ws, "Web", "embedder")
	want := map[string]string{
		s.URL + "/missing":     "The server answered 404 Not Found.",
		s.URL + "/gone":        "The server answered 410 Gone.",
		s.URL + "/big":         "The page is larger than the limit of 4 KB.",
		s.URL + "/logo":        "The page is image/png, which a knowledge base cannot read",
		private.URL + "/admin": "Web fetch blocked: 127.0.0.1 resolves to a private or local address.",
		s.URL + "/away":        "No text was found",
	}
	for u, msg := range want {
		d := e.settled(e.addURL(kb, u))
		if d.Status != db.DocFailed || !strings.HasPrefix(d.Error, msg) {
			t.Errorf("%s: %s, %q; want failed with %q", u, d.Status, d.Error, msg)
		}
	}
	if private.count(private.hits, "/admin") != 0 {
		t.Error("the private server was reached")
	}
}

func TestAPageOverTheStorageLimitFailsWithTheLimitsMessage(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.set("/notes.txt", sitePage{contentType: "text/plain", body: strings.Repeat("a note about storage. ", 100)})
	e := newEnv(t, webConfig(rag.Config{}, s))
	kb := e.kb(e.user, e.ws, "Web", "embedder")
	if _, err := e.svc.AddFromWeb(context.Background(), e.user.ID, kb, rag.WebInput{URL: s.URL + "/notes.txt"}, 1000); err != nil {
		t.Fatal(err)
	}
	d := e.settled(e.docByURL(kb, s.URL+"/notes.txt"))
	if d.Status != db.DocFailed || !strings.Contains(d.Error, "storage limit of 1000 bytes") {
		t.Errorf("%s: %q", d.Status, d.Error)
	}
}

func TestARefetchOfAnUnchangedPageChangesNothing(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	page := "<!doctype html><title>Kites</title><h1>Kites</h1><p>A kite needs steady wind of ten knots.</p>"
	s.set("/kites", sitePage{contentType: "text/html", body: page, etag: `"k1"`})
	s.set("/ovens", sitePage{contentType: "text/html", body: "<!doctype html><title>Ovens</title><p>Ovens preheat for twenty minutes.</p>"})
	e := newEnv(t, webConfig(rag.Config{}, s))
	kb := e.kb(e.user, e.ws, "Web", "embedder")
	kites := e.settled(e.addURL(kb, s.URL+"/kites"))
	ovens := e.settled(e.addURL(kb, s.URL+"/ovens"))
	before := chunkIDs(t, e.store, kites.ID, ovens.ID)
	embeds := len(e.fake.EmbedRequests())

	msg, err := e.svc.RefetchAll(context.Background(), e.user.ID, kb, 0)
	if err != nil || !strings.Contains(msg, "Fetching 2 page(s) again") {
		t.Fatalf("re-fetch all: %q, %v", msg, err)
	}
	k, o := e.settled(kites), e.settled(ovens)
	if s.count(s.conditional, "/kites") != 1 {
		t.Errorf("the re-fetch of a page with an ETag was not conditional")
	}
	if k.Status != db.DocReady || o.Status != db.DocReady || k.Error != "" || o.Error != "" || !k.FetchedAt.After(*kites.FetchedAt) {
		t.Errorf("after the re-fetch: %s %q, %s %q, fetched %v (was %v)", k.Status, k.Error, o.Status, o.Error, k.FetchedAt, kites.FetchedAt)
	}
	if after := chunkIDs(t, e.store, kites.ID, ovens.ID); after != before {
		t.Errorf("the chunks changed: %s, were %s", after, before)
	}
	if n := len(e.fake.EmbedRequests()); n != embeds {
		t.Errorf("%d embedding requests for unchanged pages", n-embeds)
	}
}

// chunkIDs lists the ids of documents' chunks, every generation.
func chunkIDs(t *testing.T, store *db.DB, docs ...int64) string {
	t.Helper()
	var s string
	err := store.Pool.QueryRow(context.Background(), `SELECT COALESCE(string_agg(id::text || '@' || generation, ',' ORDER BY id), '')
		FROM kb_chunks WHERE document_id = ANY($1)`, docs).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestARefetchThatFailsKeepsTheVersionThatAnswers(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.html("/tide", "Tides", "<p>High tide at Porto comes twice a day.</p>")
	e := newEnv(t, webConfig(rag.Config{}, s))
	kb := e.kb(e.user, e.ws, "Web", "embedder")
	d := e.settled(e.addURL(kb, s.URL+"/tide"))
	s.mu.Lock()
	delete(s.pages, "/tide")
	s.mu.Unlock()
	if err := e.svc.Refetch(context.Background(), e.user.ID, d.ID, 0); err != nil {
		t.Fatal(err)
	}
	got := e.settled(d)
	if got.Status != db.DocReady || got.Chunks != d.Chunks || !strings.HasPrefix(got.Error, "Not updated: the server answered 404 Not Found. The version fetched on ") {
		t.Errorf("%s, %d chunks, %q", got.Status, got.Chunks, got.Error)
	}
	if !strings.Contains(e.texts(kb, "high tide porto"), "High tide at Porto") {
		t.Error("the old version no longer answers")
	}
}

func TestWebDocumentsAreReachedOnlyThroughTheirOwner(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.html("/mine", "Mine", "<p>My own page.</p>")
	e := newEnv(t, webConfig(rag.Config{}, s))
	ctx := context.Background()
	kb := e.kb(e.user, e.ws, "Web", "embedder")
	d := e.settled(e.addURL(kb, s.URL+"/mine"))
	stranger, _ := e.newUser("stranger@example.com")
	if _, err := e.svc.AddFromWeb(ctx, stranger.ID, kb, rag.WebInput{URL: s.URL + "/other"}, 0); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("a stranger added a page to my knowledge base: %v", err)
	}
	if _, err := e.svc.AddFromWeb(ctx, stranger.ID, kb, rag.WebInput{URL: s.URL + "/", Sitemap: true}, 0); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("a stranger started a crawl of my knowledge base: %v", err)
	}
	if err := e.svc.Refetch(ctx, stranger.ID, d.ID, 0); err == nil {
		t.Error("a stranger re-fetched my page")
	}
	if msg, err := e.svc.RefetchAll(ctx, stranger.ID, kb, 0); err != nil || !strings.HasPrefix(msg, "No page") {
		t.Errorf("a stranger's re-fetch of everything: %q, %v", msg, err)
	}
	if got := e.settled(d); got.FetchedAt == nil || !got.FetchedAt.Equal(*d.FetchedAt) || s.count(s.hits, "/mine") != 1 {
		t.Errorf("my page was fetched again (%d requests)", s.count(s.hits, "/mine"))
	}
}

func countRows(t *testing.T, store *db.DB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := store.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}
