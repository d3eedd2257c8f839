package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/rag"
)

// fakeSearXNG is a local SearXNG instance's JSON API: GET /search?q=…&format=json
// answers what reply says (by default the results set), and records the
// queries it got.
type fakeSearXNG struct {
	*httptest.Server
	mu      sync.Mutex
	queries []string
	results []map[string]any
	reply   func(w http.ResponseWriter, r *http.Request) bool // answers instead, when it returns true
}

func newFakeSearXNG(t *testing.T) *fakeSearXNG {
	t.Helper()
	f := &fakeSearXNG{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.Error(w, "forbidden", http.StatusForbidden) // SearXNG without json in its formats
			return
		}
		f.mu.Lock()
		f.queries = append(f.queries, r.URL.Query().Get("q"))
		reply, results := f.reply, f.results
		f.mu.Unlock()
		if reply != nil && reply(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"query": r.URL.Query().Get("q"), "results": results})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeSearXNG) set(results ...map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results = results
}

func (f *fakeSearXNG) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

func result(u, title, content string) map[string]any {
	return map[string]any{"url": u, "title": title, "content": content, "engine": "fake", "score": 1.0}
}

// countingSite is a web site that counts the requests it gets.
type countingSite struct {
	*webSite
	hits atomic.Int64
}

func newCountingSite(t *testing.T) *countingSite {
	t.Helper()
	s := &countingSite{webSite: newWebSite(t)}
	inner := s.Config.Handler
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		inner.ServeHTTP(w, r)
	})
	return s
}

func addrOf(s *httptest.Server) netip.AddrPort {
	return netip.MustParseAddrPort(s.Listener.Addr().String())
}

// webSearchEnv is an app whose page fetcher may reach the given local
// sites (none: the policy of a running server), with a signed-in
// administrator (the first account).
type webSearchEnv struct {
	t    *testing.T
	app  *testenv.App
	c    *testenv.Client
	user db.User
	ws   db.Workspace
}

func newWebSearchEnv(t *testing.T, o testenv.Options, sites ...*httptest.Server) *webSearchEnv {
	t.Helper()
	if len(sites) > 0 {
		addrs := make([]netip.AddrPort, len(sites))
		for i, s := range sites {
			addrs[i] = addrOf(s)
		}
		o.RAG.Web = o.RAG.Web.AllowForTest(addrs...)
	}
	app := testenv.Start(t, testenv.NewDB(t), o)
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("searcher@example.com", password)
	ctx := context.Background()
	u, err := app.Store.UserByEmail(ctx, "searcher@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := app.Store.DefaultWorkspace(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	return &webSearchEnv{t: t, app: app, c: c, user: u, ws: ws}
}

// configure sets the search service on /admin.
func (e *webSearchEnv) configure(service string, pages int) {
	e.t.Helper()
	r := e.c.Post("/admin/web-search", url.Values{"kind": {"searxng"}, "url": {service}, "results": {"5"}, "pages": {fmt.Sprint(pages)}})
	if r.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("configure: %d %s", r.StatusCode, r.Body)
	}
}

// ask starts a thread with "Search the web" on and returns it.
func (e *webSearchEnv) ask(content string, extra url.Values) int64 {
	e.t.Helper()
	form := url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "web_present": {"1"}, "web": {"on"}, "content": {content}}
	for k, v := range extra {
		form[k] = v
	}
	r := e.c.Post("/t", form)
	if r.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("send: %d %s", r.StatusCode, r.Body)
	}
	var thread int64
	fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &thread)
	return thread
}

func (e *webSearchEnv) finished(thread int64) (db.Run, db.Message) {
	e.t.Helper()
	r := waitIdle(e.t, e.app.Store, e.user.ID, thread)
	m, err := e.app.Store.Message(context.Background(), e.user.ID, *r.AssistantMessageID)
	if err != nil {
		e.t.Fatal(err)
	}
	return r, m
}

// chatRequests are the streamed model requests whose last user message is
// content.
func chatRequests(f *fakeollama.Server, content string) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Chat == nil || len(r.Chat.Messages) == 0 {
			continue
		}
		if m := r.Chat.Messages[len(r.Chat.Messages)-1]; m.Role == "user" && m.Content == content {
			n++
		}
	}
	return n
}

const tramPage = `<!doctype html><html><head><title>Tram guide</title></head><body>
<nav><a href="/">Home</a> <a href="/menu">Site menu of links everywhere</a></nav>
<main><h1>Trams of Lisbon</h1>
<p>Lisbon has five tram lines and a few funiculars.</p>
<h2>Alfama</h2>
<p>Tram 28 climbs from Martim Moniz through Alfama to the castle hill, past the cathedral.</p>
</main></body></html>`

// With "Search the web" on, the question is searched, the pages found are
// fetched and read (without their navigation), and their passages reach the
// model as numbered sources with title and URL; the answer cites them, and
// each citation opens the passage with its URL as a link that passes
// nothing on. Results that are not web pages are dropped.
func TestSearchTheWebSendsThePagesPassagesAsNumberedSourcesAndCitesThem(t *testing.T) {
	t.Parallel()
	site := newCountingSite(t)
	site.set("/tram", tramPage)
	site.set("/ferry", webPage("Ferries", "Ferries cross the Tagus to Cacilhas every twenty minutes."))
	search := newFakeSearXNG(t)
	search.set(
		result("javascript:alert(1)", "Evil", "a script"),
		result(site.URL+"/tram", "Trams (search title)", "Tram 28 …"),
		result("file:///etc/passwd", "Local file", "root"),
		result(site.URL+"/ferry", "Ferries", "Ferries cross…"),
		result(site.URL+"/tram#again", "Same page", "again"),
	)
	e := newWebSearchEnv(t, testenv.Options{}, site.Server)
	e.configure(search.URL, 3)

	// The fake model echoes the question: its "[1]" is the answer's citation.
	const q = "Which tram climbs through Alfama? [1]"
	thread := e.ask(q, nil)
	run, m := e.finished(thread)
	if run.Kind != db.RouteRAG || run.Status != db.RunCompleted || m.Status != db.MsgComplete {
		t.Fatalf("run %s %s %q, answer %s", run.Kind, run.Status, run.Error, m.Status)
	}
	if got := search.asked(); len(got) != 1 || got[0] != q {
		t.Errorf("the search service was asked %q, want the message", got)
	}
	if site.hits.Load() != 2 {
		t.Errorf("the site got %d requests, want 2 (each page once)", site.hits.Load())
	}
	sys := trRequestFor(t, e.app.Fake, q).Messages[0].Content
	for _, want := range []string{"Cite the sources", "taken from pages found by a web search",
		"[1] Tram guide <" + site.URL + "/tram>", "Tram 28 climbs from Martim Moniz through Alfama",
		"[2] Ferries <" + site.URL + "/ferry>", "Ferries cross the Tagus"} {
		if !strings.Contains(sys, want) {
			t.Errorf("the model's system message lacks %q:\n%s", want, sys)
		}
	}
	for _, unwanted := range []string{"Site menu of links", "javascript:", "/etc/passwd", "\n[3]"} {
		if strings.Contains(sys, unwanted) {
			t.Errorf("the model's system message has %q:\n%s", unwanted, sys)
		}
	}
	sources := m.Metadata.Sources
	if len(sources) != 2 || sources[0].URL != site.URL+"/tram" || sources[0].Document != "Tram guide" || !sources[0].Cited {
		t.Fatalf("stored sources = %+v", sources)
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	for _, want := range []string{`data-route="rag"`, fmt.Sprintf(`href="/m/%d/sources/1" data-testid="citation"`, m.ID), `data-url="` + site.URL + `/tram"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the thread page lacks %q", want)
		}
	}
	if !strings.Contains(page, `name="web" value="on" checked`) {
		t.Errorf("the composer does not keep the thread's web search on")
	}
	src := e.c.Get(fmt.Sprintf("/m/%d/sources/1", m.ID))
	for _, want := range []string{`href="` + site.URL + `/tram" rel="noopener noreferrer nofollow"`, "Tram 28 climbs", "Trams of Lisbon › Alfama"} {
		if src.StatusCode != http.StatusOK || !strings.Contains(src.Body, want) {
			t.Errorf("the source page lacks %q (%d)", want, src.StatusCode)
		}
	}

	// The switch is the thread's: the next message is searched too, and
	// switching it off answers as chat without searching.
	r := e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"And the ferry?"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d", r.StatusCode)
	}
	if run, _ := e.finished(thread); run.Kind != db.RouteRAG || len(search.asked()) != 2 {
		t.Errorf("a later message: route %s, searches %d", run.Kind, len(search.asked()))
	}
	r = e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"Thanks"}, "web_present": {"1"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d", r.StatusCode)
	}
	if run, _ := e.finished(thread); run.Kind != db.RouteChat || len(search.asked()) != 2 {
		t.Errorf("switched off: route %s, searches %d", run.Kind, len(search.asked()))
	}
}

// Until an administrator sets a search service, web search is off: the
// composer's switch is disabled and, with the web_search tool on /tools
// and in the trace, says the same sentence; a form that asks for it anyway
// answers as chat, without searching.
func TestWebSearchIsOffUntilConfiguredAndEveryPageSaysWhyTheSameWay(t *testing.T) {
	t.Parallel()
	e := newWebSearchEnv(t, testenv.Options{DefaultModel: "toolie"})
	reason := strings.ReplaceAll(rag.WebSearchOff, "'", "&#39;")
	home := e.c.Get("/").Body
	if !strings.Contains(home, `name="web" value="on" disabled`) || !strings.Contains(home, `data-testid="web-reason">`+reason) {
		t.Errorf("the composer's switch is not disabled with the reason")
	}
	if tools := e.c.Get("/tools").Body; !strings.Contains(tools, reason) {
		t.Errorf("/tools does not say why web_search is unavailable")
	}
	admin := e.c.Get("/admin").Body
	if !strings.Contains(admin, `data-testid="web-search-form"`) || !strings.Contains(admin, `data-testid="web-search-off"`) {
		t.Errorf("/admin has no web search section saying it is off")
	}

	thread := e.ask("What is new today?", nil)
	run, _ := e.finished(thread)
	if run.Kind != db.RouteChat || run.Status != db.RunCompleted {
		t.Errorf("a send with the switch forced on: %s %s", run.Kind, run.Status)
	}

	// The agent is refused the tool with the same reason, in the trace.
	if err := e.app.Store.SetToolPolicy(context.Background(), e.user.ID, e.ws.ID, "web_search", true, "auto"); err != nil {
		t.Fatal(err)
	}
	r := e.c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "agent_present": {"1"}, "agent": {"on"},
		"content": {`[[tool:web_search {"query":"news"}]]`}})
	var agentThread int64
	fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &agentThread)
	run, _ = e.finished(agentThread)
	steps, err := e.app.Store.Steps(context.Background(), e.user.ID, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var call db.Step
	for _, s := range steps {
		if s.Kind == db.StepToolCall {
			call = s
		}
	}
	if call.Status != db.StepRefused || call.Data.Reason != rag.WebSearchOff {
		t.Errorf("the call = %s %q", call.Status, call.Data.Reason)
	}
	if page := e.c.Get(fmt.Sprintf("/t/%d", agentThread)).Body; !strings.Contains(page, reason) {
		t.Errorf("the trace does not say why")
	}
}

// A running server's fetcher never reaches a result on a private or local
// address: the page gets no request and the search service's summary stands
// in for it, marked as such.
func TestAResultOnAPrivateAddressIsNotFetchedByARunningServer(t *testing.T) {
	t.Parallel()
	site := newCountingSite(t)
	site.set("/secret", webPage("Router admin", "The admin password is hunter2."))
	search := newFakeSearXNG(t)
	search.set(result(site.URL+"/secret", "Router", "A summary of the router page."))
	e := newWebSearchEnv(t, testenv.Options{}) // no address let through
	e.configure(search.URL, 3)
	const q = "router admin"
	thread := e.ask(q, nil)
	run, m := e.finished(thread)
	if run.Status != db.RunCompleted {
		t.Fatalf("run %s %q", run.Status, run.Error)
	}
	if site.hits.Load() != 0 {
		t.Errorf("the private address got %d requests", site.hits.Load())
	}
	sys := trRequestFor(t, e.app.Fake, q).Messages[0].Content
	if strings.Contains(sys, "hunter2") || !strings.Contains(sys, "A summary of the router page.") || !strings.Contains(sys, "could not be read") {
		t.Errorf("the model's sources:\n%s", sys)
	}
	if len(m.Metadata.Sources) != 1 || !m.Metadata.Sources[0].Snippet {
		t.Errorf("stored sources = %+v", m.Metadata.Sources)
	}
	if src := e.c.Get(fmt.Sprintf("/m/%d/sources/1", m.ID)).Body; !strings.Contains(src, `data-testid="source-snippet"`) {
		t.Errorf("the source page does not say it is the search summary")
	}
}

// When the search service fails — down, an error status, not JSON, too
// large — the answer fails with the reason, kept after a reload, and the
// model is not asked as if it had searched. Thousands of results are
// capped to the results asked for.
func TestASearchServiceFailureIsAVisibleErrorOnTheAnswer(t *testing.T) {
	t.Parallel()
	search := newFakeSearXNG(t)
	e := newWebSearchEnv(t, testenv.Options{RAG: rag.Config{SearchTimeout: time.Second}})
	e.configure(search.URL, 0)
	huge := strings.Repeat("x", 3<<20)
	for _, c := range []struct {
		name  string
		reply func(w http.ResponseWriter, r *http.Request) bool
		want  string
	}{
		{"an error status", func(w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, "oops", http.StatusBadGateway)
			return true
		},
			"Web search failed: the search service answered 502 Bad Gateway."},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) bool { fmt.Fprint(w, "<html>hello</html>"); return true },
			"Web search failed: the search service&#39;s answer is not SearXNG&#39;s JSON (is json listed under search.formats"},
		{"too large", func(w http.ResponseWriter, r *http.Request) bool {
			fmt.Fprintf(w, `{"results":[{"url":"%s"}]}`, huge)
			return true
		},
			"Web search failed: the search service&#39;s answer is larger than 2 MB."},
		{"a timeout", func(w http.ResponseWriter, r *http.Request) bool { <-r.Context().Done(); return true },
			"Web search failed: the search service did not answer within 1 s."},
	} {
		search.mu.Lock()
		search.reply = c.reply
		search.mu.Unlock()
		q := "question with " + c.name
		thread := e.ask(q, nil)
		run, m := e.finished(thread)
		if run.Status != db.RunFailed || m.Status != db.MsgError {
			t.Errorf("%s: run %s, answer %s", c.name, run.Status, m.Status)
		}
		if page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body; !strings.Contains(page, `data-testid="error"`) || !strings.Contains(page, c.want) {
			t.Errorf("%s: the page does not show %q:\n%s", c.name, c.want, m.Error)
		}
		if n := chatRequests(e.app.Fake, q); n != 0 {
			t.Errorf("%s: the model was asked %d times", c.name, n)
		}
	}

	// A down service.
	search.Close()
	thread := e.ask("question with the service down", nil)
	if _, m := e.finished(thread); m.Status != db.MsgError || !strings.Contains(m.Error, "Web search failed: the search service could not be reached") {
		t.Errorf("down: %s %q", m.Status, m.Error)
	}
}

// Thousands of results, most not web pages, are cut to the results asked
// for before anything is fetched.
func TestThousandsOfResultsAreCappedBeforeAnyPageIsFetched(t *testing.T) {
	t.Parallel()
	site := newCountingSite(t)
	for i := range 30 {
		site.set(fmt.Sprintf("/p%d", i), webPage(fmt.Sprintf("Page %d", i), "Tram text."))
	}
	search := newFakeSearXNG(t)
	var many []map[string]any
	for i := range 5000 {
		u := fmt.Sprintf("%s/p%d", site.URL, i%30)
		if i%2 == 0 {
			u = "data:text/html,<script>x</script>"
		}
		many = append(many, result(u, "R", "tram"))
	}
	search.set(many...)
	e := newWebSearchEnv(t, testenv.Options{}, site.Server)
	e.configure(search.URL, 3)
	thread := e.ask("tram", nil)
	_, m := e.finished(thread)
	if site.hits.Load() > 3 || len(m.Metadata.Sources) != 3 {
		t.Errorf("pages fetched %d, sources %d; want at most 3 and 3", site.hits.Load(), len(m.Metadata.Sources))
	}
}

// Stop while the pages are being fetched cancels their requests; the
// answer is cancelled and the model is never asked.
func TestStopWhilePagesAreFetchedCancelsThem(t *testing.T) {
	t.Parallel()
	started, cancelled := make(chan struct{}, 4), make(chan struct{}, 4)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		cancelled <- struct{}{}
	}))
	t.Cleanup(slow.Close)
	search := newFakeSearXNG(t)
	search.set(result(slow.URL+"/a", "Slow", "slow page"))
	e := newWebSearchEnv(t, testenv.Options{}, slow)
	e.configure(search.URL, 3)
	const q = "a slow question"
	thread := e.ask(q, nil)
	testwait.Recv(t, "the page fetch", 20*time.Second, started)
	run := e.app.Store
	var id int64
	if err := run.Pool.QueryRow(context.Background(), "SELECT max(id) FROM runs WHERE thread_id = $1", thread).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if r := e.c.Post(fmt.Sprintf("/runs/%d/cancel", id), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: %d", r.StatusCode)
	}
	testwait.Recv(t, "the page fetch cancelled", 10*time.Second, cancelled)
	r, m := e.finished(thread)
	if r.Status != db.RunCancelled || m.Status != db.MsgCancelled {
		t.Errorf("run %s, answer %s", r.Status, m.Status)
	}
	if n := chatRequests(e.app.Fake, q); n != 0 {
		t.Errorf("the model was asked %d times", n)
	}
}

// The agent's web_search (enabled in the workspace) returns the numbered
// passages; the call is a tool card and the pages join the answer's
// sources.
func TestTheAgentSearchesTheWebAndListsThePagesAsSources(t *testing.T) {
	t.Parallel()
	site := newCountingSite(t)
	site.set("/tram", tramPage)
	search := newFakeSearXNG(t)
	search.set(result(site.URL+"/tram", "Trams", "Tram 28"))
	e := newWebSearchEnv(t, testenv.Options{DefaultModel: "toolie"}, site.Server)
	e.configure(search.URL, 3)
	if tools := e.c.Get("/tools").Body; !strings.Contains(tools, "Off by default: it reaches the internet.") {
		t.Errorf("web_search is not off by default once configured")
	}
	if err := e.app.Store.SetToolPolicy(context.Background(), e.user.ID, e.ws.ID, "web_search", true, "auto"); err != nil {
		t.Fatal(err)
	}
	r := e.c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "agent_present": {"1"}, "agent": {"on"},
		"content": {`Which tram? [[tool:web_search {"query":"tram Alfama"}]]`}})
	var thread int64
	fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &thread)
	run, m := e.finished(thread)
	if run.Kind != db.RouteAgent || run.Status != db.RunCompleted {
		t.Fatalf("run %s %s %q", run.Kind, run.Status, run.Error)
	}
	if got := search.asked(); len(got) != 1 || got[0] != "tram Alfama" {
		t.Errorf("searched %q", got)
	}
	if !strings.Contains(m.Content, "Last result: [1] Tram guide") || !strings.Contains(m.Content, "URL: "+site.URL+"/tram") || !strings.Contains(m.Content, "Tram 28 climbs") {
		t.Errorf("the result did not reach the model: %q", m.Content)
	}
	if raw := string(m.Metadata.Raw); !strings.Contains(raw, `"kind": "web"`) || !strings.Contains(raw, site.URL+"/tram") {
		t.Errorf("the answer does not list the page: %s", raw)
	}
	page := e.c.Get(fmt.Sprintf("/t/%d", thread)).Body
	for _, want := range []string{`data-testid="tool-call" data-tool="web_search"`, `data-testid="agent-source" data-kind="web"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// A thread with a knowledge base and the web both on gets both kinds of
// sources in one numbered list: the knowledge base's first, then the
// pages'.
func TestAKnowledgeBaseAndTheWebTogetherShareOneNumberedList(t *testing.T) {
	t.Parallel()
	site := newCountingSite(t)
	site.set("/ferry", webPage("Ferries", "Ferries cross the Tagus to Cacilhas every twenty minutes."))
	search := newFakeSearXNG(t)
	search.set(result(site.URL+"/ferry", "Ferries", "Ferries cross…"))
	e := newWebSearchEnv(t, testenv.Options{}, site.Server)
	e.configure(search.URL, 3)
	r := e.c.Post("/kb", url.Values{"name": {"Travel"}, "embed_model": {"embedder"}})
	var kbID int64
	fmt.Sscanf(r.Header.Get("Location"), "/kb/%d", &kbID)
	upload(t, e.c, kbID, map[string]string{"lisbon.md": tramGuide})
	if docs := waitDocs(t, e.app.Store, e.user.ID, kbID); len(docs) != 1 || docs[0].Status != db.DocReady {
		t.Fatalf("documents %+v", docs)
	}
	const q = "Which tram goes through Alfama, and how do ferries cross the Tagus?"
	thread := e.ask(q, url.Values{"kb_present": {"1"}, "kb": {fmt.Sprint(kbID)}})
	run, m := e.finished(thread)
	if run.Kind != db.RouteRAG || run.Status != db.RunCompleted {
		t.Fatalf("run %s %s %q", run.Kind, run.Status, run.Error)
	}
	sys := trRequestFor(t, e.app.Fake, q).Messages[0].Content
	if !strings.Contains(sys, "knowledge base(s) “Travel” and from pages found by a web search") || !strings.Contains(sys, "[1] lisbon.md") {
		t.Errorf("the system message:\n%s", sys)
	}
	ss := m.Metadata.Sources
	last := ss[len(ss)-1]
	if len(ss) < 2 || ss[0].URL != "" || last.URL != site.URL+"/ferry" || last.N != len(ss) || !strings.Contains(sys, fmt.Sprintf("[%d] Ferries <%s/ferry>", last.N, site.URL)) {
		t.Errorf("sources = %+v", ss)
	}
}
