package handlers_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/handlers"
	"weft/internal/testenv"
)

// css is a shorthand for a CSS selector.
func css(s string) chromedp.CSS { return chromedp.CSS(s) }

// Browser tests act on the page through JavaScript, in one evaluation per
// attempt: find the element, check that it is ready, act. Nothing can
// change between the check and the act (the page runs one task at a
// time), so an action never lands on a stale node or at coordinates the
// page has since scrolled away from. A helper waits for readiness; it
// never repeats an action that happened.

// pageWaitLimit is how long a wait on the page lasts: the machine running
// the tests may be busy with other test binaries and their browsers.
const pageWaitLimit = 45 * time.Second

// waitFor waits until a JavaScript expression is true in the page, across
// navigations (an evaluation that fails while a page loads counts as false).
func waitFor(expr string) chromedp.Action[chromedp.Void] {
	return waitForWithin(expr, pageWaitLimit)
}

// waitForWithin is waitFor with its own limit.
func waitForWithin(expr string, limit time.Duration) chromedp.Action[chromedp.Void] {
	return pageUntil("true", "Boolean("+expr+")", limit)
}

// pageUntil evaluates a JavaScript expression (a string result) until it
// yields want, and fails with the last result after limit. An evaluation
// that fails (the page is between documents) counts as not yet.
func pageUntil(want, expr string, limit time.Duration) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		deadline := time.Now().Add(limit)
		last := ""
		for {
			got, err := chromedp.Evaluate[string]("String("+expr+")")(ctx, t)
			if err == nil && got == want {
				return chromedp.Void{}, nil
			}
			if err != nil {
				last = "evaluation failed: " + err.Error()
			} else {
				last = got
			}
			if time.Now().After(deadline) {
				return chromedp.Void{}, fmt.Errorf("timed out after %s waiting for %s (last: %s)", limit, expr, last)
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, ctx.Err()
			case <-time.After(25 * time.Millisecond):
			}
		}
	}
}

// readyJS is a function of an element that tells why it cannot take a
// click or keys yet ("" when it can): the document is loading, htmx has
// not started, a swap is being settled (htmx wires what it swaps in only
// then), the element's own request is in flight (hx-disabled-elt, or a
// second request htmx would drop), or it is disabled or not shown.
const readyJS = `(el) => {
	if (document.readyState !== "complete") return "the document is loading";
	if (typeof htmx !== "object") return "htmx is not loaded";
	const busy = document.querySelector(".htmx-swapping, .htmx-settling, .htmx-added");
	if (busy) return "htmx is swapping " + busy.tagName + "#" + busy.id;
	if (el.closest(".htmx-request") || el.form?.classList.contains("htmx-request")) return "its request is in flight";
	if (el.disabled || el.closest("fieldset[disabled]")) return "it is disabled";
	if (!el.checkVisibility()) return "it is not shown";
	return "";
}`

// pageAct finds the first element matching sel and, once readyJS finds it
// ready (ready false: once it exists), runs act on it (a function of the
// element returning "" when done, or why not) — once.
func pageAct(sel string, ready bool, act string) chromedp.Action[chromedp.Void] {
	check := `""`
	if ready {
		check = `(` + readyJS + `)(el)`
	}
	return pageUntil("done", fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		if (!el) return "no element matches " + %q;
		const why = %s || (%s)(el);
		return why || "done";
	})()`, sel, sel, check, act), pageWaitLimit)
}

// clickJS clicks an element where a person would: it is scrolled to the
// middle of the window and must be the element shown there (not covered,
// by the sticky composer for one).
const clickJS = `(el) => {
	el.scrollIntoView({block: "center", inline: "center"});
	const r = el.getBoundingClientRect();
	const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
	if (!hit || !(hit === el || el.contains(hit))) return "it is covered by " + (hit ? hit.outerHTML.slice(0, 80) : "nothing");
	el.click();
	return "";
}`

// click clicks the first element matching sel once it is ready.
func click(sel string) chromedp.Action[chromedp.Void] { return pageAct(sel, true, clickJS) }

// setValue sets the value of the first element matching sel (as
// chromedp.SetValue does: no input event), checking it took.
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return pageAct(sel, false, fmt.Sprintf(`(el) => { el.value = %q; return el.value === %q ? "" : "the value became " + el.value }`, v, v))
}

// typeInto focuses the first element matching sel once it is ready and
// types keys into it (key events, as a person types).
func typeInto(sel, keys string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		pageAct(sel, true, `(el) => { el.focus(); return document.activeElement === el ? "" : "it does not take the focus" }`),
		chromedp.KeyEvent(keys),
	)
}

// submit submits the form matching sel (form.submit(), as chromedp.Submit).
func submit(sel string) chromedp.Action[chromedp.Void] {
	return pageAct(sel, false, `(form) => { form.submit(); return "" }`)
}

// uploadFiles sets the files of the file input matching sel, looking the
// node up in the current document.
func uploadFiles(sel string, files []string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		waitFor(`document.querySelector(`+strconv.Quote(sel)+`)`),
		chromedp.SetUploadFiles(chromedp.JSPath(`document.querySelector(`+strconv.Quote(sel)+`)`), files),
	)
}

func TestBrowserRegisterWorkspaceThreadRenameReloadLogout(t *testing.T) {
	t.Parallel()
	ts := testenv.Server(t, testenv.NewDB(t), handlers.Config{})
	ctx := testenv.Browser(t, 90*time.Second)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	location := func() string {
		t.Helper()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(loc, ts.URL)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}

	selectedWorkspace := func() string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const s = document.querySelector("#ws-select"); return s.options[s.selectedIndex].text })()`))
		if err != nil {
			t.Fatalf("selected workspace: %v", err)
		}
		return s
	}

	step("register",
		chromedp.Navigate(ts.URL+"/register"),
		typeInto(`input[name=email]`, "browser@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	if loc := location(); loc != "/" {
		t.Fatalf("after registering the browser is at %q, want /", loc)
	}
	// Deferred scripts run after the composer is visible: wait for them.
	step("htmx loads under the Content-Security-Policy",
		waitFor(`document.readyState === "complete" && typeof htmx === "object" && typeof htmx.version === "string"`))

	step("create a second workspace",
		chromedp.Navigate(ts.URL+"/workspaces"),
		typeInto(`[data-testid=workspace-create] input[name=name]`, "Research"),
		submit(`[data-testid=workspace-create]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	if got := selectedWorkspace(); got != "Research" {
		t.Fatalf("current workspace after creating one = %q, want Research", got)
	}

	step("send the first message",
		typeInto(`[data-testid=composer] textarea[name=content]`, "What is a weft?"),
		click(`[data-testid=send]`),
		chromedp.WaitVisible(css(`[data-testid=message][data-role=user]`)),
	)
	if got := text(`[data-testid=message-body]`); got != "What is a weft?" {
		t.Fatalf("message shown = %q", got)
	}
	if !strings.HasPrefix(location(), "/t/") {
		t.Fatalf("after sending the browser is at %q, want the thread", location())
	}
	step("the thread appears in the sidebar", chromedp.WaitVisible(css(`[data-testid=thread-link]`)))

	step("rename the thread",
		click(`details.thread-actions summary`),
		setValue(`[data-testid=rename-form] input[name=title]`, "Weaving words"),
		click(`[data-testid=rename]`),
		waitFor(`document.querySelector("#thread-title")?.textContent === "Weaving words"`),
	)
	step("reload", chromedp.Reload(), chromedp.WaitVisible(css(`[data-testid=thread-link]`)))
	if got := text(`[data-testid=thread-link]`); got != "Weaving words" {
		t.Fatalf("sidebar after rename and reload = %q", got)
	}
	if got := text(`#thread-title`); got != "Weaving words" {
		t.Fatalf("title after reload = %q", got)
	}

	// The thread belongs to Research: switching to the default workspace
	// (the switcher submits itself on change) shows an empty sidebar.
	step("switch workspace",
		chromedp.Evaluate[chromedp.Void](`(() => {
			const s = document.querySelector("#ws-select");
			s.value = [...s.options].find(o => o.text === "Personal").value;
			s.dispatchEvent(new Event("change", {bubbles: true}));
		})()`),
		chromedp.WaitVisible(css(`.threads li.empty`)),
	)
	if got := selectedWorkspace(); got != "Personal" {
		t.Fatalf("workspace after switching = %q", got)
	}

	step("logout",
		click(`[data-testid=logout]`),
		chromedp.WaitVisible(css(`form[data-testid=login]`)),
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(css(`form[data-testid=login]`)),
	)
	if loc := location(); loc != "/login" {
		t.Fatalf("/ after logout lands on %q, want /login", loc)
	}
}
