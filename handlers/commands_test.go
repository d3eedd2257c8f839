package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

// cmdEnv is a signed-in user with one answered thread.
type cmdEnv struct {
	t      *testing.T
	app    *testenv.App
	c      *testenv.Client
	user   db.User
	thread int64
}

func newCmdEnv(t *testing.T) *cmdEnv {
	t.Helper()
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("cmd@example.com", password)
	u, err := app.Store.UserByEmail(context.Background(), "cmd@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := app.Store.DefaultWorkspace(context.Background(), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(ws.ID)}, "content": {"hello"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("first message: %d", r.StatusCode)
	}
	page, _, err := app.Store.SidebarThreads(context.Background(), u.ID, ws.ID, nil, 1)
	if err != nil || len(page) != 1 {
		t.Fatal(page, err)
	}
	waitIdle(t, app.Store, u.ID, page[0].ID)
	return &cmdEnv{t: t, app: app, c: c, user: u, thread: page[0].ID}
}

func (e *cmdEnv) command(text string) testenv.Response {
	e.t.Helper()
	return e.c.HTMX(fmt.Sprintf("/t/%d/messages", e.thread), url.Values{"content": {text}})
}

func (e *cmdEnv) threadRow() db.Thread {
	e.t.Helper()
	th, err := e.app.Store.Thread(context.Background(), e.user.ID, e.thread)
	if err != nil {
		e.t.Fatal(err)
	}
	return th
}

func (e *cmdEnv) messageCount() int {
	e.t.Helper()
	var n int
	if err := e.app.Store.Pool.QueryRow(context.Background(), "SELECT count(*) FROM messages WHERE thread_id = $1", e.thread).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func TestUnknownSlashCommandsAreRefusedClearlyAndNothingIsSent(t *testing.T) {
	t.Parallel()
	e := newCmdEnv(t)
	before := e.messageCount()
	r := e.command("/frobnicate now")
	if r.StatusCode != http.StatusUnprocessableEntity || r.Header.Get("HX-Retarget") != "#composer-notice" {
		t.Fatalf("status %d, retarget %q; want 422 into the composer's notice", r.StatusCode, r.Header.Get("HX-Retarget"))
	}
	for _, want := range []string{"Unknown command /frobnicate", "/model", "/compact", "//"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("the refusal does not mention %q: %s", want, r.Body)
		}
	}
	if n := e.messageCount(); n != before {
		t.Errorf("a refused command stored %d messages", n-before)
	}
	// "//" sends the text with one slash.
	if r := e.command("//etc/hosts is a file"); r.StatusCode != http.StatusOK {
		t.Fatalf("escaped slash: %d %s", r.StatusCode, r.Body)
	}
	waitIdle(t, e.app.Store, e.user.ID, e.thread)
	var last string
	if err := e.app.Store.Pool.QueryRow(context.Background(),
		"SELECT content FROM messages WHERE thread_id = $1 AND role = 'user' ORDER BY id DESC LIMIT 1", e.thread).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if last != "/etc/hosts is a file" {
		t.Errorf("sent %q, want the text with one slash", last)
	}
}

func TestSlashCommandsChangeTheThread(t *testing.T) {
	t.Parallel()
	e := newCmdEnv(t)
	ctx := context.Background()

	if r := e.command("/title  Trip   to Lisbon "); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `id="thread-title"`) {
		t.Fatalf("/title: %d %s", r.StatusCode, r.Body)
	}
	if got := e.threadRow().Title; got != "Trip to Lisbon" {
		t.Errorf("title = %q", got)
	}
	if r := e.command("/title"); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("/title without text: %d", r.StatusCode)
	}

	if r := e.command("/model THINKER"); r.StatusCode != http.StatusNoContent || r.Header.Get("HX-Redirect") == "" {
		t.Fatalf("/model: %d %v", r.StatusCode, r.Header)
	}
	if got := e.threadRow().Model; got != "thinker:latest" {
		t.Errorf("model = %q, want thinker:latest", got)
	}
	if page := e.c.Get(fmt.Sprintf("/t/%d", e.thread)); !strings.Contains(page.Body, "now answers with thinker:latest") {
		t.Errorf("the reloaded page does not say what changed")
	}
	if r := e.command("/model gpt-5"); r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "tiny:latest") {
		t.Errorf("/model of a missing model: %d %s", r.StatusCode, r.Body)
	}

	role, err := e.app.Store.CreateRole(ctx, e.user.ID, db.RoleInput{Name: "Pirate", Prompt: "Arr."})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.command("/role pirate"); r.StatusCode != http.StatusNoContent {
		t.Fatalf("/role: %d %s", r.StatusCode, r.Body)
	}
	if got := e.threadRow().RoleID; got == nil || *got != role.ID {
		t.Errorf("role = %v, want %d", got, role.ID)
	}
	if r := e.command("/role Captain"); r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "Pirate") {
		t.Errorf("/role of a missing role: %d %s", r.StatusCode, r.Body)
	}
	if r := e.command("/role none"); r.StatusCode != http.StatusNoContent || e.threadRow().RoleID != nil {
		t.Errorf("/role none: %d, role %v", r.StatusCode, e.threadRow().RoleID)
	}

	if r := e.command("/usage"); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "1 answers") || !strings.Contains(r.Body, "context tokens") {
		t.Errorf("/usage: %d %s", r.StatusCode, r.Body)
	}
	if r := e.command("/stop"); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "Nothing is being written") {
		t.Errorf("/stop with nothing running: %d %s", r.StatusCode, r.Body)
	}

	before := e.messageCount()
	if r := e.command("/retry"); r.StatusCode != http.StatusNoContent {
		t.Fatalf("/retry: %d %s", r.StatusCode, r.Body)
	}
	waitIdle(t, e.app.Store, e.user.ID, e.thread)
	if n := e.messageCount(); n != before+1 {
		t.Errorf("/retry added %d messages, want one new answer", n-before)
	}

	if r := e.command("/compact"); r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "Nothing to summarize") {
		t.Errorf("/compact with one exchange: %d %s", r.StatusCode, r.Body)
	}
}

func TestSlashNewStartsAThreadWithTheSameSettings(t *testing.T) {
	t.Parallel()
	e := newCmdEnv(t)
	ctx := context.Background()
	role, err := e.app.Store.CreateRole(ctx, e.user.ID, db.RoleInput{Name: "Pirate", Prompt: "Arr."})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Store.UpdateThreadSettings(ctx, e.user.ID, e.thread, db.ThreadSettings{RoleID: &role.ID, Notes: "Metric units.", NumCtx: 2048, Compaction: false}); err != nil {
		t.Fatal(err)
	}
	if err := e.app.Store.SetThreadModel(ctx, e.user.ID, e.thread, "thinker:latest"); err != nil {
		t.Fatal(err)
	}
	before := e.messageCount()
	r := e.command("/new")
	to := r.Header.Get("HX-Redirect")
	if r.StatusCode != http.StatusNoContent || !strings.Contains(to, fmt.Sprintf("from=%d", e.thread)) {
		t.Fatalf("/new: %d → %q", r.StatusCode, to)
	}
	if e.messageCount() != before {
		t.Errorf("/new stored something before the first message")
	}
	home := e.c.Get(to)
	if !strings.Contains(home.Body, fmt.Sprintf(`name="from" value="%d"`, e.thread)) ||
		!strings.Contains(home.Body, `<option value="thinker:latest" selected>`) {
		t.Fatalf("the new-thread page does not carry the settings")
	}
	ws := e.threadRow().WorkspaceID
	if r := e.c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(ws)}, "from": {fmt.Sprint(e.thread)}, "model": {"thinker:latest"},
		"role": {fmt.Sprint(role.ID)}, "content": {"fresh"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("first message of the new thread: %d", r.StatusCode)
	}
	var fresh db.Thread
	page, _, err := e.app.Store.SidebarThreads(ctx, e.user.ID, ws, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if fresh, err = e.app.Store.Thread(ctx, e.user.ID, page[0].ID); err != nil {
		t.Fatal(err)
	}
	if fresh.ID == e.thread || fresh.Model != "thinker:latest" || fresh.RoleID == nil || *fresh.RoleID != role.ID ||
		fresh.Notes != "Metric units." || fresh.NumCtx != 2048 || fresh.Compaction {
		t.Errorf("new thread = %+v, want the settings of thread %d", fresh, e.thread)
	}
}

func TestInstanceSystemPromptInstructionsRoleAndNotesReachTheModel(t *testing.T) {
	t.Parallel()
	e := newCmdEnv(t)
	// The first account is the admin.
	if r := e.c.Post("/admin/system-prompt", url.Values{"system_prompt": {"You are Weft."}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("system prompt: %d", r.StatusCode)
	}
	if r := e.c.Post("/settings/instructions", url.Values{"instructions": {"I am a chemist."}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("instructions: %d", r.StatusCode)
	}
	if r := e.c.Post("/roles", url.Values{"name": {"Terse"}, "prompt": {"Answer in one line."}, "temperature": {"0.2"}, "stop": {"END\r\nSTOP"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("role: %d", r.StatusCode)
	}
	role, err := e.app.Store.RoleByName(context.Background(), e.user.ID, "terse")
	if err != nil {
		t.Fatal(err)
	}
	if r := e.c.Post(fmt.Sprintf("/t/%d/settings", e.thread), url.Values{"role": {fmt.Sprint(role.ID)}, "notes": {"Use SI units."}, "compaction": {"on"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("settings: %d", r.StatusCode)
	}
	if r := e.command("what is a mole?"); r.StatusCode != http.StatusOK {
		t.Fatalf("send: %d", r.StatusCode)
	}
	waitIdle(t, e.app.Store, e.user.ID, e.thread)
	req := trRequestFor(t, e.app.Fake, "what is a mole?")
	want := "You are Weft.\n\nI am a chemist.\n\nAnswer in one line.\n\nNotes from the user for this conversation:\nUse SI units."
	if req.Messages[0].Role != "system" || req.Messages[0].Content != want {
		t.Errorf("system message = %q, want %q", req.Messages[0].Content, want)
	}
	if req.Options["temperature"] != 0.2 || fmt.Sprint(req.Options["stop"]) != "[END STOP]" {
		t.Errorf("options = %v, want the role's", req.Options)
	}
}

func TestRoleFormsRefuseBadValuesAndKeepWhatWasTyped(t *testing.T) {
	t.Parallel()
	e := newCmdEnv(t)
	r := e.c.Post("/roles", url.Values{"name": {"Hot"}, "prompt": {"Be wild."}, "temperature": {"7"}, "top_k": {"many"}})
	if r.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad values: %d", r.StatusCode)
	}
	for _, want := range []string{"Temperature must be a number from 0 to 2", "Top K must be a whole number", `value="Hot"`, "Be wild.", `value="7"`} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("the refused form lacks %q", want)
		}
	}
	if r := e.c.Post("/roles", url.Values{"name": {"Hot"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d", r.StatusCode)
	}
	if r := e.c.Post("/roles", url.Values{"name": {"hot"}}); r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "already have a role") {
		t.Errorf("duplicate name: %d", r.StatusCode)
	}
	// Another user's role cannot be put on a thread.
	other := testenv.NewClient(t, e.app.TS.URL)
	other.Register("other@example.com", password)
	if r := other.Post("/roles", url.Values{"name": {"Theirs"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatal(r.StatusCode)
	}
	var theirs int64
	if err := e.app.Store.Pool.QueryRow(context.Background(), "SELECT id FROM roles WHERE name = 'Theirs'").Scan(&theirs); err != nil {
		t.Fatal(err)
	}
	if r := e.c.Post(fmt.Sprintf("/t/%d/settings", e.thread), url.Values{"role": {fmt.Sprint(theirs)}}); r.StatusCode != http.StatusNotFound {
		t.Errorf("a foreign role on my thread: %d, want 404", r.StatusCode)
	}
	if r := e.command("hi"); r.StatusCode != http.StatusOK {
		t.Fatal(r.StatusCode)
	}
	waitIdle(t, e.app.Store, e.user.ID, e.thread)
	if r := e.c.HTMX(fmt.Sprintf("/t/%d/messages", e.thread), url.Values{"content": {"hi"}, "role": {fmt.Sprint(theirs)}}); r.StatusCode == http.StatusOK {
		t.Errorf("a send with a foreign role was accepted")
	}
	if got := e.threadRow().RoleID; got != nil {
		t.Errorf("the thread took a foreign role: %v", *got)
	}
	// Deleting a role leaves its threads without one.
	mine, err := e.app.Store.RoleByName(context.Background(), e.user.ID, "Hot")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Store.SetThreadRole(context.Background(), e.user.ID, e.thread, &mine.ID); err != nil {
		t.Fatal(err)
	}
	if page := e.c.Get(fmt.Sprintf("/roles/%d", mine.ID)); !strings.Contains(page.Body, "1 thread uses it") {
		t.Errorf("the delete confirmation does not say which threads are affected")
	}
	if r := e.c.Post(fmt.Sprintf("/roles/%d/delete", mine.ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatal(r.StatusCode)
	}
	if got := e.threadRow().RoleID; got != nil {
		t.Errorf("the thread still points at a deleted role")
	}
}
