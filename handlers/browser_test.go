package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/handlers"
	"weft/internal/testenv"
)

// css is a shorthand for a CSS selector.
func css(s string) chromedp.CSS { return chromedp.CSS(s) }

// waitFor waits until a JavaScript expression is true in the page, across
// navigations (an evaluation that fails while a page loads is retried).
func waitFor(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		deadline := time.Now().Add(20 * time.Second)
		var last error
		for time.Now().Before(deadline) {
			ok, err := chromedp.Evaluate[bool]("Boolean("+expr+")")(ctx, t)
			if err == nil && ok {
				return chromedp.Void{}, nil
			}
			last = err
			select {
			case <-ctx.Done():
				return chromedp.Void{}, ctx.Err()
			case <-time.After(25 * time.Millisecond):
			}
		}
		return chromedp.Void{}, fmt.Errorf("timed out waiting for %s (last error: %v)", expr, last)
	}
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
		trRetry(chromedp.SendKeys(css(`input[name=email]`), "browser@example.com")),
		trRetry(chromedp.SendKeys(css(`input[name=password]`), password)),
		trRetry(chromedp.Submit(css(`form[data-testid=register]`))),
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
		trRetry(chromedp.SendKeys(css(`[data-testid=workspace-create] input[name=name]`), "Research")),
		trRetry(chromedp.Submit(css(`[data-testid=workspace-create]`))),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
	if got := selectedWorkspace(); got != "Research" {
		t.Fatalf("current workspace after creating one = %q, want Research", got)
	}

	step("send the first message",
		trRetry(chromedp.SendKeys(css(`[data-testid=composer] textarea[name=content]`), "What is a weft?")),
		trRetry(chromedp.Click(css(`[data-testid=send]`))),
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
		trRetry(chromedp.Click(css(`details.thread-actions summary`))),
		trRetry(chromedp.SetValue(css(`[data-testid=rename-form] input[name=title]`), "Weaving words")),
		trRetry(chromedp.Click(css(`[data-testid=rename]`))),
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
		trRetry(chromedp.Click(css(`[data-testid=logout]`))),
		chromedp.WaitVisible(css(`form[data-testid=login]`)),
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(css(`form[data-testid=login]`)),
	)
	if loc := location(); loc != "/login" {
		t.Fatalf("/ after logout lands on %q, want /login", loc)
	}
}
