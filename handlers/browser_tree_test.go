package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/ollama/ollama/api"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// Real-browser tests of the conversation tree ("Branches, not overwrites"):
// edit, regenerate, continue, branch navigation, fork, delete, search,
// export/import, move/archive, keyboard and drafts, long threads. Each test
// has its own database, app, fake Ollama and Chromium, and signs up through
// the UI. Helpers here are prefixed "tr" so they stay apart from the other
// browser tests' helpers.

const (
	// trMsgs lists the messages of the page, in DOM order.
	trMsgs = `[...document.querySelectorAll('[data-testid=message]')]`
	// trUsers and trAnswers list the user and assistant messages.
	trUsers   = `[...document.querySelectorAll('[data-testid=message][data-role=user]')]`
	trAnswers = `[...document.querySelectorAll('[data-testid=message][data-role=assistant]')]`
	// trLast is the last answer of the page (undefined when there is none).
	trLast = trAnswers + `.at(-1)`
	// trComposer is the composer's text box.
	trComposer = `[data-testid=composer] textarea[name=content]`
)

// trText is the normalized text of a message element's body ("" when absent).
func trText(el string) string {
	return `((` + el + `)?.querySelector('[data-testid=message-body]')?.textContent ?? "").trim().replace(/\s+/g, " ")`
}

// trPos is the branch position text of a message element ("" when it has no siblings).
func trPos(el string) string {
	return `((` + el + `)?.querySelector('[data-testid=branch-pos]')?.textContent ?? "").trim()`
}

// trByID is the message element with that id.
func trByID(id string) string { return `document.getElementById("m` + id + `")` }

// trUI is one signed-in browser tab on a fresh Weft.
type trUI struct {
	t   *testing.T
	ctx context.Context
	app *testenv.App
}

func newTreeUI(t *testing.T) *trUI {
	t.Helper()
	return newTreeUIWith(t, testenv.Options{})
}

// newTreeUIWith is newTreeUI on an app started with o.
func newTreeUIWith(t *testing.T, o testenv.Options) *trUI {
	t.Helper()
	app := testenv.Start(t, testenv.NewDB(t), o)
	u := &trUI{t: t, ctx: testenv.Browser(t, 90*time.Second), app: app}
	u.do("register",
		chromedp.Navigate(app.TS.URL+"/register"),
		typeInto(`input[name=email]`, "tree@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	return u
}

// newTab opens another tab of the same browser (same cookies and storage).
func (u *trUI) newTab() *trUI {
	u.t.Helper()
	ctx, cancel := chromedp.NewContext(u.ctx)
	u.t.Cleanup(cancel)
	return &trUI{t: u.t, ctx: ctx, app: u.app}
}

func (u *trUI) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	u.t.Helper()
	if err := chromedp.Do(u.ctx, actions...); err != nil {
		u.t.Fatalf("%s: %v\n(page at %s, showing %s)", what, err, u.whereSafe(), u.state())
	}
}

// state describes the page's messages, for failure messages.
func (u *trUI) state() string {
	v, err := chromedp.Run(u.ctx, chromedp.Evaluate[string](`JSON.stringify({messages: `+trMsgs+`.map(m =>
		[m.dataset.messageId, m.dataset.role, m.dataset.status, `+trText("m")+`.slice(0, 80), `+trPos("m")+`,
		 m.querySelector('[data-testid=run-status]')?.textContent.trim() ?? "", m.hasAttribute("sse-connect") ? "stream" : ""].join(" | ")),
		active: document.activeElement?.tagName + "#" + (document.activeElement?.id ?? "")})`))
	if err != nil {
		return "?"
	}
	return v
}

// wait waits until a JavaScript expression is true.
func (u *trUI) wait(what, expr string) {
	u.t.Helper()
	u.do(what, waitFor(expr))
}

func trEval[T any](u *trUI, expr string) T {
	u.t.Helper()
	v, err := chromedp.Run(u.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		u.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (u *trUI) str(expr string) string { u.t.Helper(); return trEval[string](u, expr) }
func (u *trUI) yes(expr string) bool   { u.t.Helper(); return trEval[bool](u, "Boolean("+expr+")") }
func (u *trUI) num(expr string) int    { u.t.Helper(); return trEval[int](u, expr) }

// fetch fetches a path from inside the page (same cookies) and returns the
// status, content type, content disposition and body.
func (u *trUI) fetch(path string) (status int, ctype, disposition, body string) {
	u.t.Helper()
	var out struct {
		Status      int    `json:"status"`
		Type        string `json:"type"`
		Disposition string `json:"disposition"`
		Body        string `json:"body"`
	}
	v, err := chromedp.Run(u.ctx, chromedp.Evaluate[string](fmt.Sprintf(`fetch(%q).then(async r => JSON.stringify({
			status: r.status, type: r.headers.get("content-type") ?? "", disposition: r.headers.get("content-disposition") ?? "", body: await r.text()}))`, path),
		chromedp.EvalAwaitPromise))
	if err != nil {
		u.t.Fatalf("fetch %s: %v", path, err)
	}
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		u.t.Fatalf("fetch %s: %v", path, err)
	}
	return out.Status, out.Type, out.Disposition, out.Body
}

func (u *trUI) whereSafe() string {
	loc, err := chromedp.Run(u.ctx, chromedp.Location())
	if err != nil {
		return "?"
	}
	return loc
}

// path is the tab's path and query (no host, no fragment).
func (u *trUI) path() string {
	u.t.Helper()
	return u.str(`location.pathname + location.search`)
}

// threadID is the id of the thread the tab shows.
func (u *trUI) threadID() string {
	u.t.Helper()
	m := regexp.MustCompile(`^/t/(\d+)$`).FindStringSubmatch(u.str(`location.pathname`))
	if m == nil {
		u.t.Fatalf("the tab is at %q, not on a thread", u.whereSafe())
	}
	return m[1]
}

// trStuck finds an answer the page shows as being written but without the
// event stream that would ever finish it (see
// TestBrowserTreeInstantAnswerNeverStuckStreaming).
const trStuck = `document.querySelector('[data-testid=message][data-status=streaming]:not([sse-connect])')`

// act performs an action that loads a new document (a form post and its
// redirect, a link, a reload) and waits until the new document satisfies
// cond. The old document is marked first, so cond cannot be met by it.
// A page showing an answer stuck "streaming" with no event stream (see
// TestBrowserTreeInstantAnswerNeverStuckStreaming) fails at once: nothing
// would ever update it.
func (u *trUI) act(what string, action chromedp.Action[chromedp.Void], cond string) {
	u.t.Helper()
	u.do(what+" (mark the page)", chromedp.Evaluate[chromedp.Void](`window.__trOld = true`))
	u.do(what, action)
	u.wait(what, `!window.__trOld && document.readyState === "complete" && ((`+cond+`) || `+trStuck+`)`)
	if u.yes(`!(` + cond + `) && ` + trStuck) {
		u.t.Fatalf("%s: the page shows answer %s stuck streaming without an event stream: %s", what,
			u.str(trStuck+`.dataset.messageId`), u.state())
	}
}

// open navigates to a path of the app and waits for cond.
func (u *trUI) open(path, cond string) {
	u.t.Helper()
	target, _, _ := strings.Cut(path, "#")
	if u.path() == target {
		// Only the fragment would change: that is no new document.
		u.do("leave "+target, chromedp.Navigate("about:blank"))
	}
	u.act("open "+path, chromedp.Navigate(u.app.TS.URL+path), cond)
}

// convo is the visible conversation: "role: text" per message.
func (u *trUI) convo() []string {
	u.t.Helper()
	return trEval[[]string](u, trMsgs+`.map(m => m.dataset.role + ": " + `+trText("m")+`)`)
}

// positions is the branch position of each visible message ("" without siblings).
func (u *trUI) positions() []string {
	u.t.Helper()
	return trEval[[]string](u, trMsgs+`.map(m => `+trPos("m")+`)`)
}

// ids are the message ids of the visible conversation.
func (u *trUI) ids() []string {
	u.t.Helper()
	return trEval[[]string](u, trMsgs+`.map(m => m.dataset.messageId)`)
}

// startThread sends content from the home composer (a new thread) and waits
// for the thread page with its complete answer.
func (u *trUI) startThread(content string) string {
	u.t.Helper()
	u.open("/", `document.querySelector('`+trComposer+`')`)
	u.act("start a thread with "+content,
		chromedp.Steps(
			setValue(trComposer, content),
			click(`[data-testid=send]`),
		),
		`location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete"`)
	return u.threadID()
}

// send appends a message from the thread's composer (htmx, no page load)
// and waits for its complete answer.
func (u *trUI) send(content string) {
	u.t.Helper()
	n := u.num(trUsers + `.length`)
	u.do("send "+content,
		setValue(trComposer, content),
		click(`[data-testid=send]`),
		waitFor(fmt.Sprintf(`%s.length === %d && %s.length === %d && %s.dataset.status === "complete"`,
			trUsers, n+1, trAnswers, n+1, trLast)),
	)
}

// userID is the id of the visible user message with that text.
func (u *trUI) userID(text string) string {
	u.t.Helper()
	id := u.str(trUsers + `.find(m => ` + trText("m") + ` === ` + strconv.Quote(text) + `)?.dataset.messageId ?? ""`)
	if id == "" {
		u.t.Fatalf("no user message %q in %q", text, u.convo())
	}
	return id
}

// answerAfter is the id of the visible answer that follows a message.
func (u *trUI) answerAfter(id string) string {
	u.t.Helper()
	a := u.str(trByID(id) + `?.nextElementSibling?.dataset.messageId ?? ""`)
	if a == "" {
		u.t.Fatalf("no answer after message %s in %q", id, u.convo())
	}
	return a
}

// edit opens the editor of a user message, writes a new version and saves
// it; it waits for the new version's complete answer.
func (u *trUI) edit(id, content string) {
	u.t.Helper()
	sel := "#m" + id
	u.do("open the editor of message "+id,
		click(sel+` [data-testid=edit]`),
		waitFor(trByID(id)+`.querySelector('details.edit').open && `+trByID(id)+`.querySelector('[data-testid=edit-form]').checkVisibility()`),
	)
	u.act("save the new version "+content,
		chromedp.Steps(
			setValue(sel+` [data-testid=edit-form] textarea[name=content]`, content),
			click(sel+` [data-testid=edit-save]`),
		),
		trUsers+`.some(m => `+trText("m")+` === `+strconv.Quote(content)+`) && `+trLast+`?.dataset.status === "complete"`)
}

// trStreamed returns the fake's streamed chat requests (title requests are
// not streamed), in arrival order.
func trStreamed(f *fakeollama.Server) []fakeollama.Recorded {
	var out []fakeollama.Recorded
	for _, r := range f.Requests() {
		if r.Chat != nil && (r.Chat.Stream == nil || *r.Chat.Stream) {
			out = append(out, r)
		}
	}
	return out
}

func trIsTitle(req *api.ChatRequest) bool { return req.Stream != nil && !*req.Stream }

// trRoles renders a request's messages as "role: content" lines.
func trRoles(req *api.ChatRequest) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == "system" {
			continue
		}
		out = append(out, m.Role+": "+strings.Join(strings.Fields(m.Content), " "))
	}
	return out
}

// trRequestFor is the last streamed request whose last user message is content.
func trRequestFor(t *testing.T, f *fakeollama.Server, content string) *api.ChatRequest {
	t.Helper()
	reqs := trStreamed(f)
	for i := len(reqs) - 1; i >= 0; i-- {
		msgs := reqs[i].Chat.Messages
		for j := len(msgs) - 1; j >= 0; j-- {
			if msgs[j].Role == "user" {
				if msgs[j].Content == content {
					return reqs[i].Chat
				}
				break
			}
		}
	}
	t.Fatalf("the model was never asked about %q", content)
	return nil
}

// 1. Editing a message makes a branch; prev/next switch it; the choice is
// saved (reload, another tab).
func TestBrowserTreeEditingAMessageMakesABranchThatSurvivesNavigationAndReload(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	thread := u.startThread("one")
	u.send("two")
	u2 := u.userID("two")
	a2 := u.answerAfter(u2)
	if got, want := u.convo(), []string{"user: one", "assistant: You said: one", "user: two", "assistant: You said: two"}; !slices.Equal(got, want) {
		t.Fatalf("conversation = %q, want %q", got, want)
	}
	if got := u.positions(); !slices.Equal(got, []string{"", "", "", ""}) {
		t.Errorf("branch positions before any edit = %q, want none", got)
	}

	u.edit(u2, "two edited")
	if got, want := u.convo(), []string{"user: one", "assistant: You said: one", "user: two edited", "assistant: You said: two edited"}; !slices.Equal(got, want) {
		t.Fatalf("after the edit the conversation = %q, want %q", got, want)
	}
	if got, want := u.positions(), []string{"", "", "2/2", ""}; !slices.Equal(got, want) {
		t.Errorf("after the edit branch positions = %q, want %q", got, want)
	}
	newU := u.userID("two edited")
	if newU == u2 {
		t.Fatal("the edit overwrote the message instead of adding a version")
	}
	if !u.yes(trByID(newU)+`.querySelector('[data-testid=branch-next]').disabled`) ||
		u.yes(trByID(newU)+`.querySelector('[data-testid=branch-prev]').disabled`) {
		t.Error("at 2/2, next should be disabled and prev enabled")
	}
	// The model saw the edited branch only.
	if got, want := trRoles(trRequestFor(t, u.app.Fake, "two edited")), []string{"user: one", "assistant: You said: one", "user: two edited"}; !slices.Equal(got, want) {
		t.Errorf("the model was asked with %q, want %q", got, want)
	}

	u.act("previous version", click(`#m`+newU+` [data-testid=branch-prev]`),
		trPos(trUsers+`[1]`)+` === "1/2"`)
	want := []string{"user: one", "assistant: You said: one", "user: two", "assistant: You said: two"}
	check := func(b *trUI, when string) {
		t.Helper()
		if got := b.convo(); !slices.Equal(got, want) {
			t.Errorf("%s: conversation = %q, want %q", when, got, want)
		}
		if got, want := b.positions(), []string{"", "", "1/2", ""}; !slices.Equal(got, want) {
			t.Errorf("%s: branch positions = %q, want %q", when, got, want)
		}
		if got := b.ids(); len(got) != 4 || got[2] != u2 || got[3] != a2 {
			t.Errorf("%s: message ids = %q, want the original message %s and its answer %s", when, got, u2, a2)
		}
		if !b.yes(trByID(u2)+`.querySelector('[data-testid=branch-prev]').disabled`) ||
			b.yes(trByID(u2)+`.querySelector('[data-testid=branch-next]').disabled`) {
			t.Errorf("%s: at 1/2, prev should be disabled and next enabled", when)
		}
	}
	check(u, "after prev")

	u.act("reload", chromedp.Reload(), trLast)
	check(u, "after reload")

	second := u.newTab()
	second.open("/t/"+thread, trLast)
	check(second, "second tab")

	// Next goes back to the edited version, in the second tab; the first
	// tab sees it after a reload.
	second.act("next version", click(`#m`+u2+` [data-testid=branch-next]`),
		trPos(trUsers+`[1]`)+` === "2/2"`)
	if got := second.convo()[2]; got != "user: two edited" {
		t.Errorf("after next the second message is %q", got)
	}
	u.act("reload the first tab", chromedp.Reload(), trLast)
	if got := u.convo(); len(got) != 4 || got[2] != "user: two edited" || got[3] != "assistant: You said: two edited" {
		t.Errorf("first tab after the second switched back: %q", got)
	}
}

// 2. Regenerate adds a sibling answer (optionally from another model);
// prev/next switch between the answers.
func TestBrowserTreeRegenerateAddsASiblingAnswerToSwitchTo(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	var n atomic.Int32
	u.app.Fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if trIsTitle(req) {
			return fakeollama.DefaultReply(req)
		}
		return fakeollama.Reply{Chunks: []string{"Answer ", fmt.Sprintf("#%d ", n.Add(1)), "from ", req.Model}}
	})
	u.startThread("hello there")
	a1 := u.str(trLast + `.dataset.messageId`)
	if got := u.str(trText(trLast)); got != "Answer #1 from tiny:latest" {
		t.Fatalf("first answer = %q", got)
	}
	if !u.yes(trLast + `.querySelector('[data-testid=regenerate]')`) {
		t.Fatal("no regenerate button on a complete answer")
	}
	if u.yes(trUsers + `[0].querySelector('[data-testid=regenerate]')`) {
		t.Error("a user message has a regenerate button")
	}

	u.act("regenerate", click(`#m`+a1+` [data-testid=regenerate]`),
		trLast+`.dataset.messageId !== "`+a1+`" && `+trLast+`.dataset.status === "complete"`)
	a2 := u.str(trLast + `.dataset.messageId`)
	if got := u.convo(); !slices.Equal(got, []string{"user: hello there", "assistant: Answer #2 from tiny:latest"}) {
		t.Fatalf("after regenerate the conversation = %q", got)
	}
	if got := u.positions(); !slices.Equal(got, []string{"", "2/2"}) {
		t.Errorf("after regenerate branch positions = %q, want the answer at 2/2", got)
	}

	u.act("previous answer", click(`#m`+a2+` [data-testid=branch-prev]`),
		trLast+`.dataset.messageId === "`+a1+`"`)
	if got := u.str(trText(trLast)); got != "Answer #1 from tiny:latest" {
		t.Errorf("prev shows %q, want the first answer", got)
	}
	if got := u.str(trPos(trLast)); got != "1/2" {
		t.Errorf("prev: position %q, want 1/2", got)
	}
	u.act("next answer", click(`#m`+a1+` [data-testid=branch-next]`),
		trLast+`.dataset.messageId === "`+a2+`"`)
	if got := u.str(trText(trLast)); got != "Answer #2 from tiny:latest" {
		t.Errorf("next shows %q, want the second answer", got)
	}
	if n := u.num(trMsgs + `.length`); n != 2 {
		t.Errorf("%d messages shown, want 2 (one answer per branch)", n)
	}

	// Regenerate with another model.
	sel := `#m` + a2 + ` select[data-testid=regenerate-model]`
	thinker := u.str(`[...document.querySelector('` + sel + `').options].find(o => o.value.startsWith("thinker"))?.value ?? ""`)
	if thinker == "" {
		t.Fatalf("the model picker has no thinker: %q", u.str(`document.querySelector('`+sel+`').textContent`))
	}
	u.act("regenerate with "+thinker,
		chromedp.Steps(
			setValue(sel, thinker),
			click(`#m`+a2+` [data-testid=regenerate]`),
		),
		`!["`+a1+`", "`+a2+`"].includes(`+trLast+`.dataset.messageId) && `+trLast+`.dataset.status === "complete"`)
	if got := u.str(trText(trLast)); got != "Answer #3 from thinker:latest" {
		t.Errorf("answer from the other model = %q", got)
	}
	if got := u.str(trPos(trLast)); got != "3/3" {
		t.Errorf("position of the third answer = %q, want 3/3", got)
	}
	if got := u.str(trLast + `.querySelector('[data-testid=usage]')?.textContent ?? ""`); !strings.Contains(got, "thinker") {
		t.Errorf("usage footer %q does not name the model that answered", got)
	}
	var models []string
	for _, r := range trStreamed(u.app.Fake) {
		models = append(models, r.Chat.Model)
		if got := trRoles(r.Chat); !slices.Equal(got, []string{"user: hello there"}) {
			t.Errorf("a regenerate request carried %q, want only the user message", got)
		}
	}
	if want := []string{"tiny:latest", "tiny:latest", "thinker:latest"}; !slices.Equal(models, want) {
		t.Errorf("models asked = %q, want %q", models, want)
	}
}

// 3. Continue goes on writing a stopped answer in the same message.
func TestBrowserTreeContinueWritesOnAStoppedAnswerInTheSameMessage(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	fake := u.app.Fake
	u.open("/", `document.querySelector('`+trComposer+`')`)
	u.act("start a slow answer",
		chromedp.Steps(
			setValue(trComposer, "[[slow:100ms]][[tokens:100]] go on"),
			click(`[data-testid=send]`),
		),
		`location.pathname.startsWith("/t/") && `+trText(trLast)+`.includes("tok3")`)
	u.do("stop", click(`[data-testid=message][data-role=assistant] [data-testid=stop]`))
	u.wait("cancelled", trLast+`.dataset.status === "cancelled"`)
	id := u.str(trLast + `.dataset.messageId`)
	partial := u.str(trText(trLast))
	if !strings.HasPrefix(partial, "tok1 tok2 tok3") || strings.Contains(partial, "tok100") {
		t.Fatalf("stopped answer = %q, want a partial tok1 tok2 …", partial)
	}
	if !u.yes(trLast + `.querySelector('[data-testid=continue]')`) {
		t.Fatal("no continue button on a stopped answer")
	}

	// The continuation waits until the page has shown it streaming.
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if trIsTitle(req) {
			return fakeollama.DefaultReply(req)
		}
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
		return fakeollama.Reply{Chunks: []string{"and ", "then ", "some ", "more ", "words."}, Delay: 50 * time.Millisecond}
	})
	u.act("continue", click(`#m`+id+` [data-testid=continue]`),
		trLast+`?.dataset.messageId === "`+id+`" && `+trLast+`.dataset.status === "streaming" && `+trLast+`.hasAttribute("sse-connect")`)
	u.wait("the partial text is shown while it streams again", trText(trLast)+` === `+strconv.Quote(partial))
	if u.yes(trLast + `.querySelector('[data-testid=continue]')`) {
		t.Error("a continue button is shown while the answer streams again")
	}
	once.Do(func() { close(release) })
	u.wait("complete", trLast+`.dataset.status === "complete"`)

	final := u.str(trText(trLast))
	if want := partial + " and then some more words."; final != want {
		t.Errorf("continued answer = %q, want %q", final, want)
	}
	if got := u.str(trLast + `.dataset.messageId`); got != id {
		t.Errorf("the continued answer is message %s, want the same message %s", got, id)
	}
	if n := u.num(trAnswers + `.length`); n != 1 {
		t.Errorf("%d answers shown, want 1", n)
	}
	if got := u.positions(); !slices.Equal(got, []string{"", ""}) {
		t.Errorf("branch positions after continue = %q, want none (no sibling)", got)
	}
	reqs := trStreamed(fake)
	if len(reqs) != 2 || !reqs[0].Cancelled {
		t.Fatalf("want a cancelled request and its continuation, got %d requests", len(reqs))
	}
	if got := trRoles(reqs[1].Chat); len(got) != 2 || got[1] != "assistant: "+partial {
		t.Errorf("the continuation request carried %q, want the user message then the partial answer", got)
	}

	u.act("reload", chromedp.Reload(), trLast)
	if got := u.str(trLast + `.dataset.status`); got != "complete" {
		t.Errorf("after reload the answer is %q", got)
	}
	if got := u.str(trText(trLast)); got != final {
		t.Errorf("after reload the answer is %q, want %q", got, final)
	}
}

// 4. Fork starts a new thread with the conversation up to a message.
func TestBrowserTreeForkStartsANewThreadWithTheConversationUpToThere(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	thread := u.startThread("one")
	u.send("two")
	full := u.convo()
	a1 := u.answerAfter(u.userID("one"))

	u.act("fork at the first answer", click(`#m`+a1+` [data-testid=fork]`),
		`location.pathname.startsWith("/t/") && location.pathname !== "/t/`+thread+`" && `+trLast)
	fork := u.threadID()
	if got, want := u.convo(), []string{"user: one", "assistant: You said: one"}; !slices.Equal(got, want) {
		t.Errorf("the fork shows %q, want %q", got, want)
	}
	if slices.Contains(u.ids(), a1) {
		t.Error("the fork shows the original's messages instead of copies")
	}
	if got := u.str(`document.querySelector("#thread-title").textContent.trim()`); !strings.HasPrefix(got, "Fork of") {
		t.Errorf("the fork's title is %q, want it to start with \"Fork of\"", got)
	}
	links := trEval[[]string](u, `[...document.querySelectorAll('[data-testid=thread-link]')].map(a => a.dataset.threadId)`)
	if !slices.Contains(links, thread) || !slices.Contains(links, fork) || len(links) != 2 {
		t.Errorf("sidebar lists threads %q, want %s and %s", links, thread, fork)
	}

	// The fork goes on from its own end.
	u.send("three")
	if got, want := trRoles(trRequestFor(t, u.app.Fake, "three")), []string{"user: one", "assistant: You said: one", "user: three"}; !slices.Equal(got, want) {
		t.Errorf("the fork's next request carried %q, want %q", got, want)
	}

	u.act("back to the original", click(`#thread-link-`+thread), `location.pathname === "/t/`+thread+`" && `+trLast)
	if got := u.convo(); !slices.Equal(got, full) {
		t.Errorf("the original now shows %q, want it unchanged %q", got, full)
	}
}

// 5. Deleting a message removes it and everything below it, after a
// confirmation.
func TestBrowserTreeDeletingAMessageRemovesEverythingBelowItAfterConfirming(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	thread := u.startThread("one")
	u.send("two")
	u2 := u.userID("two")
	a2 := u.answerAfter(u2)

	u.do("accept the confirmation", chromedp.Evaluate[chromedp.Void](`window.confirm = (m) => { sessionStorage.setItem("trConfirm", m); return true; }`))
	u.act("delete the second message", click(`#m`+u2+` [data-testid=delete-message]`),
		`location.pathname === "/t/`+thread+`" && `+trLast)
	if got, want := u.convo(), []string{"user: one", "assistant: You said: one"}; !slices.Equal(got, want) {
		t.Errorf("after deleting, the conversation = %q, want %q", got, want)
	}
	if u.yes(trByID(u2) + ` || ` + trByID(a2)) {
		t.Error("the deleted message or its answer is still on the page")
	}
	if got := u.str(`sessionStorage.getItem("trConfirm") ?? ""`); !strings.Contains(got, "Delete this message") {
		t.Errorf("the confirmation asked %q", got)
	}
	var count int
	if err := u.app.Store.Pool.QueryRow(context.Background(), "SELECT count(*) FROM messages WHERE thread_id = $1", thread).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 2 {
		t.Errorf("%d messages left in the database, want 2", count)
	}
	u.act("reload", chromedp.Reload(), trLast)
	if got := u.convo(); len(got) != 2 {
		t.Errorf("after reload: %q", got)
	}
	// The next message follows the first answer.
	u.send("three")
	if got, want := trRoles(trRequestFor(t, u.app.Fake, "three")), []string{"user: one", "assistant: You said: one", "user: three"}; !slices.Equal(got, want) {
		t.Errorf("the next request carried %q, want %q", got, want)
	}
}

// 6. Ctrl+K focuses search; results highlight the words in any script and
// jump to the message.
func TestBrowserTreeSearchHighlightsWordsInAnyScriptAndJumpsToTheMessage(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	const loom = "Weaving by hand on a ткацкий станок tonight"
	a := u.startThread(loom)
	b := u.startThread("Marmalade recipes for winter")

	u.do("blur", chromedp.Evaluate[chromedp.Void](`(() => {
		document.activeElement?.blur();
		window.__trKeys = [];
		document.addEventListener("keydown", e => window.__trKeys.push(e.key + (e.ctrlKey ? "+ctrl" : "")), true);
	})()`))
	if u.yes(`document.activeElement?.id === "search"`) {
		t.Fatal("the search box has the focus before Ctrl+K")
	}
	u.do("press Ctrl+K", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	if err := chromedp.Do(u.ctx, waitFor(`document.activeElement?.id === "search"`)); err != nil {
		t.Fatalf("Ctrl+K did not focus the search box (keydowns seen by the page: %s; focus on %s)",
			u.str(`JSON.stringify(window.__trKeys)`), u.str(`document.activeElement?.tagName + "#" + document.activeElement?.id`))
	}

	u.act("search станок",
		chromedp.Steps(
			chromedp.KeyEvent("станок"),
			chromedp.KeyEvent(kb.Enter),
		),
		`location.pathname === "/search" && document.querySelector('[data-testid=search-result], [data-testid=search-empty]')`)
	if got := u.str(`new URLSearchParams(location.search).get("q")`); got != "станок" {
		t.Errorf("searched for %q", got)
	}
	if got := u.str(`document.querySelector("#search").value`); got != "станок" {
		t.Errorf("the search box shows %q after searching", got)
	}
	threads := trEval[[]string](u, `[...document.querySelectorAll('[data-testid=search-result]')].map(r => r.dataset.threadId)`)
	if len(threads) == 0 || !slices.Contains(threads, a) || slices.Contains(threads, b) {
		t.Fatalf("results are in threads %q, want %s (and not %s)", threads, a, b)
	}
	marks := trEval[[]string](u, `[...document.querySelectorAll('[data-testid=search-result] mark')].map(m => m.textContent)`)
	if len(marks) == 0 {
		t.Fatal("no highlighted match in the results")
	}
	for _, m := range marks {
		if strings.ToLower(m) != "станок" {
			t.Errorf("highlighted %q, want станок", m)
		}
	}

	// A result of a message links to that message.
	href := u.str(`[...document.querySelectorAll('[data-testid=search-result] a')].map(a => a.getAttribute("href")).find(h => h.includes("#m")) ?? ""`)
	m := regexp.MustCompile(`^/t/(\d+)\?at=(\d+)#m(\d+)$`).FindStringSubmatch(href)
	if m == nil || m[1] != a || m[2] != m[3] {
		t.Fatalf("message result links to %q, want /t/%s?at=N#mN", href, a)
	}
	u.act("open the result", click(`[data-testid=search-result] a[href="`+href+`"]`),
		`location.pathname === "/t/`+a+`" && `+trLast)
	if got := u.str(`location.hash`); got != "#m"+m[2] {
		t.Errorf("landed at hash %q, want #m%s", got, m[2])
	}
	if got := u.str(trText(trByID(m[2]))); !strings.Contains(got, "станок") {
		t.Errorf("the linked message #m%s is %q, want the message with the word", m[2], got)
	}

	// Case does not matter, in any script.
	u.open("/search?q="+url.QueryEscape("СТАНОК"), `location.pathname === "/search"`)
	threads = trEval[[]string](u, `[...document.querySelectorAll('[data-testid=search-result]')].map(r => r.dataset.threadId)`)
	if !slices.Contains(threads, a) {
		t.Errorf("searching СТАНОК found threads %q, want %s", threads, a)
	}
	u.open("/search?q=marmalade", `location.pathname === "/search"`)
	threads = trEval[[]string](u, `[...document.querySelectorAll('[data-testid=search-result]')].map(r => r.dataset.threadId)`)
	if !slices.Contains(threads, b) || slices.Contains(threads, a) {
		t.Errorf("searching marmalade found threads %q, want %s only", threads, b)
	}
}

// 7. A thread with branches round-trips through JSON export and import;
// the Markdown export is the visible conversation.
func TestBrowserTreeAThreadRoundTripsThroughExportAndImport(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	thread := u.startThread("one")
	u.send("two")
	u.edit(u.userID("two"), "two edited")
	convo, pos := u.convo(), u.positions()
	title := u.str(`document.querySelector("#thread-title").textContent.trim()`)
	if !slices.Equal(pos, []string{"", "", "2/2", ""}) {
		t.Fatalf("before export: positions %q", pos)
	}

	// The menu has both links.
	u.do("open the thread menu", click(`details.thread-actions summary`),
		waitFor(`document.querySelector('[data-testid=export-json]').checkVisibility()`))
	for tid, want := range map[string]string{"export-md": "/t/" + thread + "/export.md", "export-json": "/t/" + thread + "/export.json"} {
		if got := u.str(`document.querySelector('[data-testid=` + tid + `]').getAttribute("href")`); got != want {
			t.Errorf("%s links to %q, want %q", tid, got, want)
		}
	}

	status, ctype, disp, md := u.fetch("/t/" + thread + "/export.md")
	if status != 200 || !strings.HasPrefix(ctype, "text/markdown") || !strings.Contains(disp, "attachment") {
		t.Errorf("export.md: %d %q %q", status, ctype, disp)
	}
	for _, want := range []string{"## You\n\none\n", "## Assistant\n\nYou said: one\n", "## You\n\ntwo edited\n", "## Assistant\n\nYou said: two edited\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown export lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "## You\n\ntwo\n") || strings.Contains(md, "You said: two\n") {
		t.Errorf("the Markdown export has the hidden branch:\n%s", md)
	}

	status, ctype, _, js := u.fetch("/t/" + thread + "/export.json")
	if status != 200 || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("export.json: %d %q", status, ctype)
	}
	var file struct {
		Format   string `json:"format"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(js), &file); err != nil {
		t.Fatalf("export.json does not parse: %v", err)
	}
	if file.Format != "weft-thread" || len(file.Messages) != 6 {
		t.Fatalf("export.json: format %q with %d messages, want weft-thread with 6 (every branch)", file.Format, len(file.Messages))
	}

	u.open("/import", `document.querySelector('[data-testid=import-form]')`)
	u.do("choose the file", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const dt = new DataTransfer();
		dt.items.add(new File([%s], "thread.json", {type: "application/json"}));
		document.querySelector('[data-testid=import-form] input[name=file]').files = dt.files;
	})()`, strconv.Quote(js))))
	u.act("import", click(`[data-testid=import-form] button[type=submit]`),
		`location.pathname.startsWith("/t/") && location.pathname !== "/t/`+thread+`" && `+trLast)
	imported := u.threadID()
	if got := u.convo(); !slices.Equal(got, convo) {
		t.Errorf("the imported thread shows %q, want %q", got, convo)
	}
	if got := u.positions(); !slices.Equal(got, pos) {
		t.Errorf("the imported thread's positions are %q, want %q", got, pos)
	}
	if got := u.str(`document.querySelector("#thread-title").textContent.trim()`); got != title {
		t.Errorf("imported title %q, want %q", got, title)
	}
	if !u.yes(`document.querySelector('#thread-link-` + imported + `')`) {
		t.Error("the imported thread is not in the sidebar")
	}
	// The other branch came along.
	edited := u.userID("two edited")
	u.act("previous version in the import", click(`#m`+edited+` [data-testid=branch-prev]`),
		trPos(trUsers+`[1]`)+` === "1/2"`)
	if got, want := u.convo(), []string{"user: one", "assistant: You said: one", "user: two", "assistant: You said: two"}; !slices.Equal(got, want) {
		t.Errorf("the imported hidden branch shows %q, want %q", got, want)
	}
}

// trWorkspace switches the workspace with the sidebar's switcher and waits
// for the home page.
func (u *trUI) trWorkspace(name string) {
	u.t.Helper()
	u.act("switch to "+name, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const s = document.querySelector("#ws-select");
			s.value = [...s.options].find(o => o.text === %q).value;
			s.dispatchEvent(new Event("change", {bubbles: true}));
		})()`, name)),
		`location.pathname === "/" && document.querySelector("#ws-select").selectedOptions[0].text === `+strconv.Quote(name))
}

func (u *trUI) sidebarHas(thread string) bool {
	u.t.Helper()
	return u.yes(`document.querySelector('#thread-link-` + thread + `')`)
}

// 8. A thread moves to another workspace, is archived and unarchived.
func TestBrowserTreeAThreadMovesArchivesAndUnarchives(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	thread := u.startThread("move me along")
	u.open("/workspaces", `document.querySelector('[data-testid=workspace-create]')`)
	u.act("create a second workspace",
		chromedp.Steps(
			typeInto(`[data-testid=workspace-create] input[name=name]`, "Second"),
			submit(`[data-testid=workspace-create]`),
		),
		`document.querySelector('[data-testid=composer]')`)
	u.trWorkspace("Personal")
	if !u.sidebarHas(thread) {
		t.Fatal("the thread is not in its workspace's sidebar")
	}
	u.act("open the thread", click(`#thread-link-`+thread), `location.pathname === "/t/`+thread+`"`)

	u.do("open the thread menu", click(`details.thread-actions summary`),
		waitFor(`document.querySelector('[data-testid=move-form]')?.checkVisibility()`))
	second := u.str(`[...document.querySelectorAll('[data-testid=move-form] select[name=workspace_id] option')].find(o => o.text === "Second")?.value ?? ""`)
	if second == "" {
		t.Fatal("Second is not offered to move to")
	}
	u.act("move",
		chromedp.Steps(
			setValue(`[data-testid=move-form] select[name=workspace_id]`, second),
			click(`[data-testid=move]`),
		),
		`location.pathname === "/t/`+thread+`"`)
	if got := u.str(`document.querySelector("#ws-select").selectedOptions[0].text`); got != "Second" {
		t.Errorf("after moving, the thread page shows workspace %q", got)
	}
	if !u.sidebarHas(thread) {
		t.Error("after moving, the thread is not in the sidebar of its new workspace")
	}

	u.trWorkspace("Personal")
	if u.sidebarHas(thread) {
		t.Error("the moved thread is still in the first workspace's sidebar")
	}
	u.trWorkspace("Second")
	if !u.sidebarHas(thread) {
		t.Error("the moved thread is not in the second workspace's sidebar")
	}

	u.act("open the thread", click(`#thread-link-`+thread), `location.pathname === "/t/`+thread+`"`)
	u.do("open the thread menu", click(`details.thread-actions summary`),
		waitFor(`document.querySelector('[data-testid=archive]')?.checkVisibility()`))
	u.act("archive", click(`[data-testid=archive]`),
		`location.pathname === "/t/`+thread+`" && document.querySelector('[data-testid=archive]')?.textContent.trim() === "Unarchive"`)
	if u.sidebarHas(thread) {
		t.Error("the archived thread is still in the sidebar")
	}
	u.act("open the archive", click(`a[href^="/archived"]`), `location.pathname === "/archived"`)
	archived := trEval[[]string](u, `[...document.querySelectorAll('[data-testid=archived-thread]')].map(r => r.dataset.threadId)`)
	if !slices.Equal(archived, []string{thread}) {
		t.Fatalf("/archived lists %q, want [%s]", archived, thread)
	}
	u.act("unarchive", click(`[data-testid=archived-thread][data-thread-id="`+thread+`"] [data-testid=unarchive]`),
		`location.pathname === "/t/`+thread+`"`)
	if !u.sidebarHas(thread) {
		t.Error("the unarchived thread is not back in the sidebar")
	}
	u.open("/archived", `location.pathname === "/archived"`)
	if n := u.num(`document.querySelectorAll('[data-testid=archived-thread]').length`); n != 0 {
		t.Errorf("/archived still lists %d threads after unarchiving", n)
	}
}

// 8b. The sidebar of a thread page belongs to the thread's workspace (its
// switcher shows it selected); its Archived link must list that workspace's
// archive. Reached naturally: move a thread out of the current workspace,
// then archive it from the page the move lands on.
func TestBrowserTreeArchivedLinkFollowsTheShownWorkspace(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	thread := u.startThread("move then archive")
	u.open("/workspaces", `document.querySelector('[data-testid=workspace-create]')`)
	u.act("create a second workspace",
		chromedp.Steps(
			typeInto(`[data-testid=workspace-create] input[name=name]`, "Second"),
			submit(`[data-testid=workspace-create]`),
		),
		`document.querySelector('[data-testid=composer]')`)
	u.trWorkspace("Personal")
	u.act("open the thread", click(`#thread-link-`+thread), `location.pathname === "/t/`+thread+`"`)
	u.do("open the thread menu", click(`details.thread-actions summary`),
		waitFor(`document.querySelector('[data-testid=move-form]')?.checkVisibility()`))
	u.act("move to Second", click(`[data-testid=move]`), `location.pathname === "/t/`+thread+`"`)
	shown := u.str(`document.querySelector("#ws-select").selectedOptions[0].text`)
	if shown != "Second" {
		t.Fatalf("the thread page shows workspace %q, want Second", shown)
	}
	u.do("open the thread menu", click(`details.thread-actions summary`),
		waitFor(`document.querySelector('[data-testid=archive]')?.checkVisibility()`))
	u.act("archive", click(`[data-testid=archive]`),
		`location.pathname === "/t/`+thread+`" && document.querySelector('[data-testid=archive]')?.textContent.trim() === "Unarchive"`)
	u.act("follow the sidebar's Archived link", click(`a[href^="/archived"]`), `location.pathname === "/archived"`)
	heading := u.str(`document.querySelector("main h1")?.textContent.trim() ?? ""`)
	archived := trEval[[]string](u, `[...document.querySelectorAll('[data-testid=archived-thread]')].map(r => r.dataset.threadId)`)
	if !slices.Contains(archived, thread) {
		t.Errorf("from a page showing workspace %q, the Archived link shows %q listing %q: the thread just archived there is missing", shown, heading, archived)
	}
}

// 9. Drafts are kept per thread across navigation and reloads; ↑ edits the
// last message; Enter sends.
func TestBrowserTreeKeyboardShortcutsWorkAndDraftsSurviveNavigation(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	thread := u.startThread("first message")
	const draft = "a draft in progress"
	u.do("type a draft", typeInto(trComposer, draft))
	u.wait("the draft is saved", `Object.keys(localStorage).some(k => k.startsWith("weft:draft:") && localStorage.getItem(k) === `+strconv.Quote(draft)+`)`)

	u.act("go to a new thread", click(`a.new-thread`), `location.pathname === "/" && document.querySelector('`+trComposer+`')`)
	if got := u.str(`document.querySelector('` + trComposer + `').value`); got != "" {
		t.Errorf("the new-thread composer shows %q, want empty (drafts are per thread)", got)
	}
	u.do("type a home draft", typeInto(trComposer, "home draft"))
	u.act("back to the thread", click(`#thread-link-`+thread), `location.pathname === "/t/`+thread+`" && `+trLast)
	u.wait("the draft is restored", `document.querySelector('`+trComposer+`').value === `+strconv.Quote(draft))
	u.act("reload", chromedp.Reload(), trLast)
	u.wait("the draft survives a reload", `document.querySelector('`+trComposer+`').value === `+strconv.Quote(draft))
	u.open("/", `document.querySelector('`+trComposer+`')`)
	u.wait("the home draft is its own", `document.querySelector('`+trComposer+`').value === "home draft"`)
	u.open("/t/"+thread, trLast)

	u.do("send the draft", click(`[data-testid=send]`),
		waitFor(trUsers+`.length === 2 && `+trAnswers+`.length === 2 && `+trLast+`.dataset.status === "complete"`))
	if got := u.str(trText(trUsers + `[1]`)); got != draft {
		t.Errorf("sent %q, want the draft", got)
	}
	u.act("reload after sending", chromedp.Reload(), trLast)
	if got := u.str(`document.querySelector('` + trComposer + `').value`); got != "" {
		t.Errorf("after sending and reloading the composer shows %q, want it empty", got)
	}

	// ↑ in the empty composer edits the last message sent.
	u.do("press ↑ in the empty composer", typeInto(trComposer, kb.ArrowUp))
	last := `(` + trUsers + `.at(-1))`
	u.wait("the last message's editor is open and focused",
		last+`.querySelector('details.edit').open && document.activeElement === `+last+`.querySelector('[data-testid=edit-form] textarea')`)
	if got := u.str(`document.activeElement.value`); got != draft {
		t.Errorf("the editor holds %q, want the last message %q", got, draft)
	}
	if u.yes(trUsers + `[0].querySelector('details.edit').open`) {
		t.Error("↑ also opened the first message's editor")
	}

	// ↑ with text in the composer moves the caret, not into the editor.
	u.act("reload", chromedp.Reload(), trLast)
	u.do("press ↑ with text", typeInto(trComposer, "x"), chromedp.KeyEvent(kb.ArrowUp))
	if u.yes(trUsers + `.some(m => m.querySelector('details.edit').open)`) {
		t.Error("↑ in a composer with text opened an editor")
	}

	// Enter sends.
	u.do("clear", chromedp.Evaluate[chromedp.Void](`document.querySelector('`+trComposer+`').value = ""`))
	u.do("type and press Enter",
		typeInto(trComposer, "sent with enter"),
		chromedp.KeyEvent(kb.Enter),
		waitFor(trUsers+`.length === 3 && `+trLast+`.dataset.status === "complete"`))
	if got := u.str(trText(trUsers + `[2]`)); got != "sent with enter" {
		t.Errorf("Enter sent %q", got)
	}
}

// 10. A long thread opens at its last page; scrolling up loads the earlier
// pages until the first message.
func TestBrowserTreeALongThreadOpensAtItsLastPageAndLoadsEarlierPagesUpward(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	thread := u.startThread("message 1")
	ctx := context.Background()
	const total = 300
	tx, err := u.app.Store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var leaf int64
	if err := tx.QueryRow(ctx, "SELECT active_leaf_id FROM threads WHERE id = $1", thread).Scan(&leaf); err != nil {
		t.Fatal(err)
	}
	for i := 3; i <= total; i++ {
		role := "user"
		if i%2 == 0 {
			role = "assistant"
		}
		if err := tx.QueryRow(ctx, `INSERT INTO messages (thread_id, parent_id, role, content) VALUES ($1, $2, $3, $4) RETURNING id`,
			thread, leaf, role, "message "+strconv.Itoa(i)).Scan(&leaf); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, "UPDATE threads SET active_leaf_id = $2 WHERE id = $1", thread, leaf); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// What the server sends: the last page only, with a loader above it.
	status, _, _, html := u.fetch("/t/" + thread)
	if status != 200 {
		t.Fatalf("GET /t/%s: %d", thread, status)
	}
	if n := strings.Count(html, `data-testid="message"`); n == 0 || n > 100 {
		t.Errorf("the thread page holds %d messages, want the last page (at most 100)", n)
	}
	if !strings.Contains(html, `hx-trigger="revealed"`) || !strings.Contains(html, ">message "+strconv.Itoa(total)+"<") {
		t.Error("the thread page lacks the loader of earlier messages or the last message")
	}
	if strings.Contains(html, `data-testid="message-body">message 1<`) {
		t.Error("the thread page already holds the first message")
	}

	u.open("/t/"+thread+"#m"+strconv.FormatInt(leaf, 10), trLast)
	if n := u.num(trMsgs + `.length`); n > 200 {
		t.Errorf("%d messages right after opening, want the last page and at most one more", n)
	}
	u.wait("scrolling up loads everything", `(() => {
		window.scrollTo(0, 0);
		document.querySelector("li.older")?.scrollIntoView();
		return `+trText(trUsers+`[0]`)+` === "message 1" && !document.querySelector("li.older");
	})()`)
	texts := trEval[[]string](u, trMsgs+`.map(m => `+trText("m")+`)`)
	if len(texts) != total {
		t.Fatalf("%d messages after scrolling to the top, want %d", len(texts), total)
	}
	for i, s := range texts {
		want := "message " + strconv.Itoa(i+1)
		if i == 1 {
			want = "You said: message 1"
		}
		if s != want {
			t.Fatalf("message %d is %q, want %q (order or duplicates)", i+1, s, want)
		}
	}
	seen := map[string]bool{}
	for _, id := range u.ids() {
		if seen[id] {
			t.Errorf("message %s is shown twice", id)
		}
		seen[id] = true
	}
}

// 11. An answer that completes while the page showing it is being rendered
// must not stay "streaming" on that page. The thread page reads the path
// (the answer still streaming) and, a few queries later, the active runs
// (the run already finished): the answer is then rendered as a final
// message with status streaming and no event stream, and nothing ever
// updates it. Regenerating with a fast model hits that window now and then,
// more often on a busy machine; this test tries it many times.
func TestBrowserTreeInstantAnswerNeverStuckStreaming(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	u.startThread("hello")
	var delay atomic.Int64
	u.app.Fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if trIsTitle(req) {
			return fakeollama.DefaultReply(req)
		}
		time.Sleep(time.Duration(delay.Load())) // the model's latency under test, not a wait
		return fakeollama.Reply{Chunks: []string{"Fast ", "answer."}}
	})
	for i := range 40 {
		// Sweep the model's latency across the page's rendering time.
		delay.Store(int64(i%8) * int64(2*time.Millisecond))
		a := u.str(trLast + `.dataset.messageId`)
		u.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__trOld = true`))
		u.do(fmt.Sprintf("regenerate (round %d)", i+1), click(`#m`+a+` [data-testid=regenerate]`),
			waitFor(`!window.__trOld && document.readyState === "complete" && `+trLast+`.dataset.messageId !== "`+a+`" && (`+
				trLast+`.dataset.status === "complete" || `+trStuck+`)`))
		if !u.yes(trStuck) {
			continue
		}
		id := u.str(trStuck + `.dataset.messageId`)
		var status string
		if err := u.app.Store.Pool.QueryRow(context.Background(), "SELECT status FROM messages WHERE id = $1", id).Scan(&status); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("round %d (model latency %v): answer %s is %s in the database, but the page shows it streaming, "+
			"rendered as a final message with no event stream and no stop button (class %q), so it never updates without a reload",
			i+1, time.Duration(delay.Load()), id, status, u.str(trStuck+`.className`))
	}
}
