package handlers_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
)

// A room in the design of issue 21, on a phone and on a laptop: the
// conversation first, its side panel (members, agents, settings) a
// disclosure above it on a phone and a column beside it on a laptop,
// agents told apart from members, the queue over the composer, 44 px
// touch targets, nothing wider than the window, and the agent chips that
// mention an agent.
func TestBrowserARoomShowsItsConversationFirstOnAPhoneWithItsPanelBehindADisclosureAndBesideItOnALaptop(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	app.Fake.SetScript(scScript)
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("ada@example.com", password)
	rooms := scSeedRooms(t, app, c, userID(t, app.Store, "ada@example.com"))
	var room string
	for _, s := range rooms {
		if s.name == "room" {
			room = s.path
		}
	}
	u := &dsUI{t: t, ctx: testenv.Browser(t, 3*time.Minute), base: app.TS.URL}
	u.do("sign in",
		chromedp.Navigate(app.TS.URL+"/login"),
		typeInto(`input[name=email]`, "ada@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=login]`),
		waitFor(`location.pathname === "/"`))

	u.open(room, dsPhone, "light")
	u.do("the room's line", waitFor(`document.querySelectorAll("#room-messages [data-testid=message]").length >= 5`))
	// The conversation fills the width; the panel is shut behind its bar,
	// which stays at the top while the line is read from its end.
	if !u.yes(dsShown(`.room-side-toggle`)) || u.yes(dsShown(`[data-testid=room-members]`)) || u.yes(dsShown(`[data-testid=room-invite]`)) {
		t.Errorf("on a phone the room's panel is not a shut disclosure")
	}
	if w := dsEval[float64](u, `document.querySelector("#room-messages [data-speaker=Scout] [data-testid=message-body]").getBoundingClientRect().width`); w < 340 {
		t.Errorf("on a phone an answer is %.0f px wide in a window of 390: the conversation is squeezed", w)
	}
	if !u.yes(`innerHeight + scrollY >= document.body.scrollHeight - 2`) {
		t.Errorf("on a phone the room does not open at the end of its line")
	}
	if gap := dsEval[float64](u, `document.querySelector(".room-side-toggle").getBoundingClientRect().top - document.querySelector(".topbar").getBoundingClientRect().bottom`); gap < 0 || gap > 16 {
		t.Errorf("at the end of the line the panel's bar is %.0f px under the top bar, want it in view just under it", gap)
	}
	if wide := u.str(`Math.max(document.documentElement.scrollWidth, innerWidth)`); wide != "390" {
		t.Errorf("the room is %s px wide in a window of 390", wide)
	}
	dsNoSmallTargets(u, "the room on a phone")

	// Agents and members look different: an agent's avatar is its icon,
	// its name is in the accent colour and its answer has no bubble; a
	// member's text is in a bubble under their initial.
	look := u.str(`(() => {
		const agent = document.querySelector("#room-messages [data-speaker-kind=agent]");
		const member = document.querySelector("#room-messages [data-speaker-kind=member]");
		const colour = (m) => getComputedStyle(m.querySelector(".speaker-name")).color;
		return [agent.querySelector(".avatar-agent svg") ? "agent icon" : "no agent icon",
			member.querySelector(".avatar:not(.avatar-agent)")?.textContent.trim() ?? "no initial",
			colour(agent) === colour(member) ? "same name colour" : "own name colour",
			agent.querySelector(".bubble") ? "agent bubble" : "no agent bubble",
			getComputedStyle(member.querySelector(".bubble")).backgroundColor !== getComputedStyle(document.body).backgroundColor ? "member bubble" : "no member bubble"].join(", ")
	})()`)
	if look != "agent icon, A, own name colour, no agent bubble, member bubble" && look != "agent icon, B, own name colour, no agent bubble, member bubble" {
		t.Errorf("agents and members: %s", look)
	}
	// The queue over the composer: Quill answering for Ben, Scout waiting.
	if got := u.str(`[...document.querySelectorAll("[data-testid=composer] [data-testid=room-turn]")].map((li) => li.dataset.agent + " " + li.dataset.status).join(", ")`); got != "Quill running, Scout queued" {
		t.Errorf("the queue over the composer shows %q", got)
	}
	// Answers carry their route, finished messages their copy button.
	if got := u.str(`[...document.querySelectorAll("#room-messages [data-speaker=Scout] [data-testid=route-badge]")].map((b) => b.textContent).join(",")`); got != "agent,agent" {
		t.Errorf("Scout's answers show the routes %q, want agent for both", got)
	}
	if got := u.str(`document.querySelectorAll("#room-messages [data-status=complete] [data-testid=copy-message]").length === document.querySelectorAll("#room-messages [data-status=complete]").length`); got != "true" {
		t.Errorf("a finished room message has no copy button")
	}

	// The bar opens the panel: members and the owner's invitation.
	u.do("open the panel", click(`.room-side-toggle`), waitFor(dsShown(`[data-testid=room-invite] input[name=email]`)+` && `+dsShown(`[data-testid=room-agent][data-agent-name=Scout]`)))
	if wide := u.str(`Math.max(document.documentElement.scrollWidth, innerWidth)`); wide != "390" {
		t.Errorf("the room with its panel open is %s px wide in a window of 390", wide)
	}
	dsNoSmallTargets(u, "the room's open panel on a phone")
	u.do("shut it", click(`.room-side-toggle`), waitFor(`!`+dsShown(`[data-testid=room-members]`)))

	// A chip mentions its agent where the caret is.
	u.do("mention Scout with its chip",
		typeInto(`[data-testid=composer] textarea`, "thanks"),
		click(`[data-testid=mention-chip][data-mention=Scout]`),
		waitFor(`document.querySelector("[data-testid=composer] textarea").value === "thanks @Scout "`))

	// On a laptop the panel is a column beside the conversation, open,
	// without the phone's bar.
	u.open(room, dsLaptop, "dark")
	if u.yes(dsShown(`.room-side-toggle`)) || !u.yes(dsShown(`[data-testid=room-invite]`)) {
		t.Errorf("on a laptop the panel is not open beside the conversation")
	}
	if !u.yes(`document.querySelector("[data-testid=room-members]").getBoundingClientRect().left >= document.querySelector("#room-messages").getBoundingClientRect().right`) {
		t.Errorf("on a laptop the panel is not beside the conversation")
	}
	// A refused form comes back with the panel open, on a phone too.
	u.do("invite nobody on a phone", scView(dsPhone, "light"), chromedp.Navigate(app.TS.URL+room), waitFor(scSettled),
		click(`.room-side-toggle`), setValue(`[data-testid=room-invite] input[name=email]`, "nobody@example.com"),
		submit(`[data-testid=room-invite]`), waitFor(`document.querySelector("[data-testid=room-invite] [data-testid=error]")`), waitFor(scSettled))
	if !u.yes(dsShown(`[data-testid=room-invite] [data-testid=error]`)) {
		t.Errorf("a refused invitation comes back with the panel shut")
	}
}

// dsNoSmallTargets fails when a control a finger uses in the main column
// is smaller than 44 × 44 px.
func dsNoSmallTargets(u *dsUI, where string) {
	u.t.Helper()
	small := u.str(`[...document.querySelectorAll(".main :is(button, select, summary, label.chip, a.icon-btn, a.room-turn, input:not([type=hidden], [type=checkbox]))")]
		.filter((el) => el.checkVisibility({visibilityProperty: true}) && !el.closest(".visually-hidden, [hidden]"))
		.map((el) => [el, el.getBoundingClientRect()])
		.filter(([el, r]) => r.width < 44 - 0.5 || r.height < 44 - 0.5)
		.map(([el, r]) => (el.dataset.testid || el.getAttribute("aria-label") || el.textContent.trim().slice(0, 20) || el.tagName) + " " + Math.round(r.width) + "×" + Math.round(r.height))
		.join("; ")`)
	if small != "" {
		u.t.Errorf("%s: touch targets smaller than 44 px: %s", where, small)
	}
}

// An agent's answer in a room is told like a thread's (static/notice.js):
// its room events ("status-42", "done-42") are announced once, and one that
// settles while the tab is hidden marks the title until the tab is seen.
func TestBrowserARoomAnswerFinishedInAHiddenTabMarksTheTitleAndIsAnnounced(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("ada@example.com", password)
	room := fmt.Sprintf("/rooms/%d", createRoom(t, c, "Launch"))
	postTo(t, c, room+"/agents", url.Values{"name": {"Scout"}, "model": {"tiny:latest"}}, room)
	u := &dsUI{t: t, ctx: testenv.Browser(t, 2*time.Minute), base: app.TS.URL}
	u.do("sign in and open the room",
		chromedp.Navigate(app.TS.URL+"/login"),
		typeInto(`input[name=email]`, "ada@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=login]`),
		waitFor(`location.pathname === "/"`),
		chromedp.Navigate(app.TS.URL+room),
		waitFor(`htmx.find("#room-live")?.["htmx-internal-data"]?.sseEventSource?.readyState === 1`))
	title := u.str(`document.title`)
	u.do("hide the tab", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__visibility = "hidden";
		Object.defineProperty(document, "visibilityState", {configurable: true, get: () => window.__visibility});
		document.dispatchEvent(new Event("visibilitychange"));
	})()`))
	// Posted from elsewhere (another tab of hers): the page learns it from
	// the room's stream.
	postTo(t, c, room+"/messages", url.Values{"content": {"@Scout hello there"}}, room)
	u.do("Scout's answer settles", waitFor(`document.querySelector("#room-messages [data-speaker=Scout]")?.dataset.status === "complete"`))
	u.do("the title says so", waitFor(`document.title === "Answer finished · " + `+jsString(title)))
	if got := u.str(`document.querySelector("[data-testid=announcer]").textContent`); !strings.HasPrefix(got, "Answer finished: ") {
		t.Errorf("the room's answer was announced as %q", got)
	}
	u.do("show the tab", chromedp.Evaluate[chromedp.Void](`window.__visibility = "visible"; document.dispatchEvent(new Event("visibilitychange"))`),
		waitFor(`document.title === `+jsString(title)))
}
