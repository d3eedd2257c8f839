package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
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

const memoryCanary = "CANARY-MEM-7f3a likes green tea"

// memoryHeader starts the memory overview in a system message.
const memoryHeader = "What you remember about the user"

// startChat sends a first message with the agent off (the chat route).
func (e *agentEnv) startChat(content string) int64 {
	e.t.Helper()
	r := e.c.Post("/t", url.Values{"workspace_id": {fmt.Sprint(e.ws.ID)}, "content": {content}})
	if r.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("send: %d %s", r.StatusCode, r.Body)
	}
	var thread int64
	fmt.Sscanf(r.Header.Get("Location"), "/t/%d", &thread)
	return thread
}

// otherUser is a second account on the same app.
func (e *agentEnv) otherUser(email string) *agentEnv {
	e.t.Helper()
	c := testenv.NewClient(e.t, e.app.TS.URL)
	c.Register(email, password)
	ctx := context.Background()
	u, err := e.app.Store.UserByEmail(ctx, email)
	if err != nil {
		e.t.Fatal(err)
	}
	ws, err := e.app.Store.DefaultWorkspace(ctx, u.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return &agentEnv{t: e.t, app: e.app, c: c, user: u, ws: ws, root: e.app.Agent.Root(ws)}
}

// systemOf is the system message of the streamed requests whose user
// messages include marker (a test's own words), one per request.
func (e *agentEnv) systemOf(marker string) []string {
	e.t.Helper()
	var out []string
	for _, r := range trStreamed(e.app.Fake) {
		mine, sys := false, ""
		for _, m := range r.Chat.Messages {
			if m.Role == "system" && sys == "" {
				sys = m.Content
			}
			if m.Role == "user" && strings.Contains(m.Content, marker) {
				mine = true
			}
		}
		if mine {
			out = append(out, sys)
		}
	}
	if len(out) == 0 {
		e.t.Fatalf("no request carried %q", marker)
	}
	return out
}

// A fact the agent remembers in one thread (the remember tool, auto by
// default) is in the system message of the user's requests in another
// thread, on the chat and the agent routes; it never reaches another
// user's requests (a canary), and the overview is never stored in a
// message, a run's checkpoint or its steps.
func TestAMemoryRememberedInOneThreadIsUsedInAnotherAndNeverByAnotherUser(t *testing.T) {
	t.Parallel()
	alice := newAgentEnv(t, testenv.Options{})
	bob := alice.otherUser("bob-memory@example.com")
	ctx := context.Background()

	first := alice.start(fmt.Sprintf(`Keep this. [[tool:remember {"fact":%q}]]`, memoryCanary))
	r, _ := alice.finished(first)
	if got := strings.Join(alice.calls(r.ID), " "); got != "remember:ok" {
		t.Fatalf("tool calls = %s: %s", got, alice.describe(r.ID))
	}
	mems, err := alice.app.Store.Memories(ctx, alice.user.ID)
	if err != nil || len(mems) != 1 || mems[0].Fact != memoryCanary || mems[0].Source != db.MemoryAgent ||
		mems[0].ThreadID == nil || *mems[0].ThreadID != first || mems[0].RunID == nil || *mems[0].RunID != r.ID {
		t.Fatalf("alice's memories = %+v, %v", mems, err)
	}

	// Another thread of Alice's, on the chat route, then on the agent route.
	second := alice.startChat("alice-second-thread question")
	alice.finished(second)
	third := alice.start("alice-agent-thread question")
	alice.finished(third)
	for _, marker := range []string{"alice-second-thread question", "alice-agent-thread question"} {
		for _, sys := range alice.systemOf(marker) {
			if !strings.Contains(sys, memoryHeader) || !strings.Contains(sys, fmt.Sprintf("[%d] %s", mems[0].ID, memoryCanary)) {
				t.Errorf("the system message of %q lacks the memory: %q", marker, sys)
			}
		}
	}

	// Bob, on both routes, never sees it.
	b1 := bob.startChat("bob-chat question")
	bob.finished(b1)
	b2 := bob.start("bob-agent question")
	bob.finished(b2)
	for _, marker := range []string{"bob-chat question", "bob-agent question"} {
		for _, sys := range bob.systemOf(marker) {
			if strings.Contains(sys, "CANARY") || strings.Contains(sys, memoryHeader) {
				t.Errorf("bob's request %q carries alice's memory: %q", marker, sys)
			}
		}
	}
	for _, r := range trStreamed(alice.app.Fake) {
		bobs, canary := false, false
		for _, m := range r.Chat.Messages {
			bobs = bobs || strings.Contains(m.Content, "bob-")
			canary = canary || strings.Contains(m.Content, "CANARY")
		}
		if bobs && canary {
			t.Errorf("a request of bob's carries the canary: %+v", r.Chat.Messages)
		}
	}

	// The overview is assembled per request, never stored.
	var stored int
	if err := alice.app.Store.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM messages WHERE strpos(content, $1) > 0) +
		(SELECT count(*) FROM runs WHERE strpos(coalesce(checkpoint::text, ''), $1) > 0) +
		(SELECT count(*) FROM run_steps WHERE strpos(data::text, $1) > 0)`, memoryHeader).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Errorf("the memory overview is stored in %d rows", stored)
	}
}

// /memory lists each memory (escaped) with where it came from, and edits,
// deletes and adds them; another user sees none of them; the agent's
// forget tool deletes by text and by id.
func TestTheMemoryPageAndTheForgetTool(t *testing.T) {
	t.Parallel()
	alice := newAgentEnv(t, testenv.Options{})
	bob := alice.otherUser("bob-memory-page@example.com")
	ctx := context.Background()
	memories := func() []db.Memory {
		t.Helper()
		m, err := alice.app.Store.Memories(ctx, alice.user.ID)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	thread := alice.start(`[[tool:remember {"fact":"<b>bold</b> CANARY-PAGE"}]]`)
	alice.finished(thread)
	mems := memories()
	if len(mems) != 1 {
		t.Fatalf("memories = %+v", mems)
	}
	m := mems[0]
	page := alice.c.Get("/memory")
	for _, want := range []string{fmt.Sprintf(`data-testid="memory-item" data-memory-id="%d"`, m.ID),
		"&lt;b&gt;bold&lt;/b&gt; CANARY-PAGE", fmt.Sprintf(`href="/t/%d"`, thread), "Remembered by the agent in"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("/memory lacks %s", want)
		}
	}
	if strings.Contains(page.Body, "<b>bold</b>") {
		t.Error("/memory renders a memory unescaped")
	}
	if b := bob.c.Get("/memory"); b.StatusCode != http.StatusOK || strings.Contains(b.Body, "CANARY") || strings.Contains(b.Body, `data-testid="memory-item"`) {
		t.Errorf("bob's /memory (%d) shows alice's memory", b.StatusCode)
	}

	if r := alice.c.Post("/memory", url.Values{"fact": {"  "}}); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("an empty memory: %d", r.StatusCode)
	}
	if r := alice.c.Post("/memory", url.Values{"fact": {"works nights"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("add: %d %s", r.StatusCode, r.Body)
	}
	if r := alice.c.Post(fmt.Sprintf("/memory/%d", m.ID), url.Values{"fact": {"likes plain text"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d %s", r.StatusCode, r.Body)
	}
	mems = memories()
	if len(mems) != 2 || mems[0].Fact != "likes plain text" || mems[1].Fact != "works nights" || mems[1].Source != db.MemoryManual {
		t.Fatalf("after add and edit: %+v", mems)
	}
	if page := alice.c.Get("/memory"); !strings.Contains(page.Body, "Added by you") {
		t.Error("/memory does not say a memory was added by hand")
	}

	// The agent forgets by text, then by id.
	alice.send(thread, `[[tool:forget {"fact":"LIKES PLAIN TEXT"}]]`)
	r, _ := alice.finished(thread)
	if got := strings.Join(alice.calls(r.ID), " "); got != "forget:ok" {
		t.Fatalf("forget by text: %s: %s", got, alice.describe(r.ID))
	}
	manual := mems[1].ID
	alice.send(thread, fmt.Sprintf(`[[tool:forget {"id":%d}]]`, manual))
	r, _ = alice.finished(thread)
	if got := strings.Join(alice.calls(r.ID), " "); got != "forget:ok" {
		t.Fatalf("forget by id: %s: %s", got, alice.describe(r.ID))
	}
	if mems := memories(); len(mems) != 0 {
		t.Fatalf("after forgetting: %+v", mems)
	}
	// Bob's agent cannot forget Alice's memory by its id.
	kept, err := alice.app.Store.AddMemory(ctx, alice.user.ID, db.MemoryInput{Fact: "kept", Source: db.MemoryManual})
	if err != nil {
		t.Fatal(err)
	}
	bt := bob.start(fmt.Sprintf(`[[tool:forget {"id":%d}]]`, kept.ID))
	br, _ := bob.finished(bt)
	if got := strings.Join(bob.calls(br.ID), " "); got != "forget:error" {
		t.Errorf("bob forgetting alice's memory: %s", got)
	}
	if r := alice.c.Post(fmt.Sprintf("/memory/%d/delete", kept.ID), nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	if mems := memories(); len(mems) != 0 {
		t.Fatalf("after delete: %+v", mems)
	}
}

// A temporary thread neither reads memories (its requests carry no
// overview) nor writes them (remember is refused to the model); its
// switch is in the thread's settings.
func TestATemporaryThreadNeitherReadsNorWritesMemories(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t, testenv.Options{})
	ctx := context.Background()
	if _, err := e.app.Store.AddMemory(ctx, e.user.ID, db.MemoryInput{Fact: "CANARY-TEMP owns a cat", Source: db.MemoryManual}); err != nil {
		t.Fatal(err)
	}
	thread := e.startChat("first-temp-test message")
	e.finished(thread)
	if page := e.c.Get(fmt.Sprintf("/t/%d", thread)); !strings.Contains(page.Body, fmt.Sprintf(`hx-get="/t/%d/temporary"`, thread)) {
		t.Fatal("the thread's settings lack the temporary switch")
	}
	if sw := e.c.Get(fmt.Sprintf("/t/%d/temporary", thread)); !strings.Contains(sw.Body, `data-temporary="false"`) {
		t.Fatalf("the switch = %s", sw.Body)
	}
	if r := e.c.Post(fmt.Sprintf("/t/%d/temporary", thread), url.Values{"temporary": {"true"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("switch: %d %s", r.StatusCode, r.Body)
	}
	if sw := e.c.Get(fmt.Sprintf("/t/%d/temporary", thread)); !strings.Contains(sw.Body, `data-temporary="true"`) {
		t.Fatalf("the switch after = %s", sw.Body)
	}
	r := e.c.Post(fmt.Sprintf("/t/%d/messages", thread), url.Values{"agent_present": {"1"}, "agent": {"on"},
		"content": {`temp-marker [[tool:remember {"fact":"CANARY-TEMP2 secret"}]]`}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d %s", r.StatusCode, r.Body)
	}
	run, _ := e.finished(thread)
	if got := strings.Join(e.calls(run.ID), " "); got != "remember:error" {
		t.Errorf("remember in a temporary thread: %s: %s", got, e.describe(run.ID))
	}
	for _, sys := range e.systemOf("temp-marker") {
		if strings.Contains(sys, memoryHeader) || strings.Contains(sys, "CANARY-TEMP owns") {
			t.Errorf("a temporary thread's request carries memories: %q", sys)
		}
	}
	// Its first request, before it was temporary, had them.
	if sys := e.systemOf("first-temp-test message")[0]; !strings.Contains(sys, "CANARY-TEMP owns a cat") {
		t.Errorf("before it was temporary, the thread's request lacks the memory: %q", sys)
	}
	mems, err := e.app.Store.Memories(ctx, e.user.ID)
	if err != nil || len(mems) != 1 {
		t.Fatalf("memories = %+v, %v", mems, err)
	}
}

// Silent extraction is off by default; switched on (/memory), a job after
// each answer asks the model for lasting facts of the turn and keeps them
// as "extracted" memories of that thread; a temporary thread's turns are
// never sent for extraction.
func TestSilentExtractionAfterATurnIsOffByDefault(t *testing.T) {
	t.Parallel()
	fake := fakeollama.New(t, fakeollama.WithScript(func(req *api.ChatRequest) fakeollama.Reply {
		if len(req.Messages) > 0 && req.Messages[0].Content == chat.MemoryExtractPrompt {
			return fakeollama.Reply{Chunks: []string{"- CANARY-EX drinks oolong\n-   \nNONE"}}
		}
		return fakeollama.DefaultReply(req)
	}))
	e := newAgentEnv(t, testenv.Options{Fake: fake})
	ctx := context.Background()
	extractions := func() []string {
		var out []string
		for _, r := range fake.Requests() {
			if r.Chat != nil && len(r.Chat.Messages) > 1 && r.Chat.Messages[0].Content == chat.MemoryExtractPrompt {
				out = append(out, r.Chat.Messages[1].Content)
			}
		}
		return out
	}
	jobDone := func(msg int64) {
		t.Helper()
		if !testwait.Until(20*time.Second, func() bool {
			var n int
			err := e.app.Store.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'memory_extract'
				AND state = 'completed' AND (args->>'message')::bigint = $1`, msg).Scan(&n)
			return err == nil && n == 1
		}) {
			t.Fatalf("the extraction of answer %d never completed", msg)
		}
	}
	// Another user, who never switches it on: their turn is never sent (a
	// user switching it on right after an answer may have that answer
	// extracted, so the default is checked on someone else).
	other := e.otherUser("extract-off@example.com")
	if p := other.c.Get("/memory"); !strings.Contains(p.Body, `data-extract="false"`) {
		t.Fatal("extraction is not off by default")
	}
	off := other.startChat("off-turn: I drink oolong")
	other.finished(off)

	if r := e.c.Post("/memory/extract", url.Values{"extract": {"true"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("switch: %d", r.StatusCode)
	}
	on := e.startChat("on-turn: I drink oolong")
	_, answer := e.finished(on)
	jobDone(answer.ID)
	mems, err := e.app.Store.Memories(ctx, e.user.ID)
	if err != nil || len(mems) != 1 || mems[0].Fact != "CANARY-EX drinks oolong" || mems[0].Source != db.MemoryExtracted ||
		mems[0].ThreadID == nil || *mems[0].ThreadID != on {
		t.Fatalf("memories = %+v, %v", mems, err)
	}
	if p := e.c.Get("/memory"); !strings.Contains(p.Body, "Extracted after a turn") || !strings.Contains(p.Body, `data-extract="true"`) {
		t.Error("/memory does not show the extracted memory's source or the switch on")
	}

	// A temporary thread's turn is not sent.
	if err := e.app.Store.SetThreadTemporary(ctx, e.user.ID, on, true); err != nil {
		t.Fatal(err)
	}
	e.send(on, "temp-turn: I drink oolong")
	_, answer = e.finished(on)
	jobDone(answer.ID)
	got := extractions()
	if len(got) != 1 || !strings.Contains(got[0], "on-turn: I drink oolong") {
		t.Errorf("extraction requests = %q, want the on-turn's only", got)
	}
	if mems, err := other.app.Store.Memories(ctx, other.user.ID); err != nil || len(mems) != 0 {
		t.Errorf("the other user's memories = %+v, %v", mems, err)
	}
}
