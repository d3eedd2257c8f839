package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
)

// Olive makes a room on /rooms, invites Mel by email and adds an agent;
// Mel, in her own browser, finds the room in her sidebar and opens it with
// its agent; Stan, in no room, gets the not-found page on every room page
// and a 404 from every room route.
func TestBrowserARoomIsMadeSharedWithAnInviteeAndHiddenFromEveryoneElse(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	olive := testenv.Browser(t, 120*time.Second)
	mel := testenv.Browser(t, 120*time.Second)
	in := func(ctx context.Context) func(what string, actions ...chromedp.Action[chromedp.Void]) {
		return func(what string, actions ...chromedp.Action[chromedp.Void]) {
			t.Helper()
			if err := chromedp.Do(ctx, actions...); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
	register := func(email string) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			chromedp.Navigate(app.TS.URL + "/register"),
			typeInto(`input[name=email]`, email),
			typeInto(`input[name=password]`, password),
			submit(`form[data-testid=register]`),
			chromedp.WaitVisible(css(`[data-testid=composer]`)),
		}
	}
	in(olive)("Olive registers", register("olive@example.com")...)
	in(mel)("Mel registers", register("mel@example.com")...)

	in(olive)("Olive makes a room from the sidebar's Rooms",
		click(`[data-testid=rooms-link]`),
		typeInto(`[data-testid=room-create] input[name=name]`, "Launch"),
		click(`[data-testid=room-create] button[type=submit]`),
		waitFor(`/^\/rooms\/\d+$/.test(location.pathname) && document.querySelector("[data-testid=room-page]")`),
		waitFor(`document.querySelector("#room-title")?.textContent === "Launch"`),
	)
	path, err := chromedp.Run(olive, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^/rooms/(\d+)$`).FindStringSubmatch(u.Path)
	if m == nil {
		t.Fatalf("the room's page is at %q", path)
	}
	room, _ := strconv.ParseInt(m[1], 10, 64)
	roomLink := fmt.Sprintf(`[data-testid=room][data-room-id="%d"]`, room)

	in(olive)("Olive invites Mel by email",
		typeInto(`[data-testid=room-invite] input[name=email]`, "Mel@Example.com"),
		click(`[data-testid=room-invite] button[type=submit]`),
		waitFor(`document.querySelectorAll("[data-testid=room-member]").length === 2 && document.querySelector("[data-testid=flash]")`),
	)
	in(olive)("Olive adds an agent with a model",
		typeInto(`[data-testid=room-agent-add] input[name=name]`, "Scout"),
		setValue(`[data-testid=room-agent-add] select[name=model]`, "tiny:latest"),
		typeInto(`[data-testid=room-agent-add] textarea[name=prompt]`, "Find facts."),
		click(`[data-testid=room-agent-add] button[type=submit]`),
		waitFor(`document.querySelector('[data-testid=room-agent][data-agent-name=Scout]')?.textContent.includes("tiny:latest")`),
	)

	in(mel)("Mel finds the room in her sidebar and opens it",
		chromedp.Navigate(app.TS.URL+"/"),
		click(roomLink),
		waitFor(fmt.Sprintf(`location.pathname === "/rooms/%d" && document.querySelector("#room-title")?.textContent === "Launch"`, room)),
		waitFor(`document.querySelector('[data-testid=room-agent][data-agent-name=Scout]') && document.querySelector("[data-testid=composer] textarea[name=content]")`),
		waitFor(`!document.querySelector("[data-testid=room-invite]") && !document.querySelector("[data-testid=room-agent-add]") && document.querySelector("[data-testid=room-leave]")`),
	)

	// Stan signs in where Mel was.
	stan := testenv.NewClient(t, app.TS.URL)
	stan.Register("stan@example.com", password)
	agents, err := store.RoomAgents(context.Background(), userID(t, store, "olive@example.com"), room)
	if err != nil || len(agents) != 1 {
		t.Fatalf("agents %+v %v", agents, err)
	}
	pages := []string{fmt.Sprintf("/rooms/%d", room), fmt.Sprintf("/rooms/%d/agents/%d", room, agents[0].ID)}
	steps := []chromedp.Action[chromedp.Void]{
		click(`[data-testid=logout]`),
		waitFor(`location.pathname === "/login"`),
		typeInto(`input[name=email]`, "stan@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=login]`),
		chromedp.WaitVisible(css(`[data-testid=composer]`)),
		waitFor(`!document.querySelector("[data-testid=room]")`),
	}
	for _, p := range pages {
		steps = append(steps, chromedp.Navigate(app.TS.URL+p),
			waitFor(`document.title.startsWith("Not Found") && document.body.textContent.includes("There is nothing here") && !document.body.textContent.includes("Launch")`))
	}
	in(mel)("Stan, in the same browser, finds no room", steps...)
	for _, r := range []struct{ method, path string }{
		{"GET", pages[0]}, {"GET", pages[1]},
		{"POST", pages[0] + "/messages"}, {"POST", pages[0] + "/members"}, {"POST", pages[0] + "/leave"},
		{"POST", pages[0] + "/agents"}, {"POST", pages[1]}, {"POST", pages[1] + "/delete"},
		{"POST", pages[0] + "/settings"}, {"POST", pages[0] + "/delete"},
		{"POST", fmt.Sprintf("%s/members/%d/remove", pages[0], userID(t, store, "mel@example.com"))},
	} {
		if resp := stan.Do(r.method, r.path, url.Values{"content": {"x"}, "email": {"stan@example.com"}}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s as Stan = %d, want 404", r.method, r.path, resp.StatusCode)
		}
	}
}
