package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/ollama/ollama/api"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// The main screens as a person sees them, on a laptop (1280×900) and on a
// phone (390×844, touch): every page must fit the width of the window
// (nothing scrolls sideways), pass an axe-core audit without serious or
// critical violations in both themes, and is written as a screenshot to
// the artifacts folder (`make screens` puts them in screens/).

// scLongAnswer is the answer of the thread shown in the screenshots: the
// kinds of markdown a long answer has.
const scLongAnswer = "Here is a small worker pool in Go, with the reasoning behind each part.\n\n" +
	"## The pool\n\n" +
	"Each worker reads jobs from one channel and writes results to another; closing `jobs` ends them.\n\n" +
	"```go\nfunc pool(n int, jobs <-chan Job, results chan<- Result) {\n\tvar wg sync.WaitGroup\n\tfor range n {\n\t\twg.Add(1)\n\t\tgo func() {\n\t\t\tdefer wg.Done()\n\t\t\tfor j := range jobs {\n\t\t\t\tresults <- j.Run()\n\t\t\t}\n\t\t}()\n\t}\n\twg.Wait()\n\tclose(results)\n}\n```\n\n" +
	"## How many workers\n\n" +
	"| workload | workers | why |\n|---|---|---|\n| CPU-bound | `runtime.NumCPU()` | more only adds switching |\n| network calls | 16–64 | they mostly wait |\n| disk | 4–8 | the device queues anyway |\n\n" +
	"With $n$ workers and jobs of mean time $t$, the pool drains $m$ jobs in about $$T \\approx \\frac{m \\cdot t}{n}$$ when nothing else is shared.\n\n" +
	"> Measure before tuning: a pool that is twice as large is rarely twice as fast.\n\n" +
	"1. Start with the number of cores.\n2. Watch the queue length.\n3. Raise it while throughput grows.\n"

// scScript answers the screenshot threads: titles, the long answer, and
// short answers otherwise.
func scScript(req *api.ChatRequest) fakeollama.Reply {
	last := ""
	if len(req.Messages) > 0 {
		last = req.Messages[len(req.Messages)-1].Content
	}
	if len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Content, "You write titles") {
		for _, m := range req.Messages {
			switch {
			case strings.Contains(m.Content, "worker pool"):
				return fakeollama.Reply{Chunks: []string{"A worker pool in Go"}}
			case strings.Contains(m.Content, "bread"):
				return fakeollama.Reply{Chunks: []string{"Sourdough starter schedule"}}
			case strings.Contains(m.Content, "Lisbon"):
				return fakeollama.Reply{Chunks: []string{"Three days in Lisbon"}}
			}
		}
		return fakeollama.Reply{Chunks: []string{"Notes"}}
	}
	if strings.Contains(last, "haiku") {
		// A run still writing: its answer stays a placeholder.
		return fakeollama.Reply{Chunks: []string{"Warp threads wait in rows;\n", "the shuttle crosses, "}, Hang: true}
	}
	if strings.Contains(last, "worker pool") {
		return fakeollama.Reply{Chunks: strings.SplitAfter(scLongAnswer, "\n")}
	}
	return fakeollama.Reply{Chunks: []string{"Feed it once a day at room temperature, ", "twice when it is warm."}}
}

// scScreen is a page of the tour.
type scScreen struct{ name, path string }

// scSeed fills a fresh Weft with what the main screens show and returns
// the tour (the login page is visited signed out, first).
func scSeed(t *testing.T, app *testenv.App) []scScreen {
	t.Helper()
	ctx := context.Background()
	app.Fake.SetScript(scScript)
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("ada@example.com", password)
	u, err := app.Store.UserByEmail(ctx, "ada@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := app.Store.DefaultWorkspace(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	send := func(content string) int64 {
		t.Helper()
		r := c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(ws.ID)}, "content": {content}})
		var thread int64
		if _, err := fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &thread); r.StatusCode != http.StatusSeeOther || err != nil {
			t.Fatalf("send %q: %d %q", content, r.StatusCode, r.Header.Get("Location"))
		}
		waitIdle(t, app.Store, u.ID, thread)
		return thread
	}
	send("Plan three days in Lisbon for me.")
	send("How often should I feed a bread starter?")
	thread := send("How do I size a worker pool in Go?")
	if r := c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"content": {"And when the jobs are I/O bound, like a worker pool of HTTP calls?"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("second message: %d", r.StatusCode)
	}
	waitIdle(t, app.Store, u.ID, thread)

	r := c.Post("/kb", url.Values{"name": {"Travel notes"}, "embed_model": {"embedder"}})
	var kb int64
	if _, err := fmt.Sscanf(r.Header.Get("Location"), "/kb/%d", &kb); err != nil {
		t.Fatalf("create a knowledge base: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	upload(t, c, kb, map[string]string{"lisbon.md": tramGuide})
	waitDocs(t, app.Store, u.ID, kb)
	if r := c.Post("/memory", url.Values{"fact": {"I write Go for a living and prefer short answers."}}); r.StatusCode >= 400 {
		t.Fatalf("remember: %d", r.StatusCode)
	}
	r = c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(ws.ID)}, "content": {"Write a haiku about looms."}})
	var running int64
	if _, err := fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &running); err != nil {
		t.Fatalf("start a run: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	// An API token, so /settings shows one in its list.
	if r := c.Post("/settings/tokens", url.Values{"name": {"laptop script"}, "scope": {"chat", "read"}, "expires": {"30d"}}); r.StatusCode != http.StatusOK {
		t.Fatalf("make an API token: %d", r.StatusCode)
	}
	share := shareURLRe.FindStringSubmatch(c.Post(fmt.Sprintf("/t/%d/shares", thread), url.Values{"expires": {"7d"}}).Body)
	if share == nil {
		t.Fatal("share the thread: no link in the answer")
	}
	shared, err := url.Parse(share[1])
	if err != nil {
		t.Fatal(err)
	}
	rooms := scSeedRooms(t, app, c, u.ID)
	w := fmt.Sprint(ws.ID)
	return append([]scScreen{
		{"home", "/"},
		{"thread", fmt.Sprintf("/t/%d", thread)},
		{"running", fmt.Sprintf("/t/%d", running)},
		{"kb", "/kb"},
		{"kb-page", fmt.Sprintf("/kb/%d", kb)},
		{"settings", "/settings"},
		{"admin", "/admin"},
		{"tools", "/tools?w=" + w},
		{"import", "/import?w=" + w},
		{"memory", "/memory"},
		{"settings-tokens", "/settings#tokens"},
		{"search", "/search?q=worker"},
		{"models", "/models"},
		{"admin-users", "/admin/users"},
		{"share-page", shared.Path},
	}, rooms...)
}

// scSeedRooms makes the rooms of the tour and returns their screens. Ada
// (c, user ada) owns "Launch" with Ben and two agents: Scout (tools on)
// has answered her at length, Quill is writing a haiku Ben asked for
// (it never ends) and Scout's next answer waits behind it. Ben owns
// "Reading group", where Ada is a member and only people have spoken.
func scSeedRooms(t *testing.T, app *testenv.App, c *testenv.Client, ada int64) []scScreen {
	t.Helper()
	ctx := context.Background()
	ben := testenv.NewClient(t, app.TS.URL)
	ben.Register("ben@example.com", password)
	mkRoom := func(c *testenv.Client, name string) int64 {
		t.Helper()
		r := c.Post("/rooms", url.Values{"name": {name}})
		var room int64
		if _, err := fmt.Sscanf(r.Header.Get("Location"), "/rooms/%d", &room); r.StatusCode != http.StatusSeeOther || err != nil {
			t.Fatalf("make the room %q: %d %q", name, r.StatusCode, r.Header.Get("Location"))
		}
		return room
	}
	post := func(c *testenv.Client, path string, form url.Values) {
		t.Helper()
		if r := c.Post(path, form); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST %s: %d %.300s", path, r.StatusCode, r.Body)
		}
	}
	launch := mkRoom(c, "Launch")
	lp := fmt.Sprintf("/rooms/%d", launch)
	post(c, lp+"/members", url.Values{"email": {"ben@example.com"}})
	post(c, lp+"/agents", url.Values{"name": {"Scout"}, "model": {"toolie:latest"}, "prompt": {"You are Scout. Find facts."}, "tools": {"on"}})
	post(c, lp+"/agents", url.Values{"name": {"Quill"}, "model": {"tiny:latest"}, "prompt": {"You are Quill. Write short verse."}})
	var thread int64
	if err := app.Store.Pool.QueryRow(ctx, "SELECT thread_id FROM rooms WHERE id = $1", launch).Scan(&thread); err != nil {
		t.Fatal(err)
	}
	post(c, lp+"/messages", url.Values{"content": {"@Scout how do I size a worker pool in Go?"}})
	waitIdle(t, app.Store, ada, thread)
	post(ben, lp+"/messages", url.Values{"content": {"Thanks, that helps. @Quill write a haiku about looms while we wait?"}})
	post(c, lp+"/messages", url.Values{"content": {"@Scout and when the jobs are HTTP calls?"}})
	if !testwait.Until(20*time.Second, func() bool {
		q, err := app.Store.RoomQueue(ctx, ada, thread)
		return err == nil && len(q) == 2 && q[0].Status == db.RunRunning
	}) {
		t.Fatal("the room's queue never held Quill's answer running and Scout's waiting")
	}
	agents, err := app.Store.RoomAgents(ctx, ada, launch)
	if err != nil || len(agents) == 0 {
		t.Fatalf("the room's agents: %v %v", agents, err)
	}

	reading := mkRoom(ben, "Reading group")
	rp := fmt.Sprintf("/rooms/%d", reading)
	post(ben, rp+"/members", url.Values{"email": {"ada@example.com"}})
	post(ben, rp+"/agents", url.Values{"name": {"Librarian"}, "model": {"tiny:latest"}, "prompt": {"You are Librarian."}})
	post(ben, rp+"/messages", url.Values{"content": {"This month: The Dispossessed. First half by the 15th, please."}})
	post(c, rp+"/messages", url.Values{"content": {"I'm in. Halfway through already."}})
	return []scScreen{
		{"rooms", "/rooms"},
		{"room", lp},
		{"room-agent", fmt.Sprintf("%s/agents/%d", lp, agents[0].ID)},
		{"room-member", rp},
	}
}

// scRoomOpen shows a room's open parts: on a phone its panel opened from
// its bar (checked like a page), then, at either size, the mention
// suggestions of its composer.
func scRoomOpen(ctx context.Context, t *testing.T, do func(string, ...chromedp.Action[chromedp.Void]), check func(string, int64), shoot func(string), suffix string, size scSize) {
	t.Helper()
	if size.phone {
		do("open the room's panel", click(`.room-side-toggle`), waitFor(`document.querySelector("[data-testid=room-invite]").checkVisibility()`))
		check("room-panel"+suffix, size.width)
		do("shut the room's panel", click(`.room-side-toggle`), waitFor(`!document.querySelector("[data-testid=room-invite]").checkVisibility()`))
	}
	do("type a mention", typeInto(`[data-testid=composer] textarea`, "@"),
		waitFor(`!document.querySelector("[data-testid=mention-suggestions]").hidden`))
	for _, a := range scAudit(ctx, t) {
		t.Errorf("room with its mention suggestions open%s: axe-core %s (%s): %s\n\t%s", suffix, a.ID, a.Impact, a.Help, strings.Join(a.Nodes, "\n\t"))
	}
	shoot("room-mention" + suffix)
	// Emptied as a person would (an input event): the suggestions hide and
	// no draft is kept for the next visit.
	do("clear the composer", chromedp.Evaluate[chromedp.Void](`(() => { const box = document.querySelector("[data-testid=composer] textarea");
		box.value = ""; box.dispatchEvent(new Event("input", {bubbles: true})) })()`),
		waitFor(`document.querySelector("[data-testid=mention-suggestions]").hidden`))
}

// scSize is a window the tour is seen in.
type scSize struct {
	name          string
	width, height int64
	phone         bool
}

var scSizes = []scSize{{"laptop", 1280, 900, false}, {"phone", 390, 844, true}}

// scView sets the window's size (a phone is a touch screen) and the
// colour scheme the system asks for.
func scView(s scSize, scheme string) chromedp.Action[chromedp.Void] {
	opts := []chromedp.EmulateViewportOption{chromedp.EmulatePortrait}
	if s.phone {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2))
	}
	return chromedp.Steps(
		chromedp.EmulateViewport(s.width, s.height, opts...),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
			})
			return err
		}),
	)
}

// scAxeViolation is one rule axe-core found broken, with where.
type scAxeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// scAudit runs axe-core on the page and returns its serious and critical
// violations.
func scAudit(ctx context.Context, t *testing.T) []scAxeViolation {
	t.Helper()
	loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof axe === "object"`))
	if err == nil && !loaded {
		_, err = chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](testenv.Axe(t)))
	}
	if err != nil {
		t.Fatalf("load axe-core: %v", err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then((r) => JSON.stringify(
		r.violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => ({
			id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map((n) => n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " ").slice(0, 200)),
		}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run axe-core: %v", err)
	}
	var vs []scAxeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("axe-core's answer %q: %v", out, err)
	}
	return vs
}

// scSettled waits until the page is loaded, its scripts ran and nothing
// is being swapped in (a shared page, /s/…, has no htmx).
const scSettled = `document.readyState === "complete" && (typeof htmx === "object" || !document.querySelector("script[src*=htmx]")) &&
	!document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling")`

func TestBrowserEveryMainPageFitsAPhoneAndALaptopInBothThemesWithoutSeriousAccessibilityViolations(t *testing.T) {
	t.Parallel()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	tour := scSeed(t, app)
	ctx := testenv.Browser(t, 6*time.Minute)
	dir := testenv.Artifacts(t, "screens")
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shoot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// check looks at the page shown in a window width px wide: nothing
	// wider than the window, no serious accessibility violation; then
	// keeps a screenshot. (A phone's window grows to fit what is too wide,
	// so innerWidth alone would not tell.)
	check := func(name string, width int64) {
		t.Helper()
		do(name+" settles", waitFor(scSettled))
		if wide, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => {
			const w = Math.max(document.documentElement.scrollWidth, innerWidth);
			if (w <= %d) return "";
			return w + " px wide in a window of %d px; too wide: " +
				[...document.querySelectorAll("body *")].filter((el) => el.getBoundingClientRect().right > %d + 0.5)
					.slice(-4).map((el) => el.tagName.toLowerCase() + (typeof el.className === "string" && el.className ? "." + el.className.trim().replace(/\s+/g, ".") : "")).join(", ");
		})()`, width, width, width))); err != nil || wide != "" {
			t.Errorf("%s scrolls sideways: %s %v", name, wide, err)
		}
		for _, v := range scAudit(ctx, t) {
			t.Errorf("%s: axe-core %s (%s): %s\n\t%s", name, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n\t"))
		}
		shoot(name)
	}

	type view struct {
		size   scSize
		scheme string
		suffix string
	}
	var views []view
	for _, size := range scSizes {
		for _, scheme := range []string{"light", "dark"} {
			suffix := "-" + size.name
			if scheme == "dark" {
				suffix += "-dark"
			}
			views = append(views, view{size, scheme, suffix})
		}
	}
	for _, v := range views {
		do("resize to "+v.suffix, scView(v.size, v.scheme), chromedp.Navigate(app.TS.URL+"/login"))
		check("login"+v.suffix, v.size.width)
	}
	do("sign in",
		typeInto(`input[name=email]`, "ada@example.com"),
		typeInto(`input[name=password]`, password),
		submit(`form[data-testid=login]`),
		waitFor(`location.pathname === "/" && document.querySelector("[data-testid=composer]")`))
	for _, v := range views {
		do("resize to "+v.suffix, scView(v.size, v.scheme))
		for _, s := range tour {
			do("open "+s.path, chromedp.Navigate(app.TS.URL+s.path))
			if s.name == "thread" {
				// A thread opens at its end; the screenshot shows its head.
				do("scroll to the top of the thread", waitFor(scSettled), chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`), waitFor(`scrollY === 0`))
			}
			check(s.name+v.suffix, v.size.width)
			if s.name == "room" {
				scRoomOpen(ctx, t, do, check, shoot, v.suffix, v.size)
			}
			if s.name != "thread" {
				continue
			}
			do("scroll to the end of the thread", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.body.scrollHeight)`),
				waitFor(`innerHeight + scrollY >= document.body.scrollHeight - 2`))
			shoot("thread-end" + v.suffix)
			// The header's panel and menu, open.
			do("open the Context panel", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`), click(`[data-testid=thread-settings] > summary`),
				waitFor(`document.querySelector("[data-testid=thread-settings-form]").checkVisibility()`))
			shoot("thread-context" + v.suffix)
			do("open the thread's menu", click(`[data-testid=thread-settings] > summary`), click(`details.thread-actions > summary`),
				waitFor(`document.querySelector("[data-testid=rename-form]").checkVisibility()`))
			for _, a := range scAudit(ctx, t) {
				t.Errorf("thread with its menu open%s: axe-core %s (%s): %s\n\t%s", v.suffix, a.ID, a.Impact, a.Help, strings.Join(a.Nodes, "\n\t"))
			}
			shoot("thread-menu" + v.suffix)
			do("close the menu", click(`details.thread-actions > summary`))
			if v.size.phone {
				do("open the drawer", click(`[data-drawer-open]`), waitFor(`document.querySelector(".app").dataset.drawer === "open" && document.activeElement?.matches(".drawer-close")`))
				for _, a := range scAudit(ctx, t) {
					t.Errorf("thread with the drawer open%s: axe-core %s (%s): %s\n\t%s", v.suffix, a.ID, a.Impact, a.Help, strings.Join(a.Nodes, "\n\t"))
				}
				shoot("drawer" + v.suffix)
			}
		}
	}
}
