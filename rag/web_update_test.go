package rag_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
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
	"weft/rag"
)

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
	// The new version is indexed as a first fetch would be: its title, its
	// identifiers, the knowledge base's language.
	if n := countRows(t, e.store, `SELECT count(*) FROM kb_chunks WHERE document_id = $1 AND title = 'zeppelin handbook'
		AND lang = (SELECT language FROM knowledge_bases WHERE id = $2)`, d.ID, kb.ID); n != d.Chunks {
		t.Errorf("%d of %d chunks of the new version carry its title and the language", n, d.Chunks)
	}
	if n := countRows(t, e.store, "SELECT COALESCE(sum(chunks), 0) FROM kb_lexemes WHERE kb_id = $1 AND word = 'albatross'", kb.ID); n != 0 {
		t.Errorf("the old version's words still count %d chunks", n)
	}
	if n := countRows(t, e.store, "SELECT chunks FROM knowledge_bases WHERE id = $1", kb.ID); n != d.Chunks {
		t.Errorf("the knowledge base counts %d chunks, its document %d", n, d.Chunks)
	}
}
