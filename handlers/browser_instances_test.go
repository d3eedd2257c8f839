package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// A person's browser behind a load balancer in front of two Weft instances
// on one database: the page, its event streams and its Stop reach
// instances that do not run the model. The balancer here is steered, not
// lucky: it looks up in the database which instance runs the answer a
// request is about and sends the request where the test says (to that
// instance or to the other one), and it logs who served what.

// side is where the steering proxy sends a request about a run: to the
// instance running it, or to the other one.
type side int

const (
	toRunner side = iota
	toOther
)

// hop is one request the steering proxy passed on.
type hop struct {
	method, path string
	to           string // the instance that served it
	at           time.Time
	status       int // 0 until its response headers came back
}

// steering is a reverse proxy in front of Weft instances named "A" and
// "B". Sends (POST /t, POST /t/{id}/messages) go to A and a thread page's
// live watch (GET /t/{id}/watch) to B, so that what a send notes reaches
// the watch from the other instance; a thread page, a run's event stream
// and its Stop go to the side the test set for them, relative to the
// instance the database names as running the run (for a thread page: the
// thread's running run; with none, like the rest); every other request
// alternates between the two.
type steering struct {
	ts    *httptest.Server
	store *db.DB
	apps  map[string]*testenv.App

	mu                 sync.Mutex
	page, stream, stop side
	hops               []hop
	misrouted          []string // requests the proxy could not steer as told
	next               int
}

type hopKey struct{}

var (
	stSendPath   = regexp.MustCompile(`^/t(/\d+/messages)?$`)
	stPagePath   = regexp.MustCompile(`^/t/(\d+)$`)
	stWatchPath  = regexp.MustCompile(`^/t/\d+/watch$`)
	stEventsPath = regexp.MustCompile(`^/runs/(\d+)/events$`)
	stCancelPath = regexp.MustCompile(`^/runs/(\d+)/cancel$`)
)

func newSteering(t *testing.T, store *db.DB, apps map[string]*testenv.App) *steering {
	t.Helper()
	s := &steering{store: store, apps: apps}
	targets := map[string]*url.URL{}
	for name, a := range apps {
		targets[name], _ = url.Parse(a.TS.URL)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			i := r.In.Context().Value(hopKey{}).(int)
			s.mu.Lock()
			to := s.hops[i].to
			s.mu.Unlock()
			r.SetURL(targets[to])
			r.Out.Host = r.In.Host // Weft checks the Host the browser used
		},
		ModifyResponse: func(resp *http.Response) error {
			i := resp.Request.Context().Value(hopKey{}).(int)
			s.mu.Lock()
			s.hops[i].status = resp.StatusCode
			s.mu.Unlock()
			return nil
		},
		FlushInterval: -1, // event streams pass at once
	}
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to := s.route(r)
		s.mu.Lock()
		s.hops = append(s.hops, hop{method: r.Method, path: r.URL.Path, to: to, at: time.Now()})
		i := len(s.hops) - 1
		s.mu.Unlock()
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), hopKey{}, i)))
	}))
	t.Cleanup(s.ts.Close)
	return s
}

// steer sets where thread pages, event streams and Stops go from now on.
func (s *steering) steer(page, stream, stop side) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.page, s.stream, s.stop = page, stream, stop
}

func (s *steering) route(r *http.Request) string {
	p := r.URL.Path
	s.mu.Lock()
	page, stream, stop := s.page, s.stream, s.stop
	s.mu.Unlock()
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	if post && stSendPath.MatchString(p) {
		return "A"
	}
	if get && stWatchPath.MatchString(p) {
		return "B"
	}
	if m := stPagePath.FindStringSubmatch(p); get && m != nil {
		if runner := s.runnerOf(r.Context(), `SELECT instance_id FROM runs WHERE thread_id = $1 AND status = 'running' ORDER BY id DESC LIMIT 1`, m[1]); runner != "" {
			return s.pick(runner, page)
		}
	}
	if m := stEventsPath.FindStringSubmatch(p); get && m != nil {
		return s.pickRun(r, m[1], stream)
	}
	if m := stCancelPath.FindStringSubmatch(p); post && m != nil {
		return s.pickRun(r, m[1], stop)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return []string{"A", "B"}[s.next%2]
}

// pickRun steers a request about run id. A run's stream may be asked for
// just before an instance claims the run (the thread's live watch draws
// the answer as soon as the send commits), so the proxy waits a little for
// the claim; a run no instance runs by then is noted as misrouted (the test
// asserts there are none).
func (s *steering) pickRun(r *http.Request, id string, sd side) string {
	var runner string
	testwait.Until(10*time.Second, func() bool {
		runner = s.runnerOf(r.Context(), `SELECT instance_id FROM runs WHERE id = $1`, id)
		return runner != "" || r.Context().Err() != nil
	})
	if runner == "" {
		s.mu.Lock()
		s.misrouted = append(s.misrouted, r.Method+" "+r.URL.Path+": the run has no instance")
		s.mu.Unlock()
		return "A"
	}
	return s.pick(runner, sd)
}

func (s *steering) pick(runner string, sd side) string {
	if sd == toRunner {
		return runner
	}
	return stOther(runner)
}

// runnerOf reads one instance_id ("" when there is no such row).
func (s *steering) runnerOf(ctx context.Context, query, id string) string {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return ""
	}
	var runner string
	if err := s.store.Pool.QueryRow(ctx, query, n).Scan(&runner); err != nil {
		return ""
	}
	return runner
}

// served lists the instances that served the requests matching method and
// path, in order.
func (s *steering) served(method, path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, h := range s.hops {
		if h.method == method && h.path == path {
			out = append(out, h.to)
		}
	}
	return out
}

// find returns the first hop matching method and path (ok false: none yet).
func (s *steering) find(method, path string) (hop, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hops {
		if h.method == method && h.path == path {
			return h, true
		}
	}
	return hop{}, false
}

func stOther(instance string) string { return map[string]string{"A": "B", "B": "A"}[instance] }

func TestBrowserTwoInstancesBehindAProxyStreamResumeAndStopAnAnswerTheyDoNotRun(t *testing.T) {
	t.Parallel()
	store, fake, apps := twoInstances(t)
	lb := newSteering(t, store, apps)
	u := chTab{t: t, ctx: testenv.Browser(t, 60*time.Second)}
	u.do("register through the proxy",
		chromedp.Navigate(lb.ts.URL+"/register"),
		typeInto(`input[name=email]`, "roaming@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	runnerOf := func(run int64) string {
		t.Helper()
		var r db.Run
		if err := store.Pool.QueryRow(context.Background(), "SELECT instance_id, status FROM runs WHERE id = $1", run).Scan(&r.InstanceID, &r.Status); err != nil {
			t.Fatal(err)
		}
		if r.InstanceID != "A" && r.InstanceID != "B" {
			t.Fatalf("run %d is %s on instance %q", run, r.Status, r.InstanceID)
		}
		return r.InstanceID
	}
	// The page's live watch is one stream on B, besides the run's.
	watches := map[string]int{"A": 0, "B": 1}
	streamsOn := func(what, instance string, run int64) {
		t.Helper()
		testwait.For(t, what+": the browser's one run stream open on "+instance+" only", chWaitLimit, func() bool {
			return apps[instance].Handler.OpenStreams() == 1+watches[instance] &&
				apps[stOther(instance)].Handler.OpenStreams() == watches[stOther(instance)]
		})
		if got := lb.served(http.MethodGet, fmt.Sprintf("/runs/%d/events", run)); len(got) == 0 || got[len(got)-1] != instance {
			t.Fatalf("%s: run %d's event streams were served by %q, want the last by %s", what, run, got, instance)
		}
	}
	streamText := `(` + chLast + `?.querySelector('.stream-text')?.textContent ?? "")`
	runID := func() int64 {
		t.Helper()
		id, err := strconv.ParseInt(u.str(chLast+`.dataset.runId`), 10, 64)
		if err != nil {
			t.Fatalf("the last answer has no run id%s", u.state())
		}
		return id
	}

	// 1. The answer is held at the model until the page, served by the
	// instance running it, follows it from the other instance.
	const n = 50
	release := chHold(t, fake, nil)
	lb.steer(toRunner, toOther, toOther)
	u.do("start a thread",
		setValue(`[data-testid=composer] textarea[name=content]`, fmt.Sprintf("[[slow:200ms]][[tokens:%d]] across instances", n)),
		click(`[data-testid=send]`),
		waitFor(`location.pathname.startsWith("/t/") && `+chLast),
	)
	thread, run1 := u.threadID(), runID()
	runner := runnerOf(run1)
	follower := stOther(runner)
	if got := lb.served(http.MethodGet, fmt.Sprintf("/t/%d", thread)); len(got) != 1 || got[0] != runner {
		t.Fatalf("the thread page was served by %q, want once by %s, which runs the answer", got, runner)
	}
	streamsOn("first answer", follower, run1)
	u.wait("streaming with a visible stop", chLast+`.dataset.status === "streaming" && `+
		chLast+`.querySelector('[data-testid=stop]')?.checkVisibility()`)
	u.watchStream()
	release()

	// The page shows exactly the tokens the model has sent, in order: a
	// moment when the model's count is the same before and after reading
	// the page, and the page holds exactly those tokens.
	sent := func() int {
		if reqs := chStreamed(fake); len(reqs) > 0 {
			return reqs[0].ChunksSent
		}
		return 0
	}
	var shown string
	var before, after int
	if !testwait.Until(chWaitLimit, func() bool {
		before = sent()
		shown = u.str(streamText)
		after = sent()
		return before == after && before >= 5 && before < n && shown == answerTokens(1, before)
	}) {
		t.Fatalf("the page never showed exactly the tokens the model had sent: last %q with %d..%d sent%s", shown, before, after, u.state())
	}
	t.Logf("run %d on %s, page from %s, stream from %s: the page shows exactly the %d tokens sent", run1, runner, runner, follower, before)

	// 2. Reload mid-answer: the page now comes from the instance that does
	// not run the answer, and its stream from the one that does.
	lb.steer(toOther, toRunner, toOther)
	u.do("reload", chromedp.Reload(), waitFor(chLast+` && document.querySelector('[data-testid=composer]')`))
	u.watchStream()
	if got := lb.served(http.MethodGet, fmt.Sprintf("/t/%d", thread)); len(got) != 2 || got[1] != follower {
		t.Fatalf("the thread page was served by %q, want the reload by %s", got, follower)
	}
	streamsOn("after the reload", runner, run1)
	u.wait("the text so far is back", fmt.Sprintf(`%s.length >= %d || %s.dataset.status !== "streaming"`, streamText, len(shown), chLast))
	now := u.str(streamText)
	if !u.yes(chLast + `.dataset.status === "streaming"`) {
		t.Fatalf("the answer ended before the reloaded page showed it streaming; the machine is too slow for this test%s", u.state())
	}
	if !strings.HasPrefix(now, shown) {
		t.Fatalf("after the reload the text %q does not continue the text before %q", now, shown)
	}
	u.wait("grows live after the reload", fmt.Sprintf(`%s.length > %d`, streamText, len(now)))
	u.wait("complete", chLast+`.dataset.status === "complete"`)
	if got := chWords(u.str(chBody(chLast))); got != chToks(n) {
		t.Fatalf("final text = %q, want %q (each token once, in order)", got, chToks(n))
	}
	if seen := u.seen(answerTokens(1, n)); len(seen) < 2 {
		t.Errorf("after the reload the text changed only %d times (%q); want it to stream", len(seen), seen)
	}
	if k := u.num(chAnswers + `.length`); k != 1 {
		t.Errorf("%d answers on the page, want 1", k)
	}
	if reqs := chStreamed(fake); len(reqs) != 1 || !reqs[0].Completed || reqs[0].Cancelled {
		t.Fatalf("the model was asked %d times (%+v), want once, completed", len(reqs), reqs)
	}

	// 3. Stop a second answer from the instance that does not run it; its
	// stream comes from there too.
	lb.steer(toOther, toOther, toOther)
	u.send("[[slow:100ms]][[tokens:200]] stop me from the other instance")
	run2 := runID()
	runner2 := runnerOf(run2)
	streamsOn("second answer", stOther(runner2), run2)
	u.wait("a few tokens of the second answer", chBody(chLast)+`.includes("tok3 ") && `+chLast+`.dataset.status === "streaming"`)
	cancelled := make(chan time.Time, 1)
	go func() {
		if fake.WaitCancelled(u.ctx, 1) == nil {
			cancelled <- time.Now()
		}
	}()
	cancelPath := fmt.Sprintf("/runs/%d/cancel", run2)
	u.do("click stop", click(`[data-testid=message][data-role=assistant] [data-testid=stop]`))
	var stop hop
	testwait.For(t, "the Stop request at the proxy", chWaitLimit, func() bool {
		var ok bool
		stop, ok = lb.find(http.MethodPost, cancelPath)
		return ok
	})
	at := testwait.Recv(t, "the model request to be cancelled", chWaitLimit, cancelled)
	if stop.to == runner2 {
		t.Fatalf("Stop was served by %s, which runs the answer", stop.to)
	}
	if d := at.Sub(stop.at); d > time.Second {
		t.Fatalf("Stop on %s cancelled the model on %s %v after it arrived, want within 1 s", stop.to, runner2, d)
	} else {
		t.Logf("Stop on %s → model cancelled on %s: %v", stop.to, runner2, d)
	}
	u.wait("stopped", chLast+`.dataset.status === "cancelled"`)
	if st := lb.served(http.MethodPost, cancelPath); len(st) != 1 {
		t.Errorf("Stop reached the instances %q, want once", st)
	}
	lb.mu.Lock()
	for _, h := range lb.hops {
		if h.method == http.MethodPost && h.path == cancelPath && (h.status < 200 || h.status >= 300) {
			t.Errorf("Stop answered %d", h.status)
		}
	}
	lb.mu.Unlock()
	text := chWords(u.str(chBody(chLast)))
	if k := chTokCount(t, text); k < 3 || k >= 200 {
		t.Fatalf("the stopped answer has %d tokens (%q), want a partial answer", k, text)
	}
	if u.yes(`document.querySelector('[data-testid=stop]') || document.querySelector('[data-testid=run-status]')`) {
		t.Errorf("a stop button or run status is still shown after stopping%s", u.state())
	}
	var status string
	if err := store.Pool.QueryRow(context.Background(), "SELECT status FROM runs WHERE id = $1", run2).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != db.RunCancelled {
		t.Errorf("the stopped run is %s, want %s", status, db.RunCancelled)
	}
	if reqs := chStreamed(fake); len(reqs) != 2 || !reqs[1].Cancelled || !strings.Contains(chLastUser(reqs[1].Chat), "stop me") {
		t.Errorf("the model saw %d streamed requests, want the second one cancelled: %+v", len(reqs), reqs)
	}

	// Both instances served the page's requests, and the proxy steered
	// every request about a run as told.
	lb.mu.Lock()
	defer lb.mu.Unlock()
	count := map[string]int{}
	for _, h := range lb.hops {
		count[h.to]++
	}
	if count["A"] == 0 || count["B"] == 0 {
		t.Errorf("requests served: %v, want both instances", count)
	}
	if len(lb.misrouted) > 0 {
		t.Errorf("requests the proxy could not steer: %q", lb.misrouted)
	}
	t.Logf("requests served: %v", count)
}
