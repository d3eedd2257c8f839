package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ollama/ollama/api"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// rmTab is one person's browser on a room.
type rmTab struct {
	t    *testing.T
	who  string
	ctx  context.Context
	base string
}

func (b rmTab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s (%s): %v%s", what, b.who, err, b.state())
	}
}

// state describes the room's line for a failure message.
func (b rmTab) state() string {
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\n" +
		[...document.querySelectorAll("#room-messages [data-testid=message]")].map(m =>
			m.dataset.messageId + " " + m.dataset.speaker + " " + m.dataset.status + ": " +
			(m.querySelector("[data-testid=message-body]")?.textContent ?? "").trim().slice(0, 80)).join("\n")`))
	if err != nil {
		return ""
	}
	return "\npage: " + s
}

func (b rmTab) wait(what, expr string) { b.t.Helper(); b.do(what, waitFor(expr)) }

func (b rmTab) str(expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s (%s): %v", expr, b.who, err)
	}
	return v
}

// register signs a new account up in the browser.
func (b rmTab) register(email string) {
	b.t.Helper()
	b.do("register",
		chromedp.Navigate(b.base+"/register"),
		typeInto(`input[name=email]`, email),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=register]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
	)
}

// line is the room's messages as the page shows them: id, speaker, status
// and text, one per line.
const rmLine = `[...document.querySelectorAll("#room-messages [data-testid=message]")].map(m =>
	[m.dataset.messageId, m.dataset.role, m.dataset.speaker, m.dataset.status,
	 (m.querySelector("[data-testid=message-body]")?.textContent ?? "").trim()].join(" | ")).join("\n")`

// msgSel selects the room's message by n-th speaker's answer etc.
func rmMessage(speaker string) string {
	return fmt.Sprintf(`document.querySelector('#room-messages [data-testid=message][data-speaker=%q]')`, speaker)
}

// roomsScript answers as the room's agents: Xavier hands on to @Yuki
// after a short streamed answer; Yuki writes at length, slowly enough
// to be stopped. Everything else (titles, summaries) is the default.
func roomsScript(req *api.ChatRequest) fakeollama.Reply {
	system := ""
	for _, m := range req.Messages {
		if m.Role == "system" {
			system += m.Content
		}
	}
	if req.Stream == nil || *req.Stream {
		switch {
		case strings.Contains(system, "You are Xavier."):
			words := strings.Fields("Here is the plan in twelve short steps, and for the details I will ask @Yuki to help.")
			chunks := make([]string, len(words))
			for i, w := range words {
				chunks[i] = w + " "
			}
			return fakeollama.Reply{Chunks: chunks, Delay: 120 * time.Millisecond}
		case strings.Contains(system, "You are Yuki."):
			chunks := make([]string, 3000)
			for i := range chunks {
				chunks[i] = fmt.Sprintf("detail%d ", i+1)
			}
			return fakeollama.Reply{Chunks: chunks, Delay: 20 * time.Millisecond}
		}
	}
	return fakeollama.DefaultReply(req)
}

// TestBrowserTwoMembersWatchTwoAgentsHandOnInARoomStopAndReload is the
// issue's DONE-WHEN: two people and two agents in one room. Ben owns the
// room and invites Ada; Ada mentions Xavier (picked from the composer's
// suggestions); Ben sees the answer stream live; Xavier mentions Yuki, who
// answers; Ben (the owner) stops Yuki; both reload and see the same room;
// a third user gets a 404 on every URL of the room.
func TestBrowserTwoMembersWatchTwoAgentsHandOnInARoomStopAndReload(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := fakeollama.New(t, fakeollama.WithScript(roomsScript))
	app := testenv.Start(t, store, testenv.Options{Fake: fake})
	base := app.TS.URL
	ben := rmTab{t: t, who: "Ben", ctx: testenv.Browser(t, 150*time.Second), base: base}
	ada := rmTab{t: t, who: "Ada", ctx: testenv.Browser(t, 150*time.Second), base: base}
	ben.register("ben@example.com")
	ada.register("ada@example.com")

	ben.do("create a room",
		chromedp.Navigate(base+"/rooms"),
		typeInto(`[data-testid=room-create] input[name=name]`, "Launch"),
		submit(`[data-testid=room-create]`),
		chromedp.WaitVisible(css(`[data-testid=room-page]`)),
	)
	roomURL := strings.TrimPrefix(ben.str(`location.href`), base)
	if !regexp.MustCompile(`^/rooms/\d+$`).MatchString(roomURL) {
		t.Fatalf("creating a room landed on %q", roomURL)
	}
	ben.do("invite Ada",
		setValue(`[data-testid=room-invite] input[name=email]`, "ada@example.com"),
		submit(`[data-testid=room-invite]`),
		waitFor(`document.querySelector("[data-testid=room-member][data-role=member]")`),
	)
	for _, a := range []struct{ name, prompt string }{{"Xavier", "You are Xavier."}, {"Yuki", "You are Yuki."}} {
		ben.do("add the agent "+a.name,
			setValue(`[data-testid=room-agent-add] input[name=name]`, a.name),
			setValue(`[data-testid=room-agent-add] textarea[name=prompt]`, a.prompt),
			submit(`[data-testid=room-agent-add]`),
			waitFor(fmt.Sprintf(`document.querySelector('[data-testid=room-agent][data-agent-name=%q]')`, a.name)),
		)
	}
	ben.do("open the room", chromedp.Navigate(base+roomURL), chromedp.WaitVisible(css(`[data-testid=room-live]`)))
	ada.do("open the room", chromedp.Navigate(base+roomURL), chromedp.WaitVisible(css(`[data-testid=room-live]`)))
	// Both pages' streams are open before anything is said.
	for _, b := range []rmTab{ben, ada} {
		b.wait("the room's stream to open", `htmx.find("#room-live")?.["htmx-internal-data"]?.sseEventSource?.readyState === 1`)
	}

	ada.do("mention Xavier from the suggestions",
		typeInto(`[data-testid=composer] textarea[name=content]`, "@Xa"),
		waitFor(`!document.querySelector("[data-testid=mention-suggestions]").hidden &&
			document.querySelector('[data-testid=mention-option][data-mention=Xavier]').checkVisibility() &&
			!document.querySelector('[data-testid=mention-option][data-mention=Yuki]').checkVisibility()`),
		chromedp.KeyEvent("\t"),
		waitFor(`document.querySelector("[data-testid=composer] textarea").value === "@Xavier "`),
		chromedp.KeyEvent("please plan the launch"),
		click(`[data-testid=send]`),
		waitFor(`document.querySelector("[data-testid=composer] textarea").value === ""`),
	)

	// Ben sees Ada's message, then Xavier's answer growing while it is
	// being written.
	ben.wait("Ada's message", `[...document.querySelectorAll("#room-messages [data-testid=message][data-role=user]")].some(m =>
		m.dataset.speaker.startsWith("ada") && m.textContent.includes("please plan the launch"))`)
	ben.wait("Xavier's answer streaming with some text", rmMessage("Xavier")+`?.dataset.status === "streaming" &&
		`+rmMessage("Xavier")+`.querySelector("[data-testid=message-body]").textContent.includes("plan")`)
	partial := ben.str(rmMessage("Xavier") + `.querySelector("[data-testid=message-body]").textContent`)
	ben.wait("Xavier's answer to complete", rmMessage("Xavier")+`?.dataset.status === "complete"`)
	if full := ben.str(rmMessage("Xavier") + `.querySelector("[data-testid=message-body]").textContent`); !strings.Contains(full, "@Yuki") ||
		len(strings.TrimSpace(partial)) >= len(strings.TrimSpace(full)) {
		t.Fatalf("Ben saw %q while Xavier wrote, then %q: not an answer streaming live", partial, full)
	}

	// Xavier handed on to Yuki, who answers; Ben (the room's owner) stops it.
	ben.wait("Yuki's answer streaming", rmMessage("Yuki")+`?.dataset.status === "streaming" &&
		`+rmMessage("Yuki")+`.querySelector("[data-testid=message-body]").textContent.includes("detail3")`)
	ada.wait("Yuki's answer streaming for Ada too", rmMessage("Yuki")+`?.querySelector("[data-testid=message-body]")?.textContent.includes("detail3")`)
	// Ada reloads while Yuki writes: her page shows the answer so far and
	// goes on following it (the stream sends it again first; it replaces
	// the one the page drew, never adds a second).
	ada.do("reload while Yuki writes", chromedp.Reload(), chromedp.WaitVisible(css(`[data-testid=room-live]`)))
	shown := ada.str(`String(` + rmMessage("Yuki") + `.querySelector("[data-testid=message-body]").textContent.trim().split(" ").length)`)
	ada.wait("Yuki's answer to go on after the reload", `(() => {
		const all = document.querySelectorAll('#room-messages [data-testid=message][data-speaker=Yuki]');
		return all.length === 1 && all[0].dataset.status === "streaming" &&
			all[0].querySelector("[data-testid=message-body]").textContent.trim().split(" ").length > `+shown+` + 20;
	})()`)
	yukiRun := ben.str(rmMessage("Yuki") + `.dataset.runId`)
	ben.do("stop Yuki", click(`#room-messages [data-testid=message][data-speaker=Yuki] [data-testid=stop]`))
	for _, b := range []rmTab{ben, ada} {
		b.wait("Yuki's answer stopped", rmMessage("Yuki")+`?.dataset.status === "cancelled"`)
	}

	// Both reload and see the same room.
	var lines [2]string
	for i, b := range []rmTab{ben, ada} {
		b.do("reload", chromedp.Reload(), chromedp.WaitVisible(css(`[data-testid=room-live]`)))
		b.wait("the line after the reload", rmMessage("Yuki")+`?.dataset.status === "cancelled"`)
		lines[i] = b.str(rmLine)
	}
	if lines[0] != lines[1] {
		t.Fatalf("after reloading, Ben sees\n%s\nand Ada sees\n%s", lines[0], lines[1])
	}
	rows := strings.Split(lines[0], "\n")
	if len(rows) != 3 || !regexp.MustCompile(`\| user \| ada\S* \| complete \| .*@Xavier please plan the launch`).MatchString(rows[0]) ||
		!strings.Contains(rows[1], "| assistant | Xavier | complete |") || !strings.Contains(rows[2], "| assistant | Yuki | cancelled |") {
		t.Fatalf("the room after the reload:\n%s", lines[0])
	}

	// A third user reaches nothing of the room.
	carl := testenv.NewClient(t, base)
	carl.Register("carl@example.com", password)
	var thread int64
	if err := store.Pool.QueryRow(context.Background(), "SELECT thread_id FROM rooms WHERE id = $1",
		strings.TrimPrefix(roomURL, "/rooms/")).Scan(&thread); err != nil {
		t.Fatal(err)
	}
	checkRoomHidden(t, carl, roomURL, fmt.Sprint(thread), yukiRun,
		ben.str(`document.querySelector('#room-messages [data-speaker=Yuki]').dataset.messageId`),
		ben.str(`document.querySelector("[data-testid=room-agent]").dataset.agentId`))
}

// checkRoomHidden checks that c gets a 404 for every route of the room at
// roomURL and of its thread (run: one of its answers' runs, msg: one of
// its answers, agent: one of its agents).
func checkRoomHidden(t *testing.T, c *testenv.Client, roomURL, thread, run, msg, agent string) {
	t.Helper()
	for _, r := range []struct {
		method, path string
		form         url.Values
	}{
		{"GET", roomURL, nil},
		{"GET", roomURL + "/events", nil},
		{"POST", roomURL + "/messages", url.Values{"content": {"hello?"}}},
		{"POST", roomURL + "/members", url.Values{"email": {"carl@example.com"}}},
		{"POST", roomURL + "/members/1/remove", nil},
		{"POST", roomURL + "/leave", nil},
		{"POST", roomURL + "/agents", url.Values{"name": {"Zed"}, "model": {"tiny"}}},
		{"GET", roomURL + "/agents/" + agent, nil},
		{"POST", roomURL + "/agents/" + agent, url.Values{"name": {"Zed"}, "model": {"tiny"}}},
		{"POST", roomURL + "/agents/" + agent + "/delete", nil},
		{"POST", roomURL + "/settings", url.Values{"name": {"Mine"}}},
		{"POST", roomURL + "/delete", url.Values{"confirm": {"Launch"}}},
		{"POST", roomURL + "/runs/" + run + "/stop", nil},
		{"POST", roomURL + "/runs/" + run + "/steps/1/decide", url.Values{"decision": {"once"}}},
		{"POST", roomURL + "/runs/" + run + "/steps/1/answer", url.Values{"a0": {"a"}}},
		{"GET", "/t/" + thread, nil},
		{"GET", "/runs/" + run + "/events", nil},
		{"POST", "/runs/" + run + "/cancel", nil},
		{"GET", "/m/" + msg + "/sources/1", nil},
	} {
		if got := c.Do(r.method, r.path, r.form); got.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s as a third user = %d, want 404", r.method, r.path, got.StatusCode)
		}
	}
	if rooms := c.Get("/rooms"); strings.Contains(rooms.Body, "Launch") {
		t.Error("a third user's /rooms lists the room")
	}
}
