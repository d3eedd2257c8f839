package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"weft/db"
	"weft/handlers"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// liveFixture is one user signed in twice (two tabs, or two devices: each
// client has a session of its own) with a thread whose first answer is
// complete.
type liveFixture struct {
	t          *testing.T
	app        *testenv.App
	user       db.User
	tab1, tab2 *testenv.Client
	thread     int64
}

func newLiveFixture(t *testing.T, o testenv.Options) *liveFixture {
	t.Helper()
	app := testenv.Start(t, testenv.NewDB(t), o)
	return newLiveFixtureOn(t, app, app)
}

// newLiveFixtureOn is newLiveFixture with the first tab on app and the
// second on other (instances on one database).
func newLiveFixtureOn(t *testing.T, app, other *testenv.App) *liveFixture {
	t.Helper()
	f := &liveFixture{t: t, app: app, tab1: testenv.NewClient(t, app.TS.URL), tab2: testenv.NewClient(t, other.TS.URL)}
	f.tab1.Register("live@example.com", password)
	f.tab2.Login("live@example.com", password)
	var err error
	if f.user, err = app.Store.UserByEmail(context.Background(), "live@example.com"); err != nil {
		t.Fatal(err)
	}
	ws := regexp.MustCompile(`name="workspace_id" value="(\d+)"`).FindStringSubmatch(f.tab1.Get("/").Body)
	r := f.tab1.Post("/t", url.Values{"workspace_id": {ws[1]}, "content": {"hello"}})
	loc := regexp.MustCompile(`^/t/(\d+)`).FindStringSubmatch(r.Header.Get("Location"))
	if r.StatusCode != http.StatusSeeOther || loc == nil {
		t.Fatalf("new thread = %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	f.thread, _ = strconv.ParseInt(loc[1], 10, 64)
	waitIdle(t, app.Store, f.user.ID, f.thread)
	return f
}

// leaf is the thread's active leaf now.
func (f *liveFixture) leaf() int64 {
	f.t.Helper()
	th, err := f.app.Store.Thread(context.Background(), f.user.ID, f.thread)
	if err != nil || th.ActiveLeafID == nil {
		f.t.Fatalf("thread %d: %+v, %v", f.thread, th, err)
	}
	return *th.ActiveLeafID
}

func (f *liveFixture) path(rest string) string { return fmt.Sprintf("/t/%d%s", f.thread, rest) }

// liveView applies a thread's live watch as the page does.
type liveView struct {
	mu      sync.Mutex
	appends []roomEvent // thread-append events, in order
	notices []string    // thread-changed payloads, in order
	gone    string
	ended   bool
}

// watchLive opens the live watch of f's thread in c from the page's last
// message leaf (and its run, 0: none).
func (f *liveFixture) watchLive(c *testenv.Client, leaf, run int64, header http.Header) *liveView {
	f.t.Helper()
	v := &liveView{}
	readStream(f.t, c, f.path(fmt.Sprintf("/watch?leaf=%d&run=%d", leaf, run)), header, func(ev roomEvent) {
		v.mu.Lock()
		defer v.mu.Unlock()
		switch ev.name {
		case "thread-append":
			v.appends = append(v.appends, ev)
		case "thread-changed":
			v.notices = append(v.notices, ev.data)
		case "thread-gone":
			v.gone = ev.data
		}
	}, func() { v.mu.Lock(); v.ended = true; v.mu.Unlock() })
	return v
}

func (v *liveView) state(fn func(v *liveView) bool) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return fn(v)
}

// appended waits for n appends and returns them.
func (v *liveView) appended(t *testing.T, n int) []roomEvent {
	t.Helper()
	var out []roomEvent
	testwait.For(t, fmt.Sprintf("%d messages appended", n), 0, func() bool {
		return v.state(func(v *liveView) bool { out = append([]roomEvent(nil), v.appends...); return len(out) >= n })
	})
	return out
}

var (
	liveItemID   = regexp.MustCompile(`<li id="m(\d+)"`)
	liveRunOf    = regexp.MustCompile(`sse-connect="(/runs/(\d+)/events[^"]*)"`)
	liveStatusOf = regexp.MustCompile(`data-status="(\w+)"`)
)

// items are the ids of the messages (li#m…) in an HTML fragment.
func items(html string) []string {
	var out []string
	for _, m := range liveItemID.FindAllStringSubmatch(html, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestASendInOneTabAppearsOnTheOtherTabsLiveWatchAndItsAnswerStreamsThere(t *testing.T) {
	t.Parallel()
	f := newLiveFixture(t, testenv.Options{})
	leaf := f.leaf()
	other := f.watchLive(f.tab2, leaf, 0, nil)
	sender := f.watchLive(f.tab1, leaf, 0, nil)

	r := f.tab1.HTMX(f.path("/messages"), url.Values{"content": {"count with me [[tokens:30]][[slow:10ms]]"}})
	sent := items(r.Body)
	if r.StatusCode != http.StatusOK || len(sent) != 2 {
		t.Fatalf("the send = %d, items %v: %.400s", r.StatusCode, sent, r.Body)
	}

	got := other.appended(t, 2)
	if ids := []string{items(got[0].data)[0], items(got[1].data)[0]}; ids[0] != sent[0] || ids[1] != sent[1] {
		t.Fatalf("the other tab got %v, want the message and its answer %v", ids, sent)
	}
	if !strings.Contains(got[0].data, "count with me") || !strings.Contains(got[0].data, `data-role="user"`) {
		t.Errorf("the message appended: %.400s", got[0].data)
	}
	if got[0].id != sent[0] || got[1].id != sent[1] {
		t.Errorf("event ids %q %q, want the message ids (a reconnection resumes after them)", got[0].id, got[1].id)
	}
	// The answer is its placeholder: it opens its own run stream, as on
	// the tab that sent it.
	run := liveRunOf.FindStringSubmatch(got[1].data)
	if run == nil || !strings.Contains(got[1].data, `data-status="streaming"`) {
		t.Fatalf("the answer was not appended as a placeholder with its run stream: %.600s", got[1].data)
	}
	text, done := streamedText(readEvents(t, f.tab2, run[1], nil))
	if want := answerTokens(1, 30); strings.TrimSpace(text) != strings.TrimSpace(want) || !strings.Contains(done, `data-status="complete"`) {
		t.Fatalf("the other tab's answer streamed %q and ended %.300s; want %q, complete", text, done, want)
	}

	// The tab that sent gets the same messages on its own watch: the same
	// ids as its send drew, so the page shows each once (app.js).
	mine := sender.appended(t, 2)
	if a, b := items(mine[0].data)[0], items(mine[1].data)[0]; a != sent[0] || b != sent[1] {
		t.Errorf("the sending tab's watch appended %s, %s; want %v", a, b, sent)
	}
	other.state(func(v *liveView) bool {
		if len(v.notices) != 0 {
			t.Errorf("a send that continues the page showed the notice %q", v.notices)
		}
		return true
	})
}

func TestASendOnOneInstanceAppearsOnAThreadWatchServedByAnother(t *testing.T) {
	t.Parallel()
	_, _, apps := twoInstances(t)
	f := newLiveFixtureOn(t, apps["A"], apps["B"])
	v := f.watchLive(f.tab2, f.leaf(), 0, nil) // served by B
	r := f.tab1.HTMX(f.path("/messages"), url.Values{"content": {"from A"}})
	sent := items(r.Body)
	if len(sent) != 2 {
		t.Fatalf("the send on A = %d: %.400s", r.StatusCode, r.Body)
	}
	got := v.appended(t, 2)
	if a, b := items(got[0].data)[0], items(got[1].data)[0]; a != sent[0] || b != sent[1] {
		t.Fatalf("the watch on B appended %s, %s; want %v", a, b, sent)
	}
}

func TestAnotherUsersThreadWatchIsANotFound(t *testing.T) {
	t.Parallel()
	f := newLiveFixture(t, testenv.Options{})
	stranger := testenv.NewClient(t, f.app.TS.URL)
	stranger.Register("stranger@example.com", password)
	for _, path := range []string{f.path("/watch?leaf=1&run=0"), fmt.Sprintf("/t/%d/watch", f.thread+1000)} {
		if r := stranger.Get(path); r.StatusCode != http.StatusNotFound || strings.Contains(r.Body, "live@example.com") {
			t.Fatalf("a stranger's GET %s = %d", path, r.StatusCode)
		}
	}
}

func TestABranchSwitchInAnotherTabShowsANoticeInsteadOfRedrawingThePage(t *testing.T) {
	t.Parallel()
	f := newLiveFixture(t, testenv.Options{})
	answer := f.leaf()
	v := f.watchLive(f.tab2, answer, 0, nil)

	// Another tab answers again: the thread's branch now ends in a
	// sibling of the answer this page shows.
	if r := f.tab1.Post(fmt.Sprintf("/m/%d/retry", answer), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("regenerate = %d", r.StatusCode)
	}
	testwait.For(t, "the notice", 0, func() bool {
		return v.state(func(v *liveView) bool { return len(v.notices) > 0 })
	})
	v.state(func(v *liveView) bool {
		n := v.notices[0]
		if !strings.Contains(n, "This thread changed in another tab.") || !strings.Contains(n, fmt.Sprintf(`href="/t/%d"`, f.thread)) {
			t.Errorf("the notice is %q", n)
		}
		return true
	})
	waitIdle(t, f.app.Store, f.user.ID, f.thread)

	// Back on the branch the page shows: the notice goes.
	if r := f.tab1.Post(fmt.Sprintf("/m/%d/select", answer), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("select = %d", r.StatusCode)
	}
	testwait.For(t, "the notice to go", 0, func() bool {
		return v.state(func(v *liveView) bool { return len(v.notices) == 2 && v.notices[1] == "" })
	})
	v.state(func(v *liveView) bool {
		if len(v.appends) != 0 {
			t.Errorf("the page was appended %d messages of another branch", len(v.appends))
		}
		return true
	})
}

func TestAnAnswerContinuedInAnotherTabComesBackAsItsPlaceholder(t *testing.T) {
	t.Parallel()
	f := newLiveFixture(t, testenv.Options{})
	run := sendInThread(t, f.tab1, strconv.FormatInt(f.thread, 10), "[[slow:50ms]][[tokens:400]] long")
	testwait.For(t, "the answer to start", 0, func() bool {
		r, err := f.app.Store.Run(context.Background(), f.user.ID, mustInt(t, run))
		return err == nil && r.Status == db.RunRunning
	})
	if r := f.tab1.Post("/runs/"+run+"/cancel", nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("stop = %d", r.StatusCode)
	}
	waitIdle(t, f.app.Store, f.user.ID, f.thread)
	stopped := f.leaf()
	v := f.watchLive(f.tab2, stopped, 0, nil) // the page shows it stopped

	if r := f.tab1.Post(fmt.Sprintf("/m/%d/continue", stopped), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("continue = %d", r.StatusCode)
	}
	got := v.appended(t, 1)[0]
	again := liveRunOf.FindStringSubmatch(got.data)
	if ids := items(got.data); len(ids) != 1 || ids[0] != strconv.FormatInt(stopped, 10) || again == nil || again[2] == run {
		t.Fatalf("the stopped answer came back as %.600s; want its placeholder with a new run", got.data)
	}
	if s := liveStatusOf.FindStringSubmatch(got.data); s == nil || s[1] != "streaming" {
		t.Fatalf("the answer came back %v", s)
	}
}

func TestADeletedThreadEndsItsOpenWatchesSayingSo(t *testing.T) {
	t.Parallel()
	f := newLiveFixture(t, testenv.Options{})
	v := f.watchLive(f.tab2, f.leaf(), 0, nil)
	if r := f.tab1.Post(f.path("/delete"), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete = %d", r.StatusCode)
	}
	testwait.For(t, "the watch to end", 0, func() bool { return v.state(func(v *liveView) bool { return v.ended }) })
	if !v.state(func(v *liveView) bool { return strings.Contains(v.gone, "This thread was deleted") }) {
		t.Fatal("the watch ended without saying why")
	}
}

func TestAThreadWatchResumesAfterTheLastEventIDWithoutRepeatingMessages(t *testing.T) {
	t.Parallel()
	f := newLiveFixture(t, testenv.Options{})
	start := f.leaf()
	sendInThread(t, f.tab1, strconv.FormatInt(f.thread, 10), "first")
	waitIdle(t, f.app.Store, f.user.ID, f.thread)
	seen := f.leaf()
	// The browser reconnects by itself with the last id it got; the page's
	// own URL still names where it started.
	v := f.watchLive(f.tab2, start, 0, http.Header{"Last-Event-Id": {strconv.FormatInt(seen, 10)}})
	r := f.tab1.HTMX(f.path("/messages"), url.Values{"content": {"second"}})
	want := items(r.Body)
	got := v.appended(t, 2)
	if a, b := items(got[0].data)[0], items(got[1].data)[0]; a != want[0] || b != want[1] {
		t.Fatalf("the resumed watch appended %s, %s; want only the new %v", a, b, want)
	}
}

func TestAThreadWatchCountsAgainstTheStreamCapAndEndsAtLogout(t *testing.T) {
	t.Parallel()
	f := newLiveFixture(t, testenv.Options{HTTP: handlers.Config{MaxStreamsPerUser: 1}})
	leaf := f.leaf()
	v := f.watchLive(f.tab1, leaf, 0, nil)
	if r := openOnly(t, f.tab2, f.path(fmt.Sprintf("/watch?leaf=%d&run=0", leaf))); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a second watch over a cap of 1 = %d", r.StatusCode)
	}
	if r := f.tab1.Post("/logout", nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout = %d", r.StatusCode)
	}
	testwait.For(t, "the signed-out tab's watch to end", 0, func() bool { return v.state(func(v *liveView) bool { return v.ended }) })
	testwait.For(t, "its slot to be free", 10*time.Second, func() bool { return f.app.Handler.OpenStreams() == 0 })
	if r := openOnly(t, f.tab2, f.path(fmt.Sprintf("/watch?leaf=%d&run=0", leaf))); r.StatusCode != http.StatusOK {
		t.Fatalf("the other session's watch after the logout = %d", r.StatusCode)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
