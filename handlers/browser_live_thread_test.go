package handlers_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
	"weft/internal/testwait"
)

// Live threads (issue 21): a message sent in one tab appears in the other
// tabs of the thread, and on another device signed in as the same user,
// without a reload, and its answer streams there.

// ltWatching waits until the tab's live watch of the thread is open, and
// marks the document: a reload would lose the mark.
func ltWatching(b chTab, what string) {
	b.t.Helper()
	b.wait(what+": the thread's live watch open",
		`htmx.find("#thread-live")?.["htmx-internal-data"]?.sseEventSource?.readyState === 1`)
	b.do(what+": mark the document", chromedp.Evaluate[chromedp.Void](`window.__ltSamePage = true`))
}

// ltCount is how many elements of the page show message id.
func ltCount(id string) string {
	return fmt.Sprintf(`document.querySelectorAll('[data-testid=message][data-message-id=%q]').length`, id)
}

// ltNamed is a tab and how a failure names it.
type ltNamed struct {
	name string
	tab  chTab
}

// ltThread starts a thread in u's tab, waits for its first answer, opens
// it in a second tab of the same browser and returns that tab and the
// thread's URL.
func ltThread(t *testing.T, u *chatUI) (chTab, string) {
	t.Helper()
	u.startThread(u.chTab, "hello")
	u.wait("the first answer", chLast+`.dataset.status === "complete"`)
	thread := u.location()
	tabCtx, closeTab := chromedp.NewContext(u.ctx)
	t.Cleanup(closeTab)
	tab2 := chTab{t: t, ctx: tabCtx}
	tab2.do("open the thread in a second tab", chromedp.Navigate(thread), waitFor(chLast))
	return tab2, thread
}

func TestBrowserAMessageSentInOneTabAppearsInTheOtherTabAndOnAnotherDeviceAndItsAnswerStreamsThere(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	tab2, thread := ltThread(t, u)
	// Another device: a browser context of its own, signed in again.
	devCtx, closeDev := chromedp.NewContext(u.ctx, chromedp.WithNewBrowserContext())
	defer closeDev()
	device := chTab{t: t, ctx: devCtx}
	device.do("sign in on the other device and open the thread",
		chromedp.Navigate(u.app.TS.URL+"/login"),
		typeInto(`input[name=email]`, u.email),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=login]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
		chromedp.Navigate(thread), waitFor(chLast),
	)
	others := []ltNamed{{"tab 2", tab2}, {"the other device", device}}
	all := append([]ltNamed{{"tab 1", u.chTab}}, others...)
	for _, b := range all {
		ltWatching(b.tab, b.name)
	}

	// The answer is held at the model until the other pages show its
	// placeholder, so that they certainly see it being written.
	release := chHold(t, u.app.Fake, nil)
	u.send("[[slow:60ms]][[tokens:40]] live across tabs")
	userID := u.str(chUsers + `.at(-1).dataset.messageId`)
	answerID := u.str(chLast + `.dataset.messageId`)
	for _, b := range others {
		b.tab.wait(b.name+": the message and its answer being written, without a reload", fmt.Sprintf(
			`window.__ltSamePage && %s === 1 && %s.at(-1).textContent.includes("live across tabs") && %s.dataset.messageId === %q && %s.dataset.status === "streaming"`,
			ltCount(userID), chUsers, chLast, answerID, chLast))
		b.tab.watchStream()
	}
	release()

	want := chToks(40)
	for _, b := range all {
		b.tab.wait(b.name+": the answer complete", fmt.Sprintf(`%s.dataset.status === "complete" && %s.dataset.messageId === %q`, chLast, chLast, answerID))
		if got := chWords(b.tab.str(chBody(chLast))); got != want {
			t.Errorf("%s: the answer reads %q, want %q", b.name, got, want)
		}
		if n, m := b.tab.num(ltCount(userID)), b.tab.num(ltCount(answerID)); n != 1 || m != 1 {
			t.Errorf("%s shows the message %d times and its answer %d times, want once each", b.name, n, m)
		}
		if !b.tab.yes(`window.__ltSamePage`) {
			t.Errorf("%s reloaded", b.name)
		}
	}
	for _, b := range others {
		if seen := b.tab.seen(want + " "); len(seen) < 2 {
			t.Errorf("%s: the answer changed only %d times (%q); want it to stream", b.name, len(seen), seen)
		}
	}
	if n := len(chStreamed(u.app.Fake)); n != 2 {
		t.Errorf("the model was asked %d times, want twice (the first message and this one)", n)
	}
}

// ltSetHidden makes the page believe it is hidden or shown, and tells it
// (headless Chromium shows every tab).
func ltSetHidden(b chTab, hidden bool) {
	b.t.Helper()
	b.do(fmt.Sprintf("hidden: %v", hidden), chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		Object.defineProperty(document, "hidden", { configurable: true, get: () => %v });
		Object.defineProperty(document, "visibilityState", { configurable: true, get: () => %q });
		document.dispatchEvent(new Event("visibilitychange"));
	})()`, hidden, map[bool]string{true: "hidden", false: "visible"}[hidden])))
}

func TestBrowserAHiddenTabClosesItsLiveWatchAndCatchesUpWhenShownAgain(t *testing.T) {
	t.Parallel()
	u := newChatUI(t, testenv.Options{})
	tab2, _ := ltThread(t, u)
	ltWatching(u.chTab, "tab 1")
	ltWatching(tab2, "tab 2")
	if n := u.app.Handler.OpenStreams(); n != 2 {
		t.Fatalf("%d streams open with two tabs on a thread, want their two watches", n)
	}

	ltSetHidden(tab2, true)
	tab2.wait("the hidden tab's watch closed", `!document.querySelector("#thread-live").hasAttribute("sse-connect")`)
	waitStreams(t, u, 1)
	u.send("[[tokens:5]] while you were away")
	u.wait("the answer complete in tab 1", chLast+`.dataset.status === "complete"`)
	if tab2.yes(chUsers + `.at(-1).textContent.includes("while you were away")`) {
		t.Fatal("the hidden tab showed the message: its watch was not closed")
	}

	ltSetHidden(tab2, false)
	tab2.wait("the shown tab catches up without a reload", `window.__ltSamePage && `+chUsers+`.at(-1).textContent.includes("while you were away") && `+
		chLast+`.dataset.status === "complete" && `+chLast+`.textContent.includes("tok5")`)
	ltWatching(tab2, "tab 2 shown again")
	if n := tab2.num(chAnswers + `.length`); n != 2 {
		t.Errorf("the tab shown again has %d answers, want 2", n)
	}
	if got := tab2.str(`document.querySelector("#thread-live").getAttribute("sse-connect")`); !strings.Contains(got, "/watch?leaf=") {
		t.Errorf("the watch opened again at %q", got)
	}
}

// waitStreams waits until the server holds n event streams.
func waitStreams(t *testing.T, u *chatUI, n int) {
	t.Helper()
	testwait.For(t, fmt.Sprintf("%d event streams open", n), chWaitLimit, func() bool { return u.app.Handler.OpenStreams() == n })
}
