package handlers_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The owner shares a thread from its page; a fresh browser with no session
// opens the link and reads the conversation, with no composer or sidebar;
// once the owner revokes the link, that browser gets the 404 page.
func TestBrowserShareLinkOpensInAFreshBrowserWithoutASessionUntilRevoked(t *testing.T) {
	t.Parallel()
	u := newTreeUI(t)
	u.startThread("november question")
	u.send("oscar follow-up")

	u.do("share the thread", click(`[data-testid=share-create]`), waitFor(`document.querySelector('[data-testid=share-url]')`))
	link := u.str(`document.querySelector('[data-testid=share-url]').textContent.trim()`)
	if href := u.str(`document.querySelector('[data-testid=share-url]').href`); href != link || !strings.HasPrefix(link, u.app.TS.URL+"/s/") {
		t.Fatalf("the share URL shown is %q (href %q)", link, href)
	}
	if !u.yes(`document.querySelector('[data-testid=share-list] [data-testid=share-link]')`) {
		t.Error("the thread's panel does not list the new link")
	}

	// Another browser context: no cookies, no storage.
	ctx, cancel := chromedp.NewContext(u.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	reader := &trUI{t: t, ctx: ctx, app: u.app}
	reader.do("open the link", chromedp.Navigate(link), waitFor(trMsgs+`.length === 4`))
	want := []string{"user: november question", "assistant: You said: november question", "user: oscar follow-up", "assistant: You said: oscar follow-up"}
	if got := reader.convo(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the shared page shows %q, want %q", got, want)
	}
	for _, absent := range []string{"composer", "send", "thread-link", "edit", "regenerate", "share-create"} {
		if reader.yes(`document.querySelector('[data-testid=` + absent + `]')`) {
			t.Errorf("the shared page shows %s", absent)
		}
	}
	if reader.yes(`document.querySelector('.sidebar')`) {
		t.Error("the shared page shows the sidebar")
	}
	if got := reader.str(`document.querySelector('meta[name=robots]')?.content ?? ""`); got != "noindex, nofollow" {
		t.Errorf("robots meta = %q", got)
	}

	u.do("accept the confirmation", chromedp.Evaluate[chromedp.Void](`window.confirm = (m) => { sessionStorage.setItem("shConfirm", m); return true; }`))
	u.do("revoke the link", click(`[data-testid=share-revoke]`), waitFor(`!document.querySelector('[data-testid=share-link]')`))
	if got := u.str(`sessionStorage.getItem("shConfirm") ?? ""`); !strings.Contains(got, "Revoke this share link") {
		t.Errorf("the confirmation asked %q", got)
	}

	reader.act("reload the link", chromedp.Reload(), `document.querySelector('[data-testid=error]')`)
	if got := reader.str(`document.querySelector('h1')?.textContent.trim() ?? ""`); got != "Not Found" {
		t.Errorf("after the revoke the reader sees %q, want the 404 page", got)
	}
	if n := reader.num(trMsgs + `.length`); n != 0 {
		t.Errorf("after the revoke the reader still sees %d messages", n)
	}
	// The reader never had a session: the app itself asks them to sign in.
	reader.open("/", `location.pathname === "/login"`)
}
