package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// Real-browser tests of a run's life: streaming, stop, queue, reload,
// second tab, errors, titles, rendering safety and the Ollama banner. Each
// test has its own database, app, fake Ollama and Chromium, and signs up
// through the UI. Helpers here are prefixed "ch" so they stay apart from
// the other browser tests' helpers.
//
// The machine these run on may be busy, so nothing depends on how fast the
// browser is: answers that must be watched while they stream are held at
// the fake (chHold) until the page is ready, and waits are long.

const (
	// chAnswers lists the assistant messages of the page, in DOM order.
	chAnswers = `[...document.querySelectorAll('[data-testid=message][data-role=assistant]')]`
	// chLast is the last assistant message (undefined when there is none).
	chLast = chAnswers + `.at(-1)`
	// chUsers lists the user messages of the page, in DOM order.
	chUsers = `[...document.querySelectorAll('[data-testid=message][data-role=user]')]`
	// chWaitLimit is how long one wait may take.
	chWaitLimit = 40 * time.Second
)

// chBody is the text of a message element's body ("" when absent).
func chBody(el string) string {
	return `(` + el + `?.querySelector('[data-testid=message-body]')?.textContent ?? "")`
}

// chToks is what the fake's [[tokens:n]] answer reads: "tok1 tok2 … tokn".
func chToks(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = "tok" + strconv.Itoa(i+1)
	}
	return strings.Join(parts, " ")
}

// chWords normalizes white space, so rendered markdown compares with raw text.
func chWords(s string) string { return strings.Join(strings.Fields(s), " ") }

// chTokCount checks that s is exactly "tok1 tok2 … tokk" and returns k.
func chTokCount(t *testing.T, s string) int {
	t.Helper()
	w := strings.Fields(s)
	for i, x := range w {
		if x != "tok"+strconv.Itoa(i+1) {
			t.Fatalf("text %q is not tok1 tok2 … in order (word %d is %q)", s, i+1, x)
		}
	}
	return len(w)
}

// chTab is one browser tab.
type chTab struct {
	t   *testing.T
	ctx context.Context
}

func (b chTab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v%s", what, err, b.state())
	}
}

// state describes the page for a failure message.
func (b chTab) state() string {
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\n" + (`+chLast+`?.outerHTML ?? "(no answer)")`))
	if err != nil {
		return ""
	}
	return "\npage: " + s
}

// wait waits until a JavaScript expression is true.
func (b chTab) wait(what, expr string) {
	b.t.Helper()
	b.do(what, waitFor(expr))
}

func chEval[T any](b chTab, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (b chTab) str(expr string) string { b.t.Helper(); return chEval[string](b, expr) }
func (b chTab) yes(expr string) bool   { b.t.Helper(); return chEval[bool](b, "Boolean("+expr+")") }
func (b chTab) num(expr string) int    { b.t.Helper(); return chEval[int](b, expr) }

func (b chTab) location() string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	return loc
}

// threadID is the id of the thread the tab shows.
func (b chTab) threadID() int64 {
	b.t.Helper()
	loc := b.location()
	m := regexp.MustCompile(`/t/(\d+)`).FindStringSubmatch(loc)
	if m == nil {
		b.t.Fatalf("the tab is at %q, not on a thread", loc)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	return id
}

// watchStream records, in the page, every distinct text of the last
// streaming answer (window.__seen) and whether it ever held elements
// (window.__elems). It lasts until the page is left.
func (b chTab) watchStream() {
	b.t.Helper()
	chEval[bool](b, `(() => {
		window.__seen = []; window.__elems = 0;
		const rec = () => {
			const all = document.querySelectorAll('.stream-text');
			const s = all[all.length - 1];
			if (!s) return;
			if (s.children.length) window.__elems++;
			const v = s.textContent;
			if (window.__seen[window.__seen.length - 1] !== v) window.__seen.push(v);
		};
		new MutationObserver(rec).observe(document.body, {subtree: true, childList: true, characterData: true});
		rec();
		return true;
	})()`)
}

// seen returns what watchStream recorded, after checking that every text was
// a prefix of full (nothing duplicated, nothing out of order) and that the
// stream never held elements.
func (b chTab) seen(full string) []string {
	b.t.Helper()
	seen := chEval[[]string](b, `window.__seen || []`)
	for _, s := range seen {
		if !strings.HasPrefix(full, s) {
			b.t.Fatalf("streamed text %q is not a prefix of the answer %q (all seen: %q)", s, full, seen)
		}
	}
	if n := b.num(`window.__elems || 0`); n != 0 {
		b.t.Fatalf("the streamed text held elements %d times", n)
	}
	return seen
}

// send appends a message from the thread's composer (htmx) and waits for it.
func (b chTab) send(content string) {
	b.t.Helper()
	n := b.num(chUsers + `.length`)
	b.do("send "+content,
		setValue(`[data-testid=composer] textarea[name=content]`, content),
		click(`[data-testid=send]`),
		waitFor(fmt.Sprintf(`%s.length === %d && %s.length === %d && document.querySelector('[data-testid=composer] textarea').value === ""`,
			chUsers, n+1, chAnswers, n+1)),
	)
}

// chatUI is a signed-in browser on a fresh Weft.
type chatUI struct {
	chTab
	app   *testenv.App
	email string
}

func newChatUI(t *testing.T, o testenv.Options) *chatUI {
	t.Helper()
	app := testenv.Start(t, testenv.NewDB(t), o)
	u := &chatUI{chTab: chTab{t: t, ctx: testenv.Browser(t, 60*time.Second)}, app: app, email: "chat@example.com"}
	u.do("register through the UI",
		chromedp.Navigate(app.TS.URL+"/register"),
		typeInto(`input[name=email]`, u.email),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	return u
}

// startThread sends content from the home composer of tab b (a new thread)
// and waits for the thread page with its answer.
func (u *chatUI) startThread(b chTab, content string) {
	u.t.Helper()
	if !strings.HasSuffix(b.location(), "/") || !b.yes(`document.querySelector('[data-testid=composer]')`) {
		b.do("open the home page", chromedp.Navigate(u.app.TS.URL+"/"))
	}
	b.do("start a thread",
		setValue(`[data-testid=composer] textarea[name=content]`, content),
		click(`[data-testid=send]`),
		waitFor(`location.pathname.startsWith("/t/") && `+chLast),
	)
}

func (u *chatUI) userID() int64 {
	u.t.Helper()
	usr, err := u.app.Store.UserByEmail(context.Background(), u.email)
	if err != nil {
		u.t.Fatal(err)
	}
	return usr.ID
}

// run reads one of the user's runs from the database.
func (u *chatUI) run(id int64) db.Run {
	u.t.Helper()
	r, err := u.app.Store.Run(context.Background(), u.userID(), id)
	if err != nil {
		u.t.Fatal(err)
	}
	return r
}

// waitIdle waits until the thread has no queued or running run.
func (u *chatUI) waitIdle(thread int64) {
	u.t.Helper()
	user := u.userID()
	var active []db.Run
	if !testwait.Until(chWaitLimit, func() bool {
		var err error
		if active, err = u.app.Store.ActiveRuns(context.Background(), user, thread); err != nil {
			u.t.Fatalf("active runs: %v", err)
		}
		return len(active) == 0
	}) {
		u.t.Fatalf("runs still active: %+v", active)
	}
}

// chHold holds every streamed chat request at the fake until the returned
// func is called (also called when the test ends), then answers with script
// (DefaultReply when nil). Title requests are never held. The model request
// is out, so the run is running ("Answering…") with no text yet.
func chHold(t *testing.T, f *fakeollama.Server, script func(*api.ChatRequest) fakeollama.Reply) (release func()) {
	t.Helper()
	if script == nil {
		script = fakeollama.DefaultReply
	}
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	f.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if !chIsTitle(req) {
			<-gate
		}
		return script(req)
	})
	return release
}

// chStreamed returns the fake's streamed chat requests (title requests are
// not streamed), in arrival order.
func chStreamed(f *fakeollama.Server) []fakeollama.Recorded {
	var out []fakeollama.Recorded
	for _, r := range f.Requests() {
		if r.Chat != nil && !chIsTitle(r.Chat) {
			out = append(out, r)
		}
	}
	return out
}

// chLastUser is the last user message of a chat request.
func chLastUser(req *api.ChatRequest) string {
	if req == nil {
		return ""
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return req.Messages[i].Content
		}
	}
	return ""
}

func chIsTitle(req *api.ChatRequest) bool { return req.Stream != nil && !*req.Stream }

// 1. An answer streams into the page and settles as a complete message.
func TestBrowserChatAnAnswerStreamsToComplete(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	release := chHold(t, u.app.Fake, nil)
	u.startThread(u.chTab, "[[slow:250ms]][[tokens:20]] hi")
	u.watchStream()

	u.wait("streaming with a visible stop and run status",
		chLast+`.dataset.status === "streaming" && `+
			chLast+`.querySelector('[data-testid=stop]')?.checkVisibility() && `+
			chLast+`.querySelector('[data-testid=run-status]')?.textContent.trim() === "Answering…"`)
	release()
	u.wait("first tokens", chBody(chLast)+`.includes("tok2 ") || `+chLast+`.dataset.status !== "streaming"`)
	first := u.str(chBody(chLast))
	if !u.yes(chLast + `.dataset.status === "streaming"`) {
		t.Fatalf("the answer ended before its first tokens were seen streaming%s", u.state())
	}
	u.wait("the text grows", fmt.Sprintf(`%s.length > %d`, chBody(chLast), len(first)))
	u.wait("complete", chLast+`.dataset.status === "complete"`)

	if got := u.str(chLast + `.dataset.route`); got != "chat" {
		t.Errorf("data-route = %q, want chat", got)
	}
	if got := chWords(u.str(chBody(chLast))); got != chToks(20) {
		t.Errorf("final text = %q, want %q", got, chToks(20))
	}
	if u.yes(`document.querySelector('[data-testid=stop]')`) {
		t.Error("a stop button is still on the page after the answer completed")
	}
	if u.yes(`document.querySelector('[data-testid=run-status]')`) {
		t.Error("a run status is still on the page after the answer completed")
	}
	usage := u.str(chLast + `.querySelector('[data-testid=usage]')?.textContent ?? ""`)
	if !strings.Contains(usage, "tiny") || !strings.Contains(usage, "20 out") {
		t.Errorf("usage footer = %q, want the model and 20 output tokens", usage)
	}
	seen := u.seen(chToks(20) + " ")
	partial := 0
	for _, s := range seen {
		if s != "" && len(s) < len(chToks(20)) {
			partial++
		}
	}
	if partial < 2 {
		t.Errorf("saw %d partial texts while streaming (%q); want the text to grow in steps", partial, seen)
	}
	if n := u.num(chAnswers + `.length`); n != 1 {
		t.Errorf("%d answers on the page, want 1", n)
	}
}

// 2. Stop (the button, then Esc) cancels the model request and keeps the
// partial answer, also after a reload.
func TestBrowserChatStopAndEscapeCancelAndKeepThePartialAnswer(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	fake := u.app.Fake
	ctx, cancel := context.WithTimeout(context.Background(), chWaitLimit)
	defer cancel()

	u.startThread(u.chTab, "[[slow:100ms]][[tokens:200]] stop me")
	u.wait("a few tokens", chBody(chLast)+`.includes("tok3 ")`)
	u.do("click stop", click(`[data-testid=message][data-role=assistant] [data-testid=stop]`))
	if err := fake.WaitCancelled(ctx, 1); err != nil {
		t.Fatalf("the model request was not cancelled after Stop: %v", err)
	}
	u.wait("cancelled", chLast+`.dataset.status === "cancelled"`)
	text := chWords(u.str(chBody(chLast)))
	if k := chTokCount(t, text); k < 3 || k >= 200 {
		t.Fatalf("stopped answer has %d tokens (%q), want a partial answer", k, text)
	}
	if u.yes(`document.querySelector('[data-testid=stop]')`) {
		t.Error("the stop button is still there after stopping")
	}
	if !u.yes(chLast + `.querySelector('[data-testid=retry]')`) {
		t.Error("no Retry on the stopped answer")
	}

	u.do("reload", chromedp.Reload(), waitFor(chLast+` && document.querySelector('[data-testid=composer]')`))
	if got := u.str(chLast + `.dataset.status`); got != "cancelled" {
		t.Errorf("after reload the answer is %q, want cancelled", got)
	}
	if got := chWords(u.str(chBody(chLast))); got != text {
		t.Errorf("after reload the text is %q, want %q", got, text)
	}
	if !u.yes(chLast + `.querySelector('[data-testid=retry]')`) {
		t.Error("after reload: no Retry on the stopped answer")
	}

	// Esc stops the answer being written (focus is in the composer, which
	// htmx focuses again after the send).
	u.send("[[slow:100ms]][[tokens:200]] escape me")
	u.wait("a few tokens of the second answer", chBody(chLast)+`.includes("tok3 ") && `+chLast+`.dataset.status === "streaming"`)
	u.do("press Escape", pageAct(`[data-testid=stop]`, true, `() => ""`), chromedp.KeyEvent(kb.Escape))
	if err := fake.WaitCancelled(ctx, 2); err != nil {
		t.Fatalf("the model request was not cancelled after Esc: %v", err)
	}
	u.wait("second answer cancelled", chLast+`.dataset.status === "cancelled"`)
	text2 := chWords(u.str(chBody(chLast)))
	if k := chTokCount(t, text2); k < 3 || k >= 200 {
		t.Fatalf("answer stopped with Esc has %d tokens (%q), want a partial answer", k, text2)
	}
	reqs := chStreamed(fake)
	if len(reqs) != 2 || !reqs[0].Cancelled || !reqs[1].Cancelled {
		t.Errorf("fake saw %d streamed requests, want 2 cancelled: %+v", len(reqs), reqs)
	}
}

// 3. Closing the tab does not stop the run: it completes in the database.
// The answer is held at the model until the tab is gone, so the tab closes
// while the run is certainly active and watched.
func TestBrowserChatClosingTabKeepsRunning(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	release := chHold(t, u.app.Fake, nil)
	u.do("leave the home page", chromedp.Navigate("about:blank"))

	// The answer streams in a tab of its own, which is then closed.
	tabCtx, closeTab := chromedp.NewContext(u.ctx)
	defer closeTab()
	other := chTab{t: t, ctx: tabCtx}
	u.startThread(other, "[[slow:20ms]][[tokens:40]] keep going")
	testwait.For(t, "the tab's event streams (the answer's and the thread's live watch)", chWaitLimit, func() bool {
		return u.app.Handler.OpenStreams() == 2
	})
	thread := other.threadID()
	run := func() db.Run {
		active, err := u.app.Store.ActiveRuns(context.Background(), u.userID(), thread)
		if err != nil || len(active) != 1 {
			t.Fatalf("active runs: %v, %v", active, err)
		}
		return active[0]
	}()
	closeTab()
	testwait.For(t, "the server to see the tab's event streams end", chWaitLimit, func() bool { return u.app.Handler.OpenStreams() == 0 })
	if r := u.run(run.ID); !r.Active() {
		t.Fatalf("the run ended (%s) before its answer was released", r.Status)
	}
	release()

	u.waitIdle(thread)
	msg, err := u.app.Store.Message(context.Background(), u.userID(), *run.AssistantMessageID)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Status != db.MsgComplete {
		t.Fatalf("the answer is %s (%q), want complete", msg.Status, msg.Error)
	}
	if got := chWords(msg.Content); got != chToks(40) {
		t.Errorf("stored answer = %q, want %q", got, chToks(40))
	}
	if n := u.app.Fake.Cancellations(); n != 0 {
		t.Errorf("the fake recorded %d cancellations, want 0", n)
	}
	if reqs := chStreamed(u.app.Fake); len(reqs) != 1 || !reqs[0].Completed {
		t.Errorf("want one completed streamed request, got %+v", reqs)
	}
}

// 4. A reload mid-stream shows the text so far and continues live.
func TestBrowserChatAReloadMidStreamShowsTheTextSoFarAndContinuesLive(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	release := chHold(t, u.app.Fake, nil)
	u.startThread(u.chTab, "[[slow:250ms]][[tokens:30]] reload me")
	release()
	u.wait("some tokens", chBody(chLast)+`.includes("tok5 ") && `+chLast+`.dataset.status === "streaming"`)
	before := u.str(chBody(chLast))

	u.do("reload", chromedp.Reload(), waitFor(chLast))
	u.watchStream()
	u.wait("the text so far is back",
		fmt.Sprintf(`%s.length >= %d || %s.dataset.status !== "streaming"`, chBody(chLast), len(before), chLast))
	now := u.str(chBody(chLast))
	if !u.yes(chLast + `.dataset.status === "streaming"`) {
		t.Fatalf("the answer ended before the reloaded page showed it streaming%s", u.state())
	}
	if !strings.HasPrefix(now, before) {
		t.Fatalf("after reload the text %q does not continue the text before %q", now, before)
	}
	u.wait("grows live after the reload", fmt.Sprintf(`%s.length > %d`, chBody(chLast), len(now)))
	u.wait("complete", chLast+`.dataset.status === "complete"`)
	if got := chWords(u.str(chBody(chLast))); got != chToks(30) {
		t.Errorf("final text = %q, want %q", got, chToks(30))
	}
	seen := u.seen(chToks(30) + " ")
	if len(seen) < 2 {
		t.Errorf("after the reload the text changed only %d times (%q); want it to stream", len(seen), seen)
	}
	if n := u.num(chAnswers + `.length`); n != 1 {
		t.Errorf("%d answers on the page, want 1", n)
	}
	if n := len(chStreamed(u.app.Fake)); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
}

// 5. A second tab on the same thread joins mid-stream; both end identical.
func TestBrowserChatASecondTabJoinsMidStreamAndEndsIdentical(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	release := chHold(t, u.app.Fake, nil)
	u.startThread(u.chTab, "[[slow:300ms]][[tokens:30]] two tabs")
	u.watchStream()
	release()
	u.wait("some tokens", chBody(chLast)+`.includes("tok3 ")`)
	url := u.location()

	tabCtx, closeTab := chromedp.NewContext(u.ctx)
	defer closeTab()
	second := chTab{t: t, ctx: tabCtx}
	second.do("open the thread in a second tab", chromedp.Navigate(url), waitFor(chLast))
	second.watchStream()
	if !second.yes(chLast + `.dataset.status === "streaming"`) {
		t.Fatalf("the answer ended before the second tab opened; the machine is too slow for this test%s", second.state())
	}
	joined := second.str(chBody(chLast))
	second.wait("second tab streams", fmt.Sprintf(`%s.length > %d`, chBody(chLast), len(joined)))

	u.wait("first tab complete", chLast+`.dataset.status === "complete"`)
	second.wait("second tab complete", chLast+`.dataset.status === "complete"`)
	for name, b := range map[string]chTab{"first": u.chTab, "second": second} {
		if got := chWords(b.str(chBody(chLast))); got != chToks(30) {
			t.Errorf("%s tab: final text = %q, want %q", name, got, chToks(30))
		}
		if n := b.num(chAnswers + `.length`); n != 1 {
			t.Errorf("%s tab: %d answers, want 1", name, n)
		}
		b.seen(chToks(30) + " ")
	}
	// The final messages match (only the title fetcher may differ: a tab
	// that gets its final message after the title exists needs none).
	final := chLast + `.querySelector('[data-testid=message-body]').innerHTML + "|" + ` +
		chLast + `.querySelector('[data-testid=usage]')?.textContent`
	if a, b := u.str(final), second.str(final); a != b {
		t.Errorf("the tabs show different final messages:\n%s\n%s", a, b)
	}
	if n := len(chStreamed(u.app.Fake)); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
}

// 6. A model error mid-stream keeps the partial text and the error across a
// reload; Retry answers again.
func TestBrowserChatAFailedAnswerPersistsAndRetryAnswersAgain(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	release := chHold(t, u.app.Fake, nil)
	// [[tokens:10]] numbers the chunks; [[error-after:3]] fails after the third.
	u.startThread(u.chTab, "[[slow:100ms]][[tokens:10]][[error-after:3]] crash please")
	u.wait("streaming", chLast+`.dataset.status === "streaming"`)
	release()
	u.wait("error", chLast+`.dataset.status === "error"`)
	check := func(when string) {
		t.Helper()
		if got := chWords(u.str(chBody(chLast))); got != chToks(3) {
			t.Errorf("%s: partial text = %q, want %q", when, got, chToks(3))
		}
		errText := u.str(chLast + `.querySelector('[data-testid=error]')?.textContent ?? ""`)
		if !strings.Contains(errText, fakeollama.CrashText) {
			t.Errorf("%s: error text = %q, want it to say what the model said (%q)", when, errText, fakeollama.CrashText)
		}
		if !u.yes(chLast + `.querySelector('[data-testid=retry]')`) {
			t.Errorf("%s: no Retry on the failed answer", when)
		}
	}
	check("live")
	u.do("reload", chromedp.Reload(), waitFor(chLast+` && document.querySelector('[data-testid=composer]')`))
	if got := u.str(chLast + `.dataset.status`); got != "error" {
		t.Fatalf("after reload the answer is %q, want error", got)
	}
	check("after reload")

	release = chHold(t, u.app.Fake, func(req *api.ChatRequest) fakeollama.Reply {
		if chIsTitle(req) {
			return fakeollama.DefaultReply(req)
		}
		return fakeollama.Reply{Chunks: []string{"Second ", "try ", "worked."}, Delay: 50 * time.Millisecond}
	})
	old := u.str(chLast + `.dataset.messageId`)
	u.do("retry", click(`[data-testid=message][data-role=assistant] [data-testid=retry]`),
		waitFor(fmt.Sprintf(`%s && %s.dataset.messageId !== "%s" && %s.dataset.status === "streaming"`, chLast, chLast, old, chLast)))
	release()
	u.wait("the new answer completes", chLast+`.dataset.status === "complete"`)
	if got := chWords(u.str(chBody(chLast))); got != "Second try worked." {
		t.Errorf("new answer = %q", got)
	}
	if n := u.num(chAnswers + `.length`); n != 1 {
		t.Errorf("%d answers shown after retry, want only the new one on the active path", n)
	}
	if u.yes(`document.querySelector('[data-testid=error]')`) {
		t.Error("an error is still shown after a successful retry")
	}
}

// 7. A model the server does not have: the error says how to get it.
func TestBrowserChatAMissingModelSaysHowToGetIt(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	release := chHold(t, u.app.Fake, nil)
	u.startThread(u.chTab, "[[error-before:404]] hello")
	u.wait("streaming", chLast+`.dataset.status === "streaming"`)
	release()
	u.wait("error", chLast+`.dataset.status === "error"`)
	errText := u.str(chLast + `.querySelector('[data-testid=error]')?.textContent ?? ""`)
	for _, want := range []string{"not available", "/admin/models", u.app.Fake.URL} {
		if !strings.Contains(errText, want) {
			t.Errorf("error %q does not mention %q", errText, want)
		}
	}
	if !u.yes(chLast + `.querySelector('[data-testid=retry]')`) {
		t.Error("no Retry on the failed answer")
	}
}

// 8. Sends behind a running answer queue visibly, run in order, one at a
// time, and a queued one can be cancelled before it starts.
func TestBrowserChatMessagesSentWhileAnswersRunAreQueuedAndCancellable(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	fake := u.app.Fake

	// At the start of each streamed request, note what the fake had seen.
	type arrival struct {
		content string
		before  []fakeollama.Recorded
	}
	var mu sync.Mutex
	var arrivals []arrival
	// A is held at the fake (running, no text yet) until D is cancelled.
	release := chHold(t, fake, func(req *api.ChatRequest) fakeollama.Reply {
		if !chIsTitle(req) {
			mu.Lock()
			arrivals = append(arrivals, arrival{chLastUser(req), fake.Requests()})
			mu.Unlock()
		}
		return fakeollama.DefaultReply(req)
	})

	const (
		msgA = "[[slow:100ms]][[tokens:10]] alpha"
		msgB = "[[slow:50ms]] bravo"
		msgC = "charlie"
		msgD = "delta"
	)
	u.startThread(u.chTab, msgA)
	u.wait("A runs", chLast+`.querySelector('[data-testid=run-status]')?.textContent.trim() === "Answering…"`)
	u.send(msgB)
	u.send(msgC)
	u.send(msgD)
	u.wait("B, C and D are queued while A runs",
		chAnswers+`[0].querySelector('[data-testid=run-status]')?.textContent.trim() === "Answering…" && [1, 2, 3].every(i => `+
			chAnswers+`[i].querySelector('[data-testid=run-status]')?.textContent.trim() === "Queued")`)
	if got := u.str(chAnswers + `[3].querySelector('[data-testid=stop]').textContent.trim()`); got != "Cancel" {
		t.Errorf("a queued answer's button says %q, want Cancel", got)
	}
	runD, err := strconv.ParseInt(u.str(chAnswers+`[3].dataset.runId`), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	u.do("cancel D", click(fmt.Sprintf(`[data-testid=message][data-run-id="%d"] [data-testid=stop]`, runD)))
	testwait.For(t, "D's run to leave the queue", chWaitLimit, func() bool { return u.run(runD).Status != db.RunQueued })
	if st := u.run(runD).Status; st != db.RunCancelled {
		t.Fatalf("D's run is %s after Cancel, want cancelled", st)
	}
	u.wait("D cancelled", chAnswers+`[3].dataset.status === "cancelled"`)
	if n := len(chStreamed(fake)); n != 1 {
		t.Fatalf("the fake saw %d streamed requests while A was held, want 1", n)
	}
	release()
	u.wait("A, B and C complete", `[0, 1, 2].every(i => `+chAnswers+`[i].dataset.status === "complete")`)
	u.waitIdle(u.threadID())

	wantText := []string{chToks(10), "You said: bravo", "You said: charlie", ""}
	wantStatus := []string{"complete", "complete", "complete", "cancelled"}
	for i := range wantText {
		if got := chWords(u.str(chBody(fmt.Sprintf(`%s[%d]`, chAnswers, i)))); got != wantText[i] {
			t.Errorf("answer %d = %q, want %q", i, got, wantText[i])
		}
		if got := u.str(fmt.Sprintf(`%s[%d].dataset.status`, chAnswers, i)); got != wantStatus[i] {
			t.Errorf("answer %d is %s, want %s", i, got, wantStatus[i])
		}
	}
	users := chEval[[]string](u.chTab, chUsers+`.map(m => m.querySelector('[data-testid=message-body]').textContent)`)
	if want := []string{msgA, msgB, msgC, msgD}; !slices.Equal(users, want) {
		t.Errorf("user messages in the page = %q, want %q", users, want)
	}

	reqs := chStreamed(fake)
	var order []string
	for _, r := range reqs {
		order = append(order, chLastUser(r.Chat))
	}
	if want := []string{msgA, msgB, msgC}; !slices.Equal(order, want) {
		t.Fatalf("the model was asked for %q, want %q (D was cancelled before it started)", order, want)
	}
	for i, r := range reqs {
		if !r.Completed || r.Cancelled {
			t.Errorf("request %d (%q): completed %v, cancelled %v", i, order[i], r.Completed, r.Cancelled)
		}
	}
	// Each request arrived after the previous one had sent its last line.
	lines := map[string]int{
		msgA: 10 + 1,
		msgB: len(fakeollama.SplitWords("You said: bravo")) + 1,
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 3 {
		t.Fatalf("%d streamed arrivals recorded, want 3", len(arrivals))
	}
	for i := 1; i < len(arrivals); i++ {
		prevContent := arrivals[i-1].content
		var prev *fakeollama.Recorded
		for j := range arrivals[i].before {
			r := &arrivals[i].before[j]
			if r.Chat != nil && !chIsTitle(r.Chat) && chLastUser(r.Chat) == prevContent {
				prev = r
			}
		}
		if prev == nil {
			t.Fatalf("when %q arrived the fake had not seen %q", arrivals[i].content, prevContent)
		}
		if !prev.Completed && prev.ChunksSent < lines[prevContent] {
			t.Errorf("%q arrived while %q was still streaming (%d of %d lines sent)",
				arrivals[i].content, prevContent, prev.ChunksSent, lines[prevContent])
		}
	}
}

// 9. The generated title replaces the provisional one without a reload.
func TestBrowserChatTheGeneratedTitleAppearsWithoutAReload(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	release := chHold(t, u.app.Fake, nil)
	const provisional = "[[slow:100ms]][[tokens:6]] Weaving the warp today"
	u.startThread(u.chTab, provisional)
	u.wait("streaming", chLast+`.dataset.status === "streaming"`)
	chEval[bool](u.chTab, `window.__sameDocument = true`)
	thread := u.threadID()
	if got := u.str(`document.querySelector("#thread-title").textContent.trim()`); got != provisional {
		t.Errorf("title while the first answer streams = %q, want the provisional %q", got, provisional)
	}
	release()
	u.wait("complete", chLast+`.dataset.status === "complete"`)
	const want = "Weaving the warp"
	u.wait("the generated title",
		fmt.Sprintf(`document.querySelector("#thread-title")?.textContent.trim() === %q && document.querySelector("#thread-link-%d")?.textContent.trim() === %q`,
			want, thread, want))
	if !u.yes(`window.__sameDocument === true`) {
		t.Error("the page was reloaded to show the title")
	}
	if n := u.num(`document.querySelectorAll("#thread-title").length`); n != 1 {
		t.Errorf("%d #thread-title elements, want 1", n)
	}
	if n := u.num(`document.querySelectorAll("[data-testid=thread-link]").length`); n != 1 {
		t.Errorf("%d sidebar links, want 1", n)
	}
}

// 10. Hostile model output is shown as text while it streams, rendered
// safely at the end, and cannot break the event stream.
func TestBrowserChatHostileOutputStaysTextWhileStreamingAndEndsRenderedSafely(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	chunks := []string{
		"Start ",
		"<script>window.__pwned=1</script> ",
		`<img src=x onerror="window.__pwned=2"> `,
		"[x](javascript:window.__pwned=3) ",
		`<div hx-get="/logout" hx-trigger="load">x</div> `,
		`<div hx-post="/logout" hx-trigger="load">y</div> `,
		"\nevent: do", "ne\ndata: <b>fa", "ke</b>\n\n",
		"more ", "more ",
		"THE END",
	}
	full := strings.Join(chunks, "")
	release := chHold(t, u.app.Fake, func(req *api.ChatRequest) fakeollama.Reply {
		if chIsTitle(req) {
			return fakeollama.DefaultReply(req)
		}
		return fakeollama.Reply{Chunks: chunks, Delay: 100 * time.Millisecond}
	})
	u.startThread(u.chTab, "be nasty")
	u.wait("streaming", chLast+`.dataset.status === "streaming"`)
	u.watchStream()
	release()
	u.wait("complete", chLast+`.dataset.status === "complete"`)

	// Every text seen while streaming was a prefix of the raw answer, never
	// markup, and the last one was all of it, character for character.
	seen := u.seen(full)
	if len(seen) == 0 || seen[len(seen)-1] != full {
		t.Errorf("the streamed texts before the final message were %q; the last should be exactly %q", seen, full)
	}
	if !u.yes(`window.__pwned === undefined`) {
		t.Fatalf("window.__pwned = %v", u.str(`String(window.__pwned)`))
	}
	body := chLast + `.querySelector('[data-testid=message-body]')`
	if got := u.str(body + `.textContent`); !strings.Contains(got, "THE END") || !strings.Contains(got, "Start") {
		t.Errorf("final body %q lacks the text around the markup", got)
	}
	if n := u.num(chAnswers + `.length`); n != 1 {
		t.Errorf("%d answers, want 1 (a forged event must not add one)", n)
	}
	for _, sel := range []string{"script", "img", "iframe", "[onerror]", "[hx-get]", "[hx-post]", "[hx-trigger]", `a[href^="javascript"]`} {
		if u.yes(body + `.querySelector('` + sel + `')`) {
			t.Errorf("the final message body contains %s: %s", sel, u.str(body+`.innerHTML`))
		}
	}
	// Give a load trigger or a late onerror a moment to fire, then look again.
	u.do("pause", chromedp.Sleep(500*time.Millisecond))
	if !u.yes(`window.__pwned === undefined`) {
		t.Fatalf("window.__pwned = %v", u.str(`String(window.__pwned)`))
	}
	u.do("reload", chromedp.Reload(), waitFor(`document.readyState === "complete"`))
	if loc := u.location(); !strings.Contains(loc, "/t/") {
		t.Fatalf("after reload the browser is at %q: the session ended", loc)
	}
	if !u.yes(`document.querySelector('[data-testid=composer]') && document.querySelector('[data-testid=logout]')`) {
		t.Fatal("after reload the user is not signed in")
	}
	if got := u.str(chLast + `.dataset.status`); got != "complete" {
		t.Errorf("after reload the answer is %q", got)
	}
	if !u.yes(`window.__pwned === undefined`) {
		t.Fatalf("after reload window.__pwned = %v", u.str(`String(window.__pwned)`))
	}
}

// 11. With Ollama unreachable, pages carry a banner that says where Weft
// looked and how to fix it; the app keeps working.
func TestBrowserChatAnUnreachableOllamaShowsABanner(t *testing.T) {
	t.Parallel()
	fake := fakeollama.New(t)
	fake.SetDown(true) // before the app starts: the model list is cached
	u := newChatUI(t, testenv.Options{Fake: fake})
	u.wait("banner", `document.querySelector('.banner')?.checkVisibility()`)
	banner := u.str(`document.querySelector('.banner').textContent`)
	for _, want := range []string{"not reachable", fake.URL, "OLLAMA_HOST"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner %q does not mention %q", banner, want)
		}
	}
	// The app still serves: a thread can be started and its answer fails
	// with an explanation instead of hanging. (The answer fails at once and
	// cannot be held at a fake that is down, so it is read after a reload.)
	u.startThread(u.chTab, "hello while down")
	u.waitIdle(u.threadID())
	u.do("reload", chromedp.Reload(), waitFor(chLast))
	if got := u.str(chLast + `.dataset.status`); got != "error" {
		t.Fatalf("the answer is %q, want error%s", got, u.state())
	}
	errText := u.str(chLast + `.querySelector('[data-testid=error]')?.textContent ?? ""`)
	if !strings.Contains(errText, "not reachable") || !strings.Contains(errText, fake.URL) {
		t.Errorf("error %q does not say that Ollama is not reachable at %s", errText, fake.URL)
	}
	if !u.yes(`document.querySelector('.banner')?.checkVisibility()`) {
		t.Error("the thread page has no banner")
	}
}

// A thread page must never show an answer as "streaming" without the event
// stream that will finish it: such an answer stays frozen (empty or
// partial, no Stop, never completing) until the reader reloads. The page is
// loaded over and over while short answers finish, which is when the
// message and its run can be read at different moments.
func TestChatThreadPageStreamingAnswerAlwaysHasItsStream(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("race@example.com", password)
	ws := regexp.MustCompile(`name="workspace_id" value="(\d+)"`).FindStringSubmatch(c.Get("/").Body)
	if ws == nil {
		t.Fatal("no workspace id on the home page")
	}
	r := c.Post("/t", url.Values{"workspace_id": {ws[1]}, "content": {"hello"}})
	loc := regexp.MustCompile(`^/t/(\d+)`).FindStringSubmatch(r.Header.Get("Location"))
	if r.StatusCode != http.StatusSeeOther || loc == nil {
		t.Fatalf("new thread = %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	page := "/t/" + loc[1]
	answer := regexp.MustCompile(`<li [^>]*data-role="assistant"[^>]*>`)

	var mu sync.Mutex
	var frozen []string
	for i := 0; i < 30 && len(frozen) == 0; i++ {
		sent := c.Do(http.MethodPost, page+"/messages", url.Values{"content": {"[[tokens:3]] again"}})
		if sent.StatusCode != http.StatusSeeOther {
			t.Fatalf("send = %d: %.300s", sent.StatusCode, sent.Body)
		}
		var wg sync.WaitGroup
		until := time.Now().Add(150 * time.Millisecond)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(until) {
					for _, li := range answer.FindAllString(c.Get(page).Body, -1) {
						if strings.Contains(li, `data-status="streaming"`) && !strings.Contains(li, "sse-connect=") {
							mu.Lock()
							frozen = append(frozen, li)
							mu.Unlock()
						}
					}
				}
			}()
		}
		wg.Wait()
	}
	if len(frozen) > 0 {
		t.Fatalf("the thread page showed %d streaming answers without an event stream, e.g. %s", len(frozen), frozen[0])
	}
}
