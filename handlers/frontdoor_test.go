package handlers_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"weft/handlers"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

func randomMethod(n int) string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b)
}

func TestUnknownMethodsAreRefusedAndNeverBecomeMetricLabels(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	c := testenv.NewClient(t, ts.URL)
	c.Get("/metrics") // the scrape's own series exist from here on
	before := c.Get("/metrics").Body
	var first string
	for i := range 300 {
		m := randomMethod(2000)
		if i == 0 {
			first = m
		}
		r := c.Do(m, "/login", nil)
		if r.StatusCode != http.StatusNotImplemented || r.Header.Get("Set-Cookie") != "" {
			t.Fatalf("method %.20s… = %d (cookie %q), want 501 and no session", m, r.StatusCode, r.Header.Get("Set-Cookie"))
		}
	}
	after := c.Get("/metrics").Body
	if strings.Contains(after, first[:40]) {
		t.Fatal("a request's method became a metric label")
	}
	// Counters and gauges change value, not the set of series.
	if grow := len(after) - len(before); grow > 2048 {
		t.Fatalf("/metrics grew by %d bytes after 300 unknown methods (from %d)", grow, len(before))
	}
	// A known method that a route does not take keeps a bounded label too.
	if r := c.Do(http.MethodPut, "/login", nil); r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("PUT /login = %d, want 405", r.StatusCode)
	}
}

func TestMetricsCanRequireABearerTokenAndMoveToTheirOwnListener(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ts := testenv.Server(t, store, handlers.Config{MetricsToken: "scrape-secret"})
	c := testenv.NewClient(t, ts.URL)
	if r := c.Get("/metrics"); r.StatusCode != http.StatusUnauthorized || strings.Contains(r.Body, "go_goroutines") {
		t.Fatalf("/metrics without the token = %d", r.StatusCode)
	}
	if r := c.DoHeader(http.MethodGet, "/metrics", nil, http.Header{"Authorization": {"Bearer wrong"}}); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics with a wrong token = %d", r.StatusCode)
	}
	r := c.DoHeader(http.MethodGet, "/metrics", nil, http.Header{"Authorization": {"Bearer scrape-secret"}})
	if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "go_goroutines") {
		t.Fatalf("/metrics with the token = %d", r.StatusCode)
	}

	main, srv := testenv.ServerWithHandler(t, store, handlers.Config{MetricsElsewhere: true})
	mc := testenv.NewClient(t, main.URL)
	mc.Get("/login")
	if r := mc.Get("/metrics"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics on the main address with its own listener = %d, want 404", r.StatusCode)
	}
	own := httptest.NewServer(srv.Metrics())
	defer own.Close()
	if r := testenv.NewClient(t, own.URL).Get("/metrics"); !strings.Contains(r.Body, `route="/login"`) {
		t.Fatalf("the separate metrics handler does not count the main address's requests: %d %.300s", r.StatusCode, r.Body)
	}
}

func TestForeignHostNamesAreRefusedBeforeSessionsOrSignUp(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	withHost := func(method, path, host string, form url.Values) testenv.Response {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, app.TS.URL+path, body)
		req.Host = host
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		return c.Send(req)
	}
	// A DNS-rebinding page reaches 127.0.0.1 under its own name.
	r := withHost(http.MethodPost, "/register", "evil.example", url.Values{"email": {"first@example.com"}, "password": {password}})
	if r.StatusCode != http.StatusMisdirectedRequest || r.Header.Get("Set-Cookie") != "" {
		t.Fatalf("register under Host evil.example = %d (cookie %q), want 421 and no session", r.StatusCode, r.Header.Get("Set-Cookie"))
	}
	if n, err := app.Store.CountUsers(context.Background()); err != nil || n != 0 {
		t.Fatalf("users after a rebinding sign-up: %d, %v", n, err)
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(app.TS.URL, "http://"), ":")
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port} {
		if r := withHost(http.MethodGet, "/login", host, nil); r.StatusCode != http.StatusOK {
			t.Errorf("GET /login under Host %s = %d, want 200", host, r.StatusCode)
		}
	}
	if r := withHost(http.MethodGet, "/healthz", "10.0.0.7:8080", nil); r.StatusCode != http.StatusOK {
		t.Errorf("/healthz by address = %d: probes call by address", r.StatusCode)
	}

	pub, _ := url.Parse("https://weft.example")
	app2 := testenv.Start(t, testenv.NewDB(t), testenv.Options{HTTP: handlers.Config{PublicURL: pub}})
	c = testenv.NewClient(t, app2.TS.URL)
	app = app2
	if r := withHost(http.MethodGet, "/login", strings.TrimPrefix(app2.TS.URL, "http://"), nil); r.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("with a public URL, the listen address as Host = %d, want 421", r.StatusCode)
	}
	r = withHost(http.MethodPost, "/register", "weft.example", url.Values{"email": {"first@example.com"}, "password": {password}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("register under the public host = %d: %.300s", r.StatusCode, r.Body)
	}
	// Behind a TLS-terminating proxy the cookie is still Secure, and
	// __Host- named so no subdomain can set or shadow it.
	set := r.Header.Get("Set-Cookie")
	for _, want := range []string{"__Host-weft_session=", "Path=/", "Secure", "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(set, want) {
			t.Errorf("session cookie %q lacks %q", set, want)
		}
	}
	if strings.Contains(strings.ToLower(set), "domain=") {
		t.Errorf("session cookie %q carries a Domain", set)
	}
}

func TestSignUpChecksModeAndLimitBeforeHashing(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{HTTP: handlers.Config{SignupLimit: 2}})
	register := func(email string) testenv.Response {
		return testenv.NewClient(t, app.TS.URL).Post("/register", url.Values{"email": {email}, "password": {password}})
	}
	for _, e := range []string{"a@example.com", "b@example.com"} {
		if r := register(e); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-up %s = %d", e, r.StatusCode)
		}
	}
	hashed, _ := app.Handler.PasswordHashes()
	r := register("c@example.com")
	if r.StatusCode != http.StatusTooManyRequests || !strings.Contains(r.Body, "Too many accounts were created from your address") {
		t.Fatalf("third sign-up from one address in an hour = %d: %.300s", r.StatusCode, r.Body)
	}
	if done, _ := app.Handler.PasswordHashes(); done != hashed {
		t.Fatalf("a rate-limited sign-up hashed its password (%d hashes, was %d)", done, hashed)
	}

	closed := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	admin := testenv.NewClient(t, closed.TS.URL)
	admin.Register("admin@example.com", password)
	if r := admin.Post("/admin/signup", url.Values{"mode": {"closed"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("closing sign-up = %d", r.StatusCode)
	}
	hashed, _ = closed.Handler.PasswordHashes()
	r = testenv.NewClient(t, closed.TS.URL).Post("/register", url.Values{"email": {"late@example.com"}, "password": {password}})
	if r.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-up while closed = %d", r.StatusCode)
	}
	if done, _ := closed.Handler.PasswordHashes(); done != hashed {
		t.Fatalf("a sign-up refused as closed hashed its password (%d hashes, was %d)", done, hashed)
	}
}

func TestParallelWrongPasswordsNeverPassTheLoginLimit(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{HTTP: handlers.Config{
		LoginLimit: handlers.LoginLimit{PerAccount: 5, PerIP: 1000, Window: time.Hour},
	}})
	testenv.NewClient(t, app.TS.URL).Register("victim@example.com", password)
	before, _ := app.Handler.PasswordHashes()
	codes := make(chan int, 20)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := testenv.NewClient(t, app.TS.URL)
			<-start
			req, _ := http.NewRequest(http.MethodPost, app.TS.URL+"/login",
				strings.NewReader(url.Values{"email": {"victim@example.com"}, "password": {fmt.Sprintf("guess-%d", i)}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := c.HTTP.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[http.StatusUnauthorized] > 5 || count[http.StatusUnauthorized]+count[http.StatusTooManyRequests] != 20 {
		t.Fatalf("20 parallel wrong passwords against a limit of 5: %v (want at most 5 × 401, the rest 429)", count)
	}
	if done, _ := app.Handler.PasswordHashes(); done-before > 5 {
		t.Fatalf("%d passwords were checked against the account, limit 5", done-before)
	}
}

func TestPasswordHashingRunsInABoundedPool(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{HTTP: handlers.Config{HashSlots: 1, HashWait: time.Minute}})
	var wg sync.WaitGroup
	start := make(chan struct{})
	fails := make(chan string, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := testenv.NewClient(t, app.TS.URL)
			<-start
			req, _ := http.NewRequest(http.MethodPost, app.TS.URL+"/register",
				strings.NewReader(url.Values{"email": {fmt.Sprintf("p%d@example.com", i)}, "password": {password}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := c.HTTP.Do(req)
			if err != nil {
				fails <- err.Error()
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther {
				fails <- resp.Status
			}
		}()
	}
	close(start)
	wg.Wait()
	close(fails)
	for f := range fails {
		t.Errorf("a queued sign-up failed: %s", f)
	}
	if done, peak := app.Handler.PasswordHashes(); done != 6 || peak != 1 {
		t.Fatalf("6 sign-ups through 1 slot: %d hashes, at most %d at once (want 6, 1)", done, peak)
	}
}

// slowThread starts a thread whose first answer streams for a long time
// (its title stays provisional meanwhile) and returns its id and run id.
func slowThread(t *testing.T, app *testenv.App, c *testenv.Client) (thread, run string) {
	t.Helper()
	ws := regexp.MustCompile(`name="workspace_id" value="(\d+)"`).FindStringSubmatch(c.Get("/").Body)
	r := c.Post("/t", url.Values{"workspace_id": {ws[1]}, "content": {"[[slow:200ms]][[tokens:5000]]"}})
	loc := regexp.MustCompile(`^/t/(\d+)`).FindStringSubmatch(r.Header.Get("Location"))
	if r.StatusCode != http.StatusSeeOther || loc == nil {
		t.Fatalf("new thread = %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	m := runIDPattern.FindStringSubmatch(c.Get("/t/" + loc[1]).Body)
	if m == nil {
		t.Fatal("the new thread shows no live run")
	}
	return loc[1], m[1]
}

func TestTitleWaitsAreForOwnThreadsOnlyAndEndWithTheRequest(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	owner := testenv.NewClient(t, app.TS.URL)
	owner.Register("owner@example.com", password)
	thread, _ := slowThread(t, app, owner)
	intruder := testenv.NewClient(t, app.TS.URL)
	intruder.Register("intruder@example.com", password)
	for _, id := range []string{thread, "999999", "1", "2"} {
		if r := intruder.Get("/t/" + id + "/title"); r.StatusCode != http.StatusNotFound {
			t.Fatalf("another user's title wait on %s = %d, want 404", id, r.StatusCode)
		}
	}
	if n := app.RT.TitleWaiters(); n != 0 {
		t.Fatalf("foreign title requests left %d waiters", n)
	}
	// The owner's own wait is registered, and removed when the request ends.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, app.TS.URL+"/t/"+thread+"/title", nil)
		if resp, err := owner.HTTP.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	testwait.For(t, "the owner's title wait", 10*time.Second, func() bool { return app.RT.TitleWaiters() == 1 })
	cancel()
	<-done
	testwait.For(t, "the waiter to be removed", 10*time.Second, func() bool { return app.RT.TitleWaiters() == 0 })
}

// openStream opens a run's event stream and returns its status, a reader
// of its lines, and a function that closes it.
func openStream(t *testing.T, c *testenv.Client, run string) (int, *bufio.Reader, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/runs/"+run+"/events", nil)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open stream: %v", err)
	}
	return resp.StatusCode, bufio.NewReader(resp.Body), func() { cancel(); resp.Body.Close() }
}

func TestEventStreamsAreCappedPerUserAndAClosedOneFreesItsSlot(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{HTTP: handlers.Config{MaxStreamsPerUser: 2}})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("tabs@example.com", password)
	_, run := slowThread(t, app, c)
	s1, _, close1 := openStream(t, c, run)
	defer close1()
	s2, _, close2 := openStream(t, c, run)
	defer close2()
	if s1 != http.StatusOK || s2 != http.StatusOK {
		t.Fatalf("two streams = %d, %d", s1, s2)
	}
	s3, body, close3 := openStream(t, c, run)
	b, _ := io.ReadAll(body)
	close3()
	if s3 != http.StatusTooManyRequests || !strings.Contains(string(b), "Too many live views") {
		t.Fatalf("a third stream over a cap of 2 = %d: %.300s", s3, b)
	}
	// Another user is not affected by this one's streams.
	other := testenv.NewClient(t, app.TS.URL)
	other.Register("other@example.com", password)
	_, otherRun := slowThread(t, app, other)
	so, _, closeo := openStream(t, other, otherRun)
	closeo()
	if so != http.StatusOK {
		t.Fatalf("another user's stream = %d", so)
	}
	close1()
	testwait.For(t, "the closed stream's slot", 10*time.Second, func() bool { return app.Handler.OpenStreams() == 1 })
	s4, _, close4 := openStream(t, c, run)
	defer close4()
	if s4 != http.StatusOK {
		t.Fatalf("a stream after closing one = %d", s4)
	}
}

func TestLoggingOutEndsTheSessionsOpenEventStreams(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("leaving@example.com", password)
	_, run := slowThread(t, app, c)
	status, body, closeStream := openStream(t, c, run)
	defer closeStream()
	if status != http.StatusOK {
		t.Fatalf("stream = %d", status)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, body) // returns when the server ends the response
		ended <- err
	}()
	if r := c.Post("/logout", nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout = %d", r.StatusCode)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the stream broke instead of ending: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream kept running 5 s after logout")
	}
	testwait.For(t, "the stream's slot to be freed", 10*time.Second, func() bool { return app.Handler.OpenStreams() == 0 })
}

func TestTheFirstAccountNeedsTheSetupTokenOnlyWhenOneWasIssued(t *testing.T) {
	t.Parallel()
	// Loopback: no token is issued, and the first account registers as before.
	loop := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	lc := testenv.NewClient(t, loop.TS.URL)
	if strings.Contains(lc.Get("/register").Body, `name="setup_token"`) {
		t.Fatal("a loopback install asks for a setup token")
	}
	lc.Register("first@example.com", password)

	// Beyond loopback: main issues a token at start and prints it.
	store := testenv.NewDB(t)
	ctx := context.Background()
	token, err := handlers.IssueSetupToken(ctx, store)
	if err != nil || len(token) < 20 {
		t.Fatalf("setup token %q, %v", token, err)
	}
	app := testenv.Start(t, store, testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	if page := c.Get("/register").Body; !strings.Contains(page, `name="setup_token"`) {
		t.Fatalf("/register shows no setup-token field for the first account: %.500s", page)
	}
	hashed, _ := app.Handler.PasswordHashes()
	for _, tok := range []string{"", "not-the-token"} {
		r := c.Post("/register", url.Values{"email": {"squatter@example.com"}, "password": {password}, "setup_token": {tok}})
		if r.StatusCode != http.StatusForbidden || !strings.Contains(r.Body, "setup token") || c.SessionCookie() != "" {
			t.Fatalf("first sign-up with token %q = %d, want 403", tok, r.StatusCode)
		}
	}
	if n, _ := store.CountUsers(ctx); n != 0 {
		t.Fatalf("%d accounts after refused first sign-ups", n)
	}
	if done, _ := app.Handler.PasswordHashes(); done != hashed {
		t.Fatal("a first sign-up without the setup token hashed its password")
	}
	r := c.Post("/register", url.Values{"email": {"admin@example.com"}, "password": {password}, "setup_token": {token}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("first sign-up with the token = %d: %.300s", r.StatusCode, r.Body)
	}
	if u, err := store.UserByEmail(ctx, "admin@example.com"); err != nil || !u.IsAdmin() {
		t.Fatalf("the token's account is not the administrator: %+v, %v", u, err)
	}
	// Single use: the token is gone, and later accounts are members without one.
	if needed, valid, err := store.SetupToken(ctx, token); err != nil || needed || valid {
		t.Fatalf("after the first account: token needed %v, still valid %v, %v", needed, valid, err)
	}
	if again, _ := handlers.IssueSetupToken(ctx, store); again != "" {
		t.Fatal("a token was issued although an account exists")
	}
	testenv.NewClient(t, app.TS.URL).Register("member@example.com", password)
}

func TestALogoutOnOneInstanceEndsTheSessionsStreamsOnAnother(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	a := testenv.Start(t, store, testenv.Options{})
	b := testenv.Start(t, store, testenv.Options{HTTP: handlers.Config{StreamSweep: 100 * time.Millisecond}})
	ca := testenv.NewClient(t, a.TS.URL)
	ca.Register("roaming@example.com", password)
	_, run := slowThread(t, a, ca)
	cb := testenv.NewClient(t, b.TS.URL)
	cb.HTTP.Jar = ca.HTTP.Jar // one browser, a load balancer in front
	status, body, closeStream := openStream(t, cb, run)
	defer closeStream()
	if status != http.StatusOK {
		t.Fatalf("stream on the second instance = %d", status)
	}
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, body); close(ended) }()
	if r := ca.Post("/logout", nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout = %d", r.StatusCode)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the other instance's stream kept running 5 s after logout")
	}
}
