package rag_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
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

// embedGate stands between the service and the fake Ollama: once armed,
// it lets pass embedding requests through, then holds the next one until
// released. It works at the model server's HTTP boundary.
type embedGate struct {
	mu      sync.Mutex
	armed   bool
	pass    int
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

// newGatedEnv is newEnv whose embedding requests go through a gate.
func newGatedEnv(t *testing.T, cfg rag.Config) (*env, *embedGate) {
	t.Helper()
	g := &embedGate{held: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(g.open)
	fake := fakeollama.New(t)
	target, _ := url.Parse(fake.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/embed" && g.hold() {
			close(g.held)
			<-g.release
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u, _ := url.Parse(ts.URL)
	cfg.OllamaHost, cfg.RetryBackoff = ts.URL, 10*time.Millisecond
	store := testenv.NewDB(t)
	q := newQueue(t, store, map[string]int{rag.Queue: cfg.Workers})
	svc, err := rag.New(store, chat.NewOllamaClient(u), q, cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartJobs(t, q)
	e := &env{t: t, store: store, fake: fake, svc: svc}
	e.user, e.ws = e.newUser("web@example.com")
	return e, g
}

func (g *embedGate) arm(pass int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.pass = true, pass
}

func (g *embedGate) hold() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed {
		return false
	}
	if g.pass > 0 {
		g.pass--
		return false
	}
	g.armed = false
	return true
}

func (g *embedGate) open() { g.once.Do(func() { close(g.release) }) }

// handbook is an HTML page of n sections about topic.
func handbook(topic string, n int) string {
	var b strings.Builder
	b.WriteString("<!doctype html><title>" + topic + " handbook</title>")
	for i := range n {
		fmt.Fprintf(&b, "<h2>Part %d</h2><p>The %s handbook, part %d, explains %s care in detail: %s%d needs attention every season.</p>", i, topic, i, topic, topic, i)
	}
	return b.String()
}

func TestARefetchOfAChangedPageReplacesItsChunksWhileTheOldOnesAnswerUntilThen(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.set("/care", sitePage{contentType: "text/html", body: handbook("albatross", 3), etag: `"v1"`})
	e, gate := newGatedEnv(t, webConfig(rag.Config{EmbedBatch: 1}, s))
	ctx := context.Background()
	kb := e.kb(e.user, e.ws, "Web", "embedder")
	mustExec(t, e.store, "UPDATE knowledge_bases SET chunk_size = 200, chunk_overlap = 0 WHERE id = $1", kb.ID)
	old := e.settled(e.addURL(kb, s.URL+"/care"))
	if old.Status != db.DocReady || old.Chunks < 3 {
		t.Fatalf("first fetch: %s, %d chunks, %q", old.Status, old.Chunks, old.Error)
	}

	s.set("/care", sitePage{contentType: "text/html", body: handbook("zeppelin", 4), etag: `"v2"`})
	gate.arm(1) // the new version's first chunk is embedded, the second waits
	if err := e.svc.Refetch(ctx, e.user.ID, old.ID, 0); err != nil {
		t.Fatal(err)
	}
	testwait.Closed(t, "the update's second embedding", 60*time.Second, gate.held)
	mid, err := e.store.Document(ctx, e.user.ID, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if mid.Status != db.DocReady || mid.WebState != db.WebUpdating || mid.Chunks != old.Chunks {
		t.Errorf("while updating: %s, %q, %d chunks (were %d)", mid.Status, mid.WebState, mid.Chunks, old.Chunks)
	}
	if staged := countRows(t, e.store, "SELECT count(*) FROM kb_chunks WHERE document_id = $1 AND generation = 0", old.ID); staged != 1 {
		t.Errorf("%d chunks of the new version staged, want 1", staged)
	}
	if got := e.texts(kb, "albatross zeppelin care"); !strings.Contains(got, "albatross") || strings.Contains(got, "zeppelin") {
		t.Errorf("while updating, search found:\n%s\nwant the old version only", got)
	}

	gate.open()
	d := e.settled(old)
	if d.Status != db.DocReady || d.Error != "" || d.Name != "zeppelin handbook" || d.SHA256 == old.SHA256 {
		t.Fatalf("after the update: %s, %q, %q", d.Status, d.Error, d.Name)
	}
	if got := e.texts(kb, "albatross zeppelin care"); strings.Contains(got, "albatross") || !strings.Contains(got, "zeppelin") {
		t.Errorf("after the update, search found:\n%s\nwant the new version only", got)
	}
	current := countRows(t, e.store, "SELECT count(*) FROM kb_chunks WHERE document_id = $1 AND generation = 1", d.ID)
	if staged := countRows(t, e.store, "SELECT count(*) FROM kb_chunks WHERE document_id = $1 AND generation <> 1", d.ID); staged != 0 || current != d.Chunks {
		t.Errorf("%d chunks left outside the generation, %d in it (document says %d)", staged, current, d.Chunks)
	}
	if n := countRows(t, e.store, "SELECT COALESCE(sum(chunks), 0) FROM kb_lexemes WHERE kb_id = $1 AND word = 'albatross'", kb.ID); n != 0 {
		t.Errorf("the old version's words still count %d chunks", n)
	}
	if n := countRows(t, e.store, "SELECT chunks FROM knowledge_bases WHERE id = $1", kb.ID); n != d.Chunks {
		t.Errorf("the knowledge base counts %d chunks, its document %d", n, d.Chunks)
	}
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
