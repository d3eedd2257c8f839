package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// pullFake is a fake model server whose registry offers qwen3:8b in two
// layers.
func pullFake(t *testing.T) *fakeollama.Server {
	return fakeollama.New(t, fakeollama.WithRegistry(fakeollama.PullModel{
		Model:  fakeollama.Model{Name: "qwen3:8b", Capabilities: []string{fakeollama.CapCompletion, fakeollama.CapTools}, Family: "qwen3", ContextLength: 8192},
		Layers: []int64{40_000_000, 1_000}, Steps: 4,
	}))
}

// startPull pulls model as admin through c and returns the new pull.
func startPull(t *testing.T, c *testenv.Client, store *db.DB, admin int64, model string) db.ModelPull {
	t.Helper()
	if r := c.Post("/admin/models/pull", url.Values{"name": {model}}); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/admin/models" {
		t.Fatalf("pull %s = %d %q: %.500s", model, r.StatusCode, r.Header.Get("Location"), r.Body)
	}
	pulls, err := store.ModelPulls(context.Background(), admin, 10)
	if err != nil || len(pulls) == 0 || (pulls[0].Model != model && pulls[0].Model != model+":latest") {
		t.Fatalf("pulls = %+v, %v", pulls, err)
	}
	return pulls[0]
}

func adminID(t *testing.T, store *db.DB, email string) int64 {
	t.Helper()
	u, err := store.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// followPull reads a pull's event stream in the background.
func followPull(t *testing.T, c *testenv.Client, id int64) <-chan sseEvent {
	ch := make(chan sseEvent, 256)
	go func() {
		defer close(ch)
		readEvents(t, c, fmt.Sprintf("/admin/models/pulls/%d/events", id), func(ev sseEvent) { ch <- ev })
	}()
	return ch
}

var completedAttr = regexp.MustCompile(`data-completed="(\d+)"`)

// waitEvent waits for an event of the stream that satisfies ok.
func waitEvent(t *testing.T, events <-chan sseEvent, what string, ok func(sseEvent) bool) sseEvent {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, open := <-events:
			if !open {
				t.Fatalf("the stream ended before %s", what)
			}
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s within 20 s", what)
		}
	}
}

func midPull(ev sseEvent) bool {
	m := completedAttr.FindStringSubmatch(ev.data)
	n, _ := strconv.Atoi(valueOr(m, 1))
	return ev.name == "pull" && strings.Contains(ev.data, `data-status="running"`) && n > 0
}

func valueOr(m []string, i int) string {
	if len(m) > i {
		return m[i]
	}
	return ""
}

// An administrator's pull shows its progress live (bytes, layer, status),
// ends completed, and the model is then in the list — for members too,
// who see no controls and may not pull.
func TestAPullShowsLiveProgressThenTheModelIsInTheList(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := pullFake(t)
	app := testenv.Start(t, store, testenv.Options{Fake: fake})
	admin := testenv.NewClient(t, app.TS.URL)
	admin.Register("admin@example.com", password)
	member := testenv.NewClient(t, app.TS.URL)
	member.Register("member@example.com", password)

	fake.HoldPulls(3) // the manifest, then a quarter of the first layer
	aid := adminID(t, store, "admin@example.com")
	pull := startPull(t, admin, store, aid, "qwen3:8b")
	page := admin.Get("/admin/models").Body
	if !strings.Contains(page, `data-testid="pull-progress" data-pull-id="`+fmt.Sprint(pull.ID)+`"`) || !strings.Contains(page, "sse-connect") {
		t.Fatalf("the page lacks the running pull:\n%s", section(page, "pulls"))
	}
	events := followPull(t, admin, pull.ID)
	ev := waitEvent(t, events, "progress of the first layer", midPull)
	for _, want := range []string{"9.6 MB of 38.2 MB (25%)", `data-testid="pull-layer"`, "layer 1 (", "pulling ", `data-testid="pull-cancel"`} {
		if !strings.Contains(ev.data, want) {
			t.Errorf("the progress lacks %q: %s", want, ev.data)
		}
	}
	fake.ReleasePulls()
	done := waitEvent(t, events, "the end", func(ev sseEvent) bool { return ev.name == "done" })
	if !strings.Contains(done.data, `data-status="completed"`) || !strings.Contains(done.data, `hx-select="#model-list"`) {
		t.Fatalf("done = %s", done.data)
	}
	if p, err := store.ModelPull(context.Background(), aid, pull.ID); err != nil || p.Status != db.PullCompleted || p.Total != 40_001_000 || p.Completed != p.Total || p.Layers != 2 {
		t.Fatalf("row = %+v, %v", p, err)
	}
	page = admin.Get("/admin/models").Body
	if !strings.Contains(page, `data-model="qwen3:8b"`) || !strings.Contains(page, "qwen3") || !strings.Contains(page, "completion, tools") || !strings.Contains(page, "8192") {
		t.Fatalf("the list lacks the pulled model:\n%s", section(page, "model-list"))
	}

	list := member.Get("/models")
	if list.StatusCode != 200 || !strings.Contains(list.Body, `data-model="qwen3:8b"`) || !strings.Contains(list.Body, `data-model="tiny:latest"`) {
		t.Fatalf("members' list = %d\n%s", list.StatusCode, section(list.Body, "model-list"))
	}
	for _, control := range []string{`data-testid="model-pull"`, `data-testid="model-delete-link"`, `data-testid="pull-progress"`} {
		if strings.Contains(list.Body, control) {
			t.Errorf("members see %s", control)
		}
	}
	if r := member.Post("/admin/models/pull", url.Values{"name": {"tiny"}}); r.StatusCode != http.StatusForbidden {
		t.Errorf("a member's pull = %d", r.StatusCode)
	}
	if n := len(fake.Pulls()); n != 1 {
		t.Errorf("the fake saw %d pulls", n)
	}
	if m := admin.Get("/metrics").Body; !strings.Contains(m, `weft_model_pulls_total{status="completed"} 1`) || !strings.Contains(m, "weft_model_pulls_running 0") {
		t.Errorf("metrics lack the pull")
	}
}

// A pull Ollama refuses shows Ollama's words on its row.
func TestAFailingPullShowsItsErrorOnItsRow(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{Fake: pullFake(t)})
	admin := testenv.NewClient(t, app.TS.URL)
	admin.Register("admin@example.com", password)
	pull := startPull(t, admin, store, adminID(t, store, "admin@example.com"), "no-such-model")
	done := waitEvent(t, followPull(t, admin, pull.ID), "the end", func(ev sseEvent) bool { return ev.name == "done" })
	if !strings.Contains(done.data, `data-status="failed"`) || !strings.Contains(done.data, "pull model manifest: file does not exist") {
		t.Fatalf("done = %s", done.data)
	}
	page := admin.Get("/admin/models").Body
	if !strings.Contains(page, "pull model manifest: file does not exist") || strings.Contains(page, `data-model="no-such-model`) {
		t.Fatalf("page:\n%s", section(page, "pulls"))
	}
	// A name that is no model name is refused before anything is pulled.
	if r := admin.Post("/admin/models/pull", url.Values{"name": {"bad name; rm -rf"}}); r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "Type a model name") {
		t.Fatalf("bad name = %d", r.StatusCode)
	}
}

// Cancel stops the request to the model server (the fake sees its client
// leave) and the row says cancelled.
func TestCancelStopsThePullAtTheModelServer(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := pullFake(t)
	app := testenv.Start(t, store, testenv.Options{Fake: fake})
	admin := testenv.NewClient(t, app.TS.URL)
	admin.Register("admin@example.com", password)
	fake.HoldPulls(2)
	pull := startPull(t, admin, store, adminID(t, store, "admin@example.com"), "qwen3:8b")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fake.WaitPulls(ctx, func(p []fakeollama.PullRecord) bool { return len(p) == 1 && p[0].Lines == 2 }); err != nil {
		t.Fatal(err)
	}
	if r := admin.HTMX(fmt.Sprintf("/admin/models/pulls/%d/cancel", pull.ID), nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("cancel = %d", r.StatusCode)
	}
	if err := fake.WaitPulls(ctx, func(p []fakeollama.PullRecord) bool { return p[0].Cancelled }); err != nil {
		t.Fatalf("the model server's request was not cancelled: %+v", fake.Pulls())
	}
	done := waitEvent(t, followPull(t, admin, pull.ID), "the end", func(ev sseEvent) bool { return ev.name == "done" })
	if !strings.Contains(done.data, `data-status="cancelled"`) {
		t.Fatalf("done = %s", done.data)
	}
	if strings.Contains(admin.Get("/admin/models").Body, `data-model="qwen3:8b"`) {
		t.Fatal("a cancelled pull's model is listed")
	}
}

// Two instances: a pull started on A is followed live on B and cancelled
// from B; and a pull left running by an instance that restarts is marked
// interrupted.
func TestAPullIsFollowedAndCancelledFromAnotherInstance(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := pullFake(t)
	a := testenv.Start(t, store, testenv.Options{Fake: fake, Chat: chat.Config{Instance: "A"}})
	b := testenv.Start(t, store, testenv.Options{Fake: fake, Chat: chat.Config{Instance: "B"}})
	onA := testenv.NewClient(t, a.TS.URL)
	onA.Register("admin@example.com", password)
	onB := testenv.NewClient(t, b.TS.URL)
	onB.Login("admin@example.com", password)
	fake.HoldPulls(3)
	pull := startPull(t, onA, store, adminID(t, store, "admin@example.com"), "qwen3:8b")
	events := followPull(t, onB, pull.ID)
	waitEvent(t, events, "progress on the other instance", midPull)
	if r := onB.Post(fmt.Sprintf("/admin/models/pulls/%d/cancel", pull.ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel on B = %d", r.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fake.WaitPulls(ctx, func(p []fakeollama.PullRecord) bool { return p[0].Cancelled }); err != nil {
		t.Fatalf("B's cancel did not reach A's request: %+v", fake.Pulls())
	}
	done := waitEvent(t, events, "the end on B", func(ev sseEvent) bool { return ev.name == "done" })
	if !strings.Contains(done.data, `data-status="cancelled"`) {
		t.Fatalf("done on B = %s", done.data)
	}
}

func TestAPullLeftRunningByAStoppedInstanceIsInterruptedAtItsRestart(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	first := testenv.Start(t, store, testenv.Options{Chat: chat.Config{Instance: "gpu-box"}})
	c := testenv.NewClient(t, first.TS.URL)
	c.Register("admin@example.com", password)
	admin := adminID(t, store, "admin@example.com")
	// The row a crash leaves: running, on this instance.
	left, err := store.StartModelPull(ctx, admin, "llama3.2", "", "gpu-box")
	if err != nil {
		t.Fatal(err)
	}
	again := testenv.Start(t, store, testenv.Options{Chat: chat.Config{Instance: "gpu-box"}})
	p, err := store.ModelPull(ctx, admin, left.ID)
	if err != nil || p.Status != db.PullInterrupted || !strings.Contains(p.Error, "Pull it again") || p.FinishedAt == nil {
		t.Fatalf("after the restart: %+v, %v", p, err)
	}
	c2 := testenv.NewClient(t, again.TS.URL)
	c2.Login("admin@example.com", password)
	if page := c2.Get("/admin/models").Body; !strings.Contains(page, `data-status="interrupted"`) {
		t.Fatalf("page:\n%s", section(page, "pulls"))
	}
}

// Delete asks first (a page, then a form with confirm=yes), removes the
// model from the server and from the list; a model being pulled cannot be
// deleted.
func TestDeletingAModelAsksFirstThenRemovesIt(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := pullFake(t)
	app := testenv.Start(t, store, testenv.Options{Fake: fake})
	admin := testenv.NewClient(t, app.TS.URL)
	admin.Register("admin@example.com", password)
	confirm := admin.Get("/admin/models/delete?name=toolie%3Alatest")
	if confirm.StatusCode != 200 || !strings.Contains(confirm.Body, `data-testid="model-delete-confirm"`) || !strings.Contains(confirm.Body, `name="confirm" value="yes"`) {
		t.Fatalf("confirm page = %d", confirm.StatusCode)
	}
	if r := admin.Post("/admin/models/delete", url.Values{"name": {"toolie:latest"}}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("delete without confirmation = %d", r.StatusCode)
	}
	if len(fake.Deleted()) != 0 {
		t.Fatal("deleted without confirmation")
	}
	r := admin.Post("/admin/models/delete", url.Values{"name": {"toolie:latest"}, "confirm": {"yes"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete = %d: %.300s", r.StatusCode, r.Body)
	}
	if d := fake.Deleted(); len(d) != 1 || d[0] != "toolie:latest" {
		t.Fatalf("the fake deleted %v", d)
	}
	page := admin.Get(r.Header.Get("Location")).Body
	if strings.Contains(page, `data-model="toolie:latest"`) || !strings.Contains(page, "Deleted toolie:latest.") {
		t.Fatalf("after delete:\n%s", section(page, "model-list"))
	}
	// A name that is no model name is refused before the server is asked.
	for _, path := range []string{"/admin/models/delete", "/admin/models/unload"} {
		r := admin.Post(path, url.Values{"name": {"../../x y\nz"}, "confirm": {"yes"}})
		if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "not a model name") {
			t.Fatalf("%s of a bad name = %d: %s", path, r.StatusCode, section(r.Body, `class="error"`))
		}
	}
	// Being pulled: refused, the pull would bring it back.
	fake.HoldPulls(1)
	startPull(t, admin, store, adminID(t, store, "admin@example.com"), "qwen3:8b")
	r = admin.Post("/admin/models/delete", url.Values{"name": {"qwen3:8b"}, "confirm": {"yes"}})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "cancel the pull first") {
		t.Fatalf("delete while pulling = %d", r.StatusCode)
	}
	fake.ReleasePulls()
}

// Deleting a loaded model takes it out of memory too: Ollama's delete
// leaves it loaded, where no unload reaches it once its files are gone
// (Unload then says so instead of "Unloaded").
func TestDeletingALoadedModelUnloadsItFirst(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := pullFake(t)
	app := testenv.Start(t, store, testenv.Options{Fake: fake})
	admin := testenv.NewClient(t, app.TS.URL)
	admin.Register("admin@example.com", password)
	for _, m := range []string{"thinker", "toolie"} {
		if err := fake.Client().Generate(context.Background(), &api.GenerateRequest{Model: m}, func(api.GenerateResponse) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if r := admin.Post("/admin/models/delete", url.Values{"name": {"thinker:latest"}, "confirm": {"yes"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete = %d: %.300s", r.StatusCode, r.Body)
	}
	ps, err := fake.Client().ListRunning(context.Background())
	if err != nil || len(ps.Models) != 1 || ps.Models[0].Name != "toolie:latest" {
		t.Fatalf("ps after deleting thinker = %+v, %v", ps, err)
	}
	// Deleted behind Weft's back while loaded: Unload cannot reach it.
	if err := fake.Client().Delete(context.Background(), &api.DeleteRequest{Model: "toolie"}); err != nil {
		t.Fatal(err)
	}
	r := admin.Post("/admin/models/unload", url.Values{"name": {"toolie:latest"}})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "no longer on the model server") {
		t.Fatalf("unload of a deleted model = %d: %s", r.StatusCode, section(r.Body, "error"))
	}
}

// The loaded models (/api/ps) are listed with their memory, and Unload
// takes one out.
func TestUnloadTakesAModelOutOfMemory(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	fake := pullFake(t)
	app := testenv.Start(t, store, testenv.Options{Fake: fake})
	admin := testenv.NewClient(t, app.TS.URL)
	admin.Register("admin@example.com", password)
	if err := fake.Client().Generate(context.Background(), &api.GenerateRequest{Model: "thinker"}, func(api.GenerateResponse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	page := admin.Get("/admin/models").Body
	if !strings.Contains(page, `data-testid="loaded-row" data-model="thinker:latest"`) || !strings.Contains(page, "4096") {
		t.Fatalf("loaded:\n%s", section(page, "loaded-models"))
	}
	if r := admin.Post("/admin/models/unload", url.Values{"name": {"thinker:latest"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("unload = %d", r.StatusCode)
	}
	ps, err := fake.Client().ListRunning(context.Background())
	if err != nil || len(ps.Models) != 0 {
		t.Fatalf("ps after unload = %+v, %v", ps, err)
	}
	if page := admin.Get("/admin/models").Body; strings.Contains(page, `data-testid="loaded-row"`) || !strings.Contains(page, `data-testid="loaded-empty"`) {
		t.Fatalf("after unload:\n%s", section(page, "loaded-models"))
	}
}

// A workspace's default model is what the composer of a new thread there
// preselects; a thread's own model still wins; only chat models are taken.
func TestAWorkspaceDefaultModelPreselectsTheComposer(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("owner@example.com", password)
	ws, err := store.DefaultWorkspace(context.Background(), adminID(t, store, "owner@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	W := fmt.Sprint(ws.ID)
	if home := c.Get("/").Body; !strings.Contains(home, `<option value="tiny:latest" selected>`) {
		t.Fatal("before: tiny (WEFT_DEFAULT_MODEL) is not preselected")
	}
	if r := c.Post("/workspaces/"+W+"/model", url.Values{"model": {"embedder:latest"}}); r.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("an embedding model as default = %d", r.StatusCode)
	}
	if r := c.Post("/workspaces/"+W+"/model", url.Values{"model": {"thinker:latest"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("set = %d", r.StatusCode)
	}
	if page := c.Get("/workspaces").Body; !strings.Contains(page, `<option value="thinker:latest" selected>`) {
		t.Fatal("the workspaces page does not show the setting")
	}
	if home := c.Get("/").Body; !strings.Contains(home, `<option value="thinker:latest" selected>`) || strings.Contains(home, `<option value="tiny:latest" selected>`) {
		t.Fatal("the composer of a new thread does not preselect the workspace's model")
	}
	r := c.Post("/t", url.Values{"workspace_id": {W}, "content": {"hi"}, "model": {"toolie:latest"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send = %d", r.StatusCode)
	}
	if page := c.Get(r.Header.Get("Location")).Body; !strings.Contains(page, `<option value="toolie:latest" selected>`) {
		t.Fatal("the thread's own model does not win")
	}
	if r := c.Post("/workspaces/"+W+"/model", url.Values{"model": {""}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("clear = %d", r.StatusCode)
	}
	if home := c.Get("/").Body; !strings.Contains(home, `<option value="tiny:latest" selected>`) {
		t.Fatal("cleared: the instance default is not back")
	}
}

// With several model servers, a pull goes onto the server chosen (or
// onto every one), the list says which servers hold each model, and a
// delete takes it from one server only when asked so.
func TestWithSeveralServersAPullTargetsTheChosenServer(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	a, b := pullFake(t), pullFake(t)
	app := testenv.Start(t, store, testenv.Options{Fake: a, MoreFakes: []*fakeollama.Server{b}})
	admin := testenv.NewClient(t, app.TS.URL)
	admin.Register("admin@example.com", password)
	aid := adminID(t, store, "admin@example.com")
	la, lb := strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")
	page := admin.Get("/admin/models").Body
	if !strings.Contains(page, `<select name="server" aria-label="Onto">`) || !strings.Contains(page, `<option value="`+lb+`">`) {
		t.Fatalf("no server choice on the pull form:\n%s", section(page, "model-pull"))
	}
	if r := admin.Post("/admin/models/pull", url.Values{"name": {"qwen3:8b"}, "server": {lb}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("pull onto %s = %d", lb, r.StatusCode)
	}
	pulls, err := store.ModelPulls(context.Background(), aid, 10)
	if err != nil || len(pulls) != 1 || pulls[0].Server != lb {
		t.Fatalf("pulls = %+v, %v", pulls, err)
	}
	done := waitEvent(t, followPull(t, admin, pulls[0].ID), "the end", func(ev sseEvent) bool { return ev.name == "done" })
	if !strings.Contains(done.data, `data-status="completed"`) || !strings.Contains(done.data, "onto "+lb) {
		t.Fatalf("done = %s", done.data)
	}
	if len(a.Pulls()) != 0 || len(b.Pulls()) != 1 {
		t.Fatalf("pulls seen: %d on a, %d on b", len(a.Pulls()), len(b.Pulls()))
	}
	where := regexp.MustCompile(`data-model="qwen3:8b">(?s:.*?)data-testid="model-where">([^<]*)<`)
	if m := where.FindStringSubmatch(admin.Get("/admin/models").Body); m == nil || m[1] != lb {
		t.Fatalf("qwen3:8b is said to be on %v, want %s", m, lb)
	}
	// Onto every server: one pull per server; b already has it (cached).
	if r := admin.Post("/admin/models/pull", url.Values{"name": {"qwen3:8b"}, "server": {""}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("pull onto every server = %d", r.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, f := range []*fakeollama.Server{a, b} {
		if err := f.WaitPulls(ctx, func(p []fakeollama.PullRecord) bool { return len(p) > 0 && p[len(p)-1].Completed }); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "both pulls to end", 20*time.Second, func() bool {
		ps, _ := store.ModelPulls(context.Background(), aid, 10)
		return len(ps) == 3 && !ps[0].Running() && !ps[1].Running()
	})
	if m := where.FindStringSubmatch(admin.Get("/admin/models").Body); m == nil || m[1] != la+", "+lb {
		t.Fatalf("after pulling onto every server, qwen3:8b is said to be on %v", m)
	}
	// Delete from a only.
	if r := admin.Post("/admin/models/delete", url.Values{"name": {"qwen3:8b"}, "confirm": {"yes"}, "server": {la}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete from %s = %d: %.300s", la, r.StatusCode, r.Body)
	}
	if len(a.Deleted()) != 1 || len(b.Deleted()) != 0 {
		t.Fatalf("deleted: a %v, b %v", a.Deleted(), b.Deleted())
	}
	if m := where.FindStringSubmatch(admin.Get("/admin/models").Body); m == nil || m[1] != lb {
		t.Fatalf("after deleting from %s, qwen3:8b is said to be on %v", la, m)
	}
}
