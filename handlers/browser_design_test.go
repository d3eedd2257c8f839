package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"weft/internal/testenv"
)

// Browser tests of the interface of issue 21: the phone layout (the
// conversation first, the sidebar a drawer, 44 px touch targets), the
// theme toggle, and message actions as icon buttons that show on hover,
// on keyboard focus and always on a touch screen. Helpers are prefixed
// "ds".

// dsUI is a signed-in browser on a Weft with one thread of two exchanges
// (the second answer is long, with code and a table).
type dsUI struct {
	t      *testing.T
	ctx    context.Context
	base   string
	thread string // the thread's path, /t/{id}
}

func newDSUI(t *testing.T) *dsUI {
	t.Helper()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	app.Fake.SetScript(scScript)
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("grace@example.com", password)
	u, err := app.Store.UserByEmail(context.Background(), "grace@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := app.Store.DefaultWorkspace(context.Background(), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(ws.ID)}, "content": {"How often should I feed a bread starter?"}})
	var thread int64
	if _, err := fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &thread); r.StatusCode != http.StatusSeeOther || err != nil {
		t.Fatalf("start a thread: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	waitIdle(t, app.Store, u.ID, thread)
	if r := c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"And how do I size a worker pool in Go?"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("second message: %d", r.StatusCode)
	}
	waitIdle(t, app.Store, u.ID, thread)

	ui := &dsUI{t: t, ctx: testenv.Browser(t, 3*time.Minute), base: app.TS.URL, thread: fmt.Sprintf("/t/%d", thread)}
	ui.do("sign in",
		chromedp.Navigate(app.TS.URL+"/login"),
		typeInto(`input[name=email]`, "grace@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=login]`),
		waitFor(`location.pathname === "/" && document.querySelector("[data-testid=composer]")`))
	return ui
}

func (u *dsUI) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	u.t.Helper()
	if err := chromedp.Do(u.ctx, actions...); err != nil {
		u.t.Fatalf("%s: %v", what, err)
	}
}

func dsEval[T any](u *dsUI, expr string) T {
	u.t.Helper()
	v, err := chromedp.Run(u.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		u.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (u *dsUI) str(expr string) string { u.t.Helper(); return dsEval[string](u, "String("+expr+")") }
func (u *dsUI) yes(expr string) bool   { u.t.Helper(); return dsEval[bool](u, "Boolean("+expr+")") }

// open shows a page of the app in a window of the size given, once it
// has settled.
func (u *dsUI) open(path string, size scSize, scheme string) {
	u.t.Helper()
	u.do("open "+path+" on a "+size.name, scView(size, scheme), chromedp.Navigate(u.base+path), waitFor(scSettled))
}

var (
	dsLaptop = scSizes[0]
	dsPhone  = scSizes[1]
)

// dsShown is true when the element matching sel is rendered and visible
// (CSS visibility included).
func dsShown(sel string) string {
	return `(document.querySelector(` + jsQuote(sel) + `)?.checkVisibility({visibilityProperty: true}) ?? false)`
}

func jsQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

func TestBrowserOnAPhoneTheConversationOpensFirstAndTheSidebarIsADrawer(t *testing.T) {
	t.Parallel()
	u := newDSUI(t)

	u.open(u.thread, dsPhone, "light")
	if u.yes(dsShown(`#sidebar`)) || u.yes(dsShown(`[data-testid=thread-link]`)) {
		t.Errorf("on a phone the thread list is shown with the conversation")
	}
	if !u.yes(dsShown(`[data-testid=message]`)) || !u.yes(dsShown(`[data-drawer-open]`)) {
		t.Fatalf("on a phone the conversation or the menu button is not shown")
	}
	// The composer is on screen at the bottom while the thread is read
	// from its top.
	u.do("read from the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`), waitFor(`scrollY === 0`))
	if got := u.str(`(() => { const r = document.querySelector("[data-testid=composer]").getBoundingClientRect(); return Math.round(innerHeight - r.bottom) })()`); got != "0" {
		t.Errorf("the composer ends %s px above the bottom of the window, want 0 (sticky at the bottom)", got)
	}
	if wide := u.str(`document.documentElement.scrollWidth`); wide != "390" {
		t.Errorf("the page is %s px wide in a window of 390", wide)
	}

	// Every control a finger uses is at least 44 × 44 px.
	small := u.str(`[...document.querySelectorAll(".topbar :is(a, button), .main :is(button, select, summary, label.chip, a.icon-btn)")]
		.filter((el) => el.checkVisibility({visibilityProperty: true}) && !el.closest(".visually-hidden, .popover-card, [hidden]"))
		.map((el) => [el, el.getBoundingClientRect()])
		.filter(([el, r]) => r.width < 44 - 0.5 || r.height < 44 - 0.5)
		.map(([el, r]) => (el.dataset.testid || el.getAttribute("aria-label") || el.textContent.trim().slice(0, 20) || el.tagName) + " " + Math.round(r.width) + "×" + Math.round(r.height))
		.join("; ")`)
	if small != "" {
		t.Errorf("touch targets smaller than 44 px on a phone: %s", small)
	}

	// The menu button opens the drawer and moves the focus into it; Esc
	// shuts it and brings the focus back.
	u.do("open the drawer", click(`[data-drawer-open]`),
		waitFor(`document.querySelector(".app").dataset.drawer === "open" && `+dsShown(`[data-testid=thread-link]`)))
	if got := u.str(`document.querySelector("[data-drawer-open]").getAttribute("aria-expanded")`); got != "true" {
		t.Errorf("the open drawer's button says aria-expanded=%s", got)
	}
	if !u.yes(`document.activeElement?.matches("#sidebar .drawer-close")`) {
		t.Errorf("opening the drawer leaves the focus on %s", u.str(`document.activeElement?.outerHTML.slice(0, 80)`))
	}
	if !u.yes(`document.querySelector("main").inert && document.querySelector(".topbar").inert`) {
		t.Errorf("behind the open drawer the page still takes the keyboard")
	}
	u.do("Esc shuts the drawer", chromedp.KeyEvent(kb.Escape),
		waitFor(`document.querySelector(".app").dataset.drawer === "closed" && !`+dsShown(`#sidebar`)))
	if !u.yes(`document.activeElement?.matches("[data-drawer-open]")`) || u.str(`document.querySelector("[data-drawer-open]").getAttribute("aria-expanded")`) != "false" {
		t.Errorf("after Esc the focus is on %s", u.str(`document.activeElement?.outerHTML.slice(0, 80)`))
	}
	if u.yes(`document.querySelector("main").inert`) {
		t.Errorf("after the drawer shut the page stays inert")
	}
	// The scrim shuts it too, and a thread in it can be opened.
	u.do("open it again and tap the scrim", click(`[data-drawer-open]`), waitFor(dsShown(`.scrim`)+` && getComputedStyle(document.querySelector(".scrim")).opacity === "1"`),
		chromedp.MouseClickXY(380, 400), waitFor(`document.querySelector(".app").dataset.drawer === "closed"`))
	u.do("open a thread from the drawer", click(`[data-drawer-open]`), click(`[data-testid=thread-link]`),
		waitFor(`location.pathname === `+jsQuote(u.thread)+` && document.readyState === "complete"`))

	// On a laptop the same page shows the sidebar beside the conversation,
	// without the phone's top bar.
	u.open(u.thread, dsLaptop, "light")
	if !u.yes(dsShown(`[data-testid=thread-link]`)) || u.yes(dsShown(`.topbar`)) || u.yes(dsShown(`[data-drawer-open]`)) {
		t.Errorf("on a laptop the sidebar is hidden or the phone's top bar shown")
	}
	if got := u.str(`document.querySelector("#sidebar").getBoundingClientRect().right <= document.querySelector("[data-testid=message]").getBoundingClientRect().left`); got != "true" {
		t.Errorf("on a laptop the sidebar is not beside the conversation")
	}
}

// dsBackground is the page's background colour.
const dsBackground = `getComputedStyle(document.body).backgroundColor`

func TestBrowserTheThemeToggleOverridesTheSystemSchemeAndIsKeptInThisBrowser(t *testing.T) {
	t.Parallel()
	u := newDSUI(t)
	const light, dark = "rgb(255, 255, 255)", "rgb(19, 20, 23)"
	// A keyword in the answer's Go code (chroma's class k).
	const keyword = `getComputedStyle(document.querySelector(".chroma .k")).color`

	u.open(u.thread, dsLaptop, "light")
	if bg := u.str(dsBackground); bg != light || u.yes(`document.documentElement.dataset.theme`) {
		t.Fatalf("with a light system and no choice the page is %s (data-theme %q)", bg, u.str(`document.documentElement.dataset.theme`))
	}
	if got := u.str(`document.querySelector("[data-testid=theme-toggle]").getAttribute("aria-pressed")`); got != "false" {
		t.Errorf("the toggle says dark is %s on a light page", got)
	}
	lightKeyword := u.str(keyword)

	u.do("switch to dark", click(`[data-testid=theme-toggle]`), waitFor(dsBackground+` === "`+dark+`"`))
	if got := u.str(`document.querySelector("[data-testid=theme-toggle]").getAttribute("aria-pressed") + " " + localStorage.getItem("weft:theme")`); got != "true dark" {
		t.Errorf("after switching to dark the toggle and the stored choice are %q", got)
	}
	if got := u.str(keyword); got == lightKeyword || got != "rgb(255, 123, 114)" {
		t.Errorf("code keeps its light colours in the dark theme: keyword %s (light %s)", got, lightKeyword)
	}

	// Kept across pages and reloads, applied before the page is drawn.
	u.open("/settings", dsLaptop, "light")
	if bg := u.str(dsBackground); bg != dark || u.str(`document.documentElement.dataset.theme`) != "dark" {
		t.Errorf("another page after choosing dark is %s", bg)
	}

	// Under a dark system, choosing light is kept; choosing dark again
	// is the system's own, so nothing is stored and the system leads.
	u.open(u.thread, dsLaptop, "dark")
	u.do("switch to light", click(`[data-testid=theme-toggle]`), waitFor(dsBackground+` === "`+light+`"`))
	if got := u.str(`localStorage.getItem("weft:theme")`); got != "light" {
		t.Errorf("choosing light under a dark system stored %q", got)
	}
	if got := u.str(keyword); got != lightKeyword {
		t.Errorf("code keeps its dark colours in the light theme: keyword %s, want %s", got, lightKeyword)
	}
	u.do("switch back to dark", click(`[data-testid=theme-toggle]`), waitFor(dsBackground+` === "`+dark+`"`))
	if got := u.str(`localStorage.getItem("weft:theme") + " " + (document.documentElement.dataset.theme ?? "none")`); got != "null none" {
		t.Errorf("the system's own scheme is stored as a choice: %q", got)
	}
	// The page's colours follow the media query at once; the toggle's
	// state follows theme.js's change listener, a moment later: wait for
	// both (a page that never updates the toggle times out here).
	u.do("the system turns light", scView(dsLaptop, "light"), waitFor(dsBackground+` === "`+light+`" && document.querySelector("[data-testid=theme-toggle]").getAttribute("aria-pressed") === "false"`))
	if got := u.str(`document.querySelector("[data-testid=theme-toggle]").getAttribute("aria-pressed")`); got != "false" {
		t.Errorf("the toggle does not follow the system: aria-pressed %s on a light page", got)
	}
}

// dsActions is the opacity of the actions of the first answer (not the
// latest message, whose actions always show).
const dsActions = `getComputedStyle(document.querySelector('[data-testid=message][data-role=assistant] .message-actions')).opacity`

func TestBrowserMessageActionsAreLabelledIconButtonsShownOnHoverFocusAndTouch(t *testing.T) {
	t.Parallel()
	u := newDSUI(t)
	u.open(u.thread, dsLaptop, "light")

	// Icon buttons: a name for screen readers (shown as their tooltip), an
	// icon, no text to run into the next one, none overlapping another.
	if got := u.str(`[...document.querySelectorAll(".message-actions :is(button, summary)")]
		.filter((b) => !b.closest(".popover-card, .edit-form"))
		.filter((b) => !b.getAttribute("aria-label") || !b.querySelector("svg use") || b.textContent.trim() !== "")
		.map((b) => b.dataset.testid || b.outerHTML.slice(0, 60)).join("; ")`); got != "" {
		t.Errorf("message actions without a label or an icon, or with text: %s", got)
	}
	if got := u.str(`[...document.querySelectorAll(".message-actions")].flatMap((row) => {
		const rs = [...row.querySelectorAll(":scope > :is(button, details, form) :is(button, summary), :scope > :is(button, summary)")]
			.filter((b) => !b.closest(".popover-card, .edit-form")).map((b) => b.getBoundingClientRect());
		return rs.flatMap((a, i) => rs.slice(i + 1).filter((b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5).map(() => "overlap"));
	}).length`); got != "0" {
		t.Errorf("%s message actions overlap another", got)
	}

	// Hidden at rest on an earlier answer, shown on the latest message.
	if got := u.str(dsActions); got != "0" {
		t.Errorf("an earlier answer's actions show at rest (opacity %s)", got)
	}
	if got := u.str(`getComputedStyle([...document.querySelectorAll('[data-testid=message] .message-actions')].at(-1)).opacity`); got != "1" {
		t.Errorf("the latest message's actions are hidden (opacity %s)", got)
	}
	// Hover shows them.
	x, y := dsCenter(u, `[data-testid=message][data-role=assistant] [data-testid=message-body]`)
	u.do("hover the first answer", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x, y), waitFor(dsActions+` === "1"`))
	u.do("move away", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 5, 5), waitFor(dsActions+` === "0"`))
	// So does the keyboard: Tab reaches them (they are in the tab order)
	// and they show while focused.
	u.do("tab into the first answer's actions",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=message][data-role=assistant] [data-testid=message-body]').setAttribute("tabindex", "-1"), document.querySelector('[data-testid=message][data-role=assistant] [data-testid=message-body]').focus()`),
		chromedp.KeyEvent(kb.Tab),
		waitFor(`document.activeElement?.closest(".message-actions") && document.activeElement.closest("[data-testid=message]") === document.querySelector('[data-testid=message][data-role=assistant]') && `+dsActions+` === "1"`))
	if got := u.str(`document.activeElement.dataset.testid`); got != "copy-message" {
		t.Errorf("the first action Tab reaches is %q, want copy-message", got)
	}
	if got := u.str(`getComputedStyle(document.activeElement, "::after").content`); got != `"Copy message"` {
		t.Errorf("the focused action's tooltip reads %s, want its label", got)
	}
	u.do("tab on to regenerate", chromedp.KeyEvent(kb.Tab), waitFor(`document.activeElement?.dataset.testid === "regenerate"`))

	// On a touch screen there is no hover: they always show.
	u.open(u.thread, dsPhone, "light")
	if got := u.str(dsActions); got != "1" {
		t.Errorf("on a touch screen an earlier answer's actions are hidden (opacity %s)", got)
	}
}

// dsCenter is the middle of the element matching sel, scrolled into view.
func dsCenter(u *dsUI, sel string) (float64, float64) {
	u.t.Helper()
	xy := dsEval[[]float64](u, `(() => { const el = document.querySelector(`+jsQuote(sel)+`); el.scrollIntoView({block: "center"}); const r = el.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2] })()`)
	return xy[0], xy[1]
}
