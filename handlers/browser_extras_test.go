package handlers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/ollama/ollama/api"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// Browser tests of issue 21's extras: copy a whole message, the route
// badge, math as MathML, the notice of an answer finished in a hidden tab,
// and the keyboard reaching every message action. Helpers are prefixed
// "ex"; the page helpers are trUI's (browser_tree_test.go).

// exAnswer makes the fake answer every chat request with text (titles and
// summaries keep their default answers).
func exAnswer(f *fakeollama.Server, text string) {
	f.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if req.Stream != nil && !*req.Stream {
			return fakeollama.DefaultReply(req)
		}
		return fakeollama.Reply{Chunks: []string{text}}
	})
}

// exGrant grants the page's origin the permissions named (clipboard-read,
// notifications, …) and makes the page count as focused, which the
// clipboard requires of a headless tab.
func exGrant(u *trUI, names ...string) {
	u.t.Helper()
	for _, name := range names {
		if _, err := chromedp.CallBrowser(u.ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted,
			Origin: u.app.TS.URL,
		}); err != nil {
			u.t.Fatalf("grant %s: %v", name, err)
		}
	}
	if _, err := chromedp.Call(u.ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		u.t.Fatalf("focus emulation: %v", err)
	}
}

// exClipboard is the text on the clipboard.
func exClipboard(u *trUI) string {
	u.t.Helper()
	v, err := chromedp.Run(u.ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil {
		u.t.Fatalf("read the clipboard: %v", err)
	}
	return v
}

const (
	exAnswerCopy = `document.querySelector('[data-testid=message][data-role=assistant] [data-testid=copy-message]')`
	exUserCopy   = `document.querySelector('[data-testid=message][data-role=user] [data-testid=copy-message]')`
	exAnnounced  = `(document.querySelector('[data-testid=announcer]')?.textContent ?? "")`
)

func TestBrowserCopyPutsAWholeMessageOnTheClipboardAsMarkdown(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	answer := "Use **bold** and `code`:\n\n```go\nx := 1\n```\n\n- a list with $e^{i\\pi}$\n"
	exAnswer(u.app.Fake, answer)
	exGrant(u, "clipboard-read", "clipboard-write")
	question := "How do I *format* this?\n\nWith two paragraphs."
	u.act("start a thread", chromedp.Steps(setValue(trComposer, question), click(`[data-testid=send]`)),
		`location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete"`)
	// Its name is its label, which app.css shows as its tooltip (an icon
	// button's, TestBrowserMessageActionsAreLabelledIconButtonsShownOnHoverFocusAndTouch).
	if u.str(exAnswerCopy+`.getAttribute("aria-label")`) == "" || u.str(`String(`+exAnswerCopy+`.matches(".icon-btn[aria-label]"))`) != "true" {
		t.Errorf("the copy button has no label or tooltip: %s", u.str(exAnswerCopy+`.outerHTML`))
	}

	u.do("copy the answer", click(`[data-testid=message][data-role=assistant] [data-testid=copy-message]`),
		waitFor(exAnswerCopy+`.classList.contains("copied") && `+exAnswerCopy+`.textContent.includes("Copied")`))
	if got := exClipboard(u); got != answer {
		t.Errorf("the clipboard holds %q, want the answer's markdown %q", got, answer)
	}
	if got := u.str(exAnnounced); !strings.Contains(got, "Message copied") {
		t.Errorf("the copy was announced as %q", got)
	}
	u.wait("the button comes back", `!`+exAnswerCopy+`.classList.contains("copied") && `+exAnswerCopy+`.textContent.trim() === ""`)

	u.do("copy the question", click(`[data-testid=message][data-role=user] [data-testid=copy-message]`),
		waitFor(exUserCopy+`.classList.contains("copied")`))
	if got := exClipboard(u); got != question {
		t.Errorf("the clipboard holds %q, want the question %q", got, question)
	}
}

func TestBrowserEachAnswerShowsTheRouteThatAnsweredIt(t *testing.T) {
	t.Parallel()
	u := newTreeUIWith(t, testenv.Options{DefaultModel: "toolie"})
	badge := func() string {
		return u.str(`(` + trLast + `?.querySelector('[data-testid=route-badge]')?.textContent ?? "").trim()`)
	}
	u.act("chat", chromedp.Steps(setValue(trComposer, "hello"), click(`[data-testid=send]`)),
		`location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete"`)
	if got := badge(); got != "chat" {
		t.Errorf("a chat answer's badge says %q", got)
	}
	if n := u.num(`document.querySelectorAll('[data-testid=message][data-role=user] [data-testid=route-badge]').length`); n != 0 {
		t.Errorf("%d questions carry a route badge", n)
	}
	thread := u.path()

	u.do("agent", click(`[data-testid=composer] input[name=agent]`), setValue(trComposer, "and now with tools"),
		click(`[data-testid=send]`), waitFor(trAnswers+`.length === 2 && `+trLast+`.dataset.status === "complete"`))
	if got := badge(); got != "agent" {
		t.Errorf("an agent answer's badge says %q (route %s)", got, u.str(trLast+`.dataset.route`))
	}

	// A knowledge base with one ready document, ticked for the next message.
	u.open("/kb", `document.querySelector('[data-testid=kb-create]')`)
	u.act("create a knowledge base", chromedp.Steps(
		setValue(`[data-testid=kb-create] input[name=name]`, "Notes"),
		click(`[data-testid=kb-create] button[type=submit]`),
	), `location.pathname.startsWith("/kb/") && document.querySelector('[data-testid=kb-upload]')`)
	file := filepath.Join(t.TempDir(), "trams.md")
	if err := os.WriteFile(file, []byte("# Trams\n\nTram 28 climbs through Alfama to the castle.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u.act("upload", chromedp.Steps(
		uploadFiles(`[data-testid=kb-upload] input[name=files]`, []string{file}),
		click(`[data-testid=kb-upload] button[type=submit]`),
	), `document.querySelector('[data-testid=kb-document]')`)
	u.wait("ready", `document.querySelector('[data-testid=kb-document][data-status=ready]')`)
	u.open(thread, `document.querySelector('[data-testid=composer] input[name=kb]')`)
	u.do("knowledge",
		pageAct(`[data-testid=composer] input[name=agent]`, false, `(el) => { el.checked = false; return "" }`),
		pageAct(`[data-testid=composer] input[name=kb]`, false, `(el) => { el.checked = true; return "" }`),
		setValue(trComposer, "Which tram goes through Alfama?"), click(`[data-testid=send]`),
		waitFor(trAnswers+`.length === 3 && `+trLast+`.dataset.status === "complete"`))
	if got := badge(); got != "knowledge" {
		t.Errorf("a knowledge answer's badge says %q (route %s)", got, u.str(trLast+`.dataset.route`))
	}

	// After a reload every answer still says how it was answered.
	u.open(thread, trAnswers+`.length === 3`)
	got := u.str(trAnswers + `.map(m => m.querySelector('[data-testid=route-badge]')?.textContent.trim()).join(" ")`)
	if got != "chat agent knowledge" {
		t.Errorf("after a reload the badges read %q, want chat agent knowledge", got)
	}
}

func TestBrowserMathInAnAnswerIsShownAsMathML(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	exAnswer(u.app.Fake, "Euler: $e^{i\\pi}+1=0$, and prices stay text: $5 or $10.\n\n$$\n\\frac{a+b}{2} \\le \\sqrt{x}\n$$\n")
	u.act("start a thread", chromedp.Steps(setValue(trComposer, "math please"), click(`[data-testid=send]`)),
		`location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete"`)
	check := func(when string) {
		body := trLast + `.querySelector('[data-testid=message-body]')`
		if n := u.num(body + `.querySelectorAll('math').length`); n != 2 {
			t.Errorf("%s: %d <math> elements, want 2: %s", when, n, u.str(body+`.innerHTML`))
			return
		}
		if !u.yes(`[...` + body + `.querySelectorAll('math')].every(m => m.namespaceURI === "http://www.w3.org/1998/Math/MathML")`) {
			t.Errorf("%s: the <math> elements are not MathML", when)
		}
		// Chromium lays the fraction out: the numerator above the denominator.
		if !u.yes(`(() => { const f = ` + body + `.querySelector('math[display=block] mfrac');
			return f && f.children[0].getBoundingClientRect().bottom <= f.children[1].getBoundingClientRect().top + 1 })()`) {
			t.Errorf("%s: the fraction is not laid out as one", when)
		}
		if text := u.str(body + `.textContent`); !strings.Contains(text, "$5 or $10") || strings.Contains(text, `\frac`) {
			t.Errorf("%s: the text reads %q", when, text)
		}
	}
	check("as it arrived")
	u.open(u.path(), trLast+`?.dataset.status === "complete"`)
	check("after a reload")
}

func TestBrowserAnAnswerFinishedInAHiddenTabMarksTheTitleAndNotifiesWhenAskedTo(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	exGrant(u, "notifications")

	// The notification is opt-in, from Settings.
	u.open("/settings", `document.querySelector('[data-testid=notify-toggle]')?.checkVisibility()`)
	if got := u.str(`document.querySelector('[data-testid=notify-toggle]').getAttribute("aria-pressed")`); got != "false" {
		t.Errorf("notifications start %q, want off (false)", got)
	}
	u.do("turn notifications on", click(`[data-testid=notify-toggle]`),
		waitFor(`document.querySelector('[data-testid=notify-toggle]').getAttribute("aria-pressed") === "true" && `+
			`document.querySelector('[data-notify-state]').textContent.startsWith("On")`))

	u.open("/", `document.querySelector('[data-testid=composer]')`)
	u.act("start a thread", chromedp.Steps(setValue(trComposer, "first"), click(`[data-testid=send]`)),
		`location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete"`)
	u.open(u.path(), trLast+`?.dataset.status === "complete"`) // with its title
	title := u.str(`document.title`)
	threadTitle := u.str(`document.getElementById("thread-title").textContent.trim()`)

	// The tab is hidden (as the page sees it) and notifications are recorded.
	u.do("hide the tab", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__visibility = "hidden";
		Object.defineProperty(document, "visibilityState", {configurable: true, get: () => window.__visibility});
		Object.defineProperty(document, "hidden", {configurable: true, get: () => window.__visibility === "hidden"});
		document.dispatchEvent(new Event("visibilitychange"));
		window.__notes = [];
		const Real = window.Notification;
		window.Notification = class extends Real {
			constructor(title, options) { window.__notes.push({title, body: options?.body ?? ""}); super(title, options); }
		};
	})()`))
	release := chHold(t, u.app.Fake, nil)
	u.do("send", setValue(trComposer, "second"), click(`[data-testid=send]`),
		waitFor(trAnswers+`.length === 2 && `+trLast+`.dataset.status === "streaming"`))
	if got := u.str(`document.title`); got != title {
		t.Errorf("while the answer streams the title is %q, want %q", got, title)
	}
	release()
	u.wait("the answer finishes", trLast+`.dataset.status === "complete"`)
	u.wait("the title says so", `document.title === "Answer finished · " + `+jsString(title))
	notes := u.str(`JSON.stringify(window.__notes)`)
	if want := `[{"title":"Answer finished · ` + threadTitle + `","body":"You said: second"}]`; notes != want {
		t.Errorf("notifications %s, want %s", notes, want)
	}
	if got := u.str(exAnnounced); got != "Answer finished: You said: second" {
		t.Errorf("the finished answer was announced as %q", got)
	}

	// Looking at the tab puts the title back; an answer finishing in view
	// changes neither the title nor the notifications.
	u.do("show the tab", chromedp.Evaluate[chromedp.Void](`window.__visibility = "visible"; document.dispatchEvent(new Event("visibilitychange"))`))
	u.wait("the title is back", `document.title === `+jsString(title))
	u.do("send in view", setValue(trComposer, "third"), click(`[data-testid=send]`),
		waitFor(trAnswers+`.length === 3 && `+trLast+`.dataset.status === "complete"`))
	if got, n := u.str(`document.title`), u.num(`window.__notes.length`); got != title || n != 1 {
		t.Errorf("after an answer in view: title %q, %d notifications; want %q and 1", got, n, title)
	}
}

func TestBrowserEveryMessageActionIsReachedWithTheKeyboard(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	exGrant(u, "clipboard-read", "clipboard-write")
	u.act("start a thread", chromedp.Steps(setValue(trComposer, "hello there"), click(`[data-testid=send]`)),
		`location.pathname.startsWith("/t/") && `+trLast+`?.dataset.status === "complete"`)
	u.open(u.path(), trLast+`?.dataset.status === "complete"`)

	// Every control of a message, except what sits in a closed <details>
	// (its summary opens it), is numbered; Tab from the top of the page must
	// reach each one before the composer.
	total := u.num(`(() => {
		const all = [...document.querySelectorAll('[data-testid=message] :is(button, summary, a[href], select, textarea, input:not([type=hidden]))')]
			.filter(el => !el.closest('details:not([open])') || el.matches('details:not([open]) > summary') && !el.parentElement.parentElement?.closest('details:not([open])'));
		all.forEach((el, i) => { el.dataset.kbd = String(i); });
		document.activeElement?.blur();
		window.scrollTo(0, 0);
		return all.length;
	})()`)
	for _, want := range []string{"copy-message", "regenerate", "fork", "delete-message", "edit"} {
		if !u.yes(`document.querySelector('[data-testid=message] [data-testid=` + want + `][data-kbd]')`) {
			t.Errorf("no %s control among the message actions", want)
		}
	}
	seen := map[string]bool{}
	for range 300 {
		u.do("tab", chromedp.KeyEvent(kb.Tab))
		if u.yes(`document.activeElement?.matches('[data-testid=composer] textarea')`) {
			break
		}
		if k := u.str(`document.activeElement?.dataset.kbd ?? ""`); k != "" {
			seen[k] = true
		}
	}
	if len(seen) != total {
		missed := u.str(`[...document.querySelectorAll('[data-kbd]')].filter(el => !(` + jsString(strings.Join(keys(seen), ",")) +
			`.split(",").includes(el.dataset.kbd))).map(el => el.dataset.testid || el.outerHTML.slice(0, 60)).join(" | ")`)
		t.Errorf("Tab reached %d of the %d message controls; missed: %s", len(seen), total, missed)
	}

	// Enter on the focused copy button copies, as a click does.
	u.do("focus copy", pageAct(`[data-testid=message][data-role=assistant] [data-testid=copy-message]`, true,
		`(el) => { el.focus(); return document.activeElement === el ? "" : "no focus" }`))
	u.do("press Enter", chromedp.KeyEvent(kb.Enter), waitFor(exAnswerCopy+`.classList.contains("copied")`))
	if got := exClipboard(u); !strings.HasPrefix(got, "You said: hello there") {
		t.Errorf("Enter on copy put %q on the clipboard", got)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
