package handlers_test

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"weft/agent"
	"weft/chat"
	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// roomFixture is a room of "owner@example.com" (its first account) with a
// member "member@example.com", each signed in with a client of their own.
type roomFixture struct {
	t               *testing.T
	store           *db.DB
	room            db.Room // as the owner sees it
	owner, member   db.User
	ownerC, memberC *testenv.Client
}

func newRoomFixture(t *testing.T, store *db.DB, base string) *roomFixture {
	t.Helper()
	ctx := context.Background()
	f := &roomFixture{t: t, store: store}
	f.ownerC = testenv.NewClient(t, base)
	f.ownerC.Register("owner@example.com", password)
	f.memberC = testenv.NewClient(t, base)
	f.memberC.Register("member@example.com", password)
	var err error
	if f.owner, err = store.UserByEmail(ctx, "owner@example.com"); err != nil {
		t.Fatal(err)
	}
	if f.member, err = store.UserByEmail(ctx, "member@example.com"); err != nil {
		t.Fatal(err)
	}
	ws, err := store.DefaultWorkspace(ctx, f.owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.room, err = store.CreateRoom(ctx, f.owner.ID, ws.ID, "Planning"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.InviteRoomMember(ctx, f.owner.ID, f.room.ID, "member@example.com"); err != nil {
		t.Fatal(err)
	}
	return f
}

// agent adds an agent answering with the fake's model "tiny".
func (f *roomFixture) agent(name string) db.RoomAgent {
	f.t.Helper()
	a, err := f.store.AddRoomAgent(context.Background(), f.owner.ID, f.room.ID, db.RoomAgentInput{Name: name, Model: "tiny"})
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

// say posts content to the room as u, through rt.
func (f *roomFixture) say(rt *chat.Runtime, u db.User, content string) chat.RoomSent {
	f.t.Helper()
	room, err := f.store.RoomForMember(context.Background(), u.ID, f.room.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	sent, err := rt.RoomSend(context.Background(), u.ID, room, content)
	if err != nil {
		f.t.Fatalf("say %q: %v", content, err)
	}
	return sent
}

func (f *roomFixture) eventsPath(after int64) string {
	return fmt.Sprintf("/rooms/%d/events?after=%d", f.room.ID, after)
}

// roomEvent is one event of a room's stream, with its id ("" : none).
type roomEvent struct{ id, name, data string }

// roomView applies a room stream's events as the room's page does: the
// messages appended (by id, in order), each answer's text (snapshots
// replace, deltas append), each answer's final form, the queue, and the
// end of access.
type roomView struct {
	mu       sync.Mutex
	order    []string          // message ids appended, in order (a repeat replaces in place)
	appended map[string]string // message id → its last appended markup
	text     map[string]string // message id → its streamed text
	final    map[string]string // message id → its final markup
	queue    string
	gone     string
	lastID   string
	names    []string // every event's name, in order
	ended    bool
}

var (
	appendedID = regexp.MustCompile(`^<li id="m(\d+)"`)
	eventOfMsg = regexp.MustCompile(`^(.+)-(\d+)$`)
	// appendedStreaming: an appended message is a placeholder of an answer
	// being written (its own status, not a step's inside it).
	appendedStreaming = regexp.MustCompile(`^<li id="m\d+"[^>]* data-status="streaming"`)
)

// watchRoom reads the stream at path (with headers) in the background
// until it ends or the test does.
func watchRoom(t *testing.T, c *testenv.Client, path string, header http.Header) *roomView {
	t.Helper()
	v := &roomView{appended: map[string]string{}, text: map[string]string{}, final: map[string]string{}}
	readStream(t, c, path, header, v.apply, func() { v.mu.Lock(); v.ended = true; v.mu.Unlock() })
	return v
}

// readStream opens the event stream at path (with headers) and, in the
// background until it ends or the test does, parses it as a browser does,
// calling apply with every event and ended at its end.
func readStream(t *testing.T, c *testenv.Client, path string, header http.Header, apply func(roomEvent), ended func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	go func() {
		defer resp.Body.Close()
		defer ended()
		var ev roomEvent
		var data []string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ev.data = strings.Join(data, "\n")
					apply(ev)
				}
				ev, data = roomEvent{}, nil
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			}
		}
	}()
}

func (v *roomView) apply(ev roomEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.names = append(v.names, ev.name)
	if ev.id != "" {
		v.lastID = ev.id
	}
	switch ev.name {
	case "room-append":
		m := appendedID.FindStringSubmatch(ev.data)
		if m == nil {
			panic("an appended message without its id: " + ev.data)
		}
		if _, ok := v.appended[m[1]]; !ok {
			v.order = append(v.order, m[1])
		}
		v.appended[m[1]] = ev.data
		return
	case "room-queue":
		v.queue = ev.data
		return
	case "room-gone":
		v.gone = ev.data
		return
	}
	m := eventOfMsg.FindStringSubmatch(ev.name)
	if m == nil {
		return
	}
	switch m[1] {
	case "snapshot":
		v.text[m[2]] = html.UnescapeString(ev.data)
	case "delta":
		v.text[m[2]] += html.UnescapeString(ev.data)
	case "done":
		v.final[m[2]] = ev.data
	}
}

// state reads the view under its lock.
func (v *roomView) state(fn func(v *roomView) bool) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return fn(v)
}

// waitFinal waits for the final form of the answer msg as the page gets
// it: its done event when the stream followed it being written, or, when
// the answer had already ended by the stream's first read of the line
// (the model answers while the stream opens), the answer appended in its
// final form, which no done event follows.
func (v *roomView) waitFinal(t *testing.T, msg int64) string {
	t.Helper()
	id := strconv.FormatInt(msg, 10)
	var final string
	testwait.For(t, "the final form of message "+id, 0, func() bool {
		return v.state(func(v *roomView) bool {
			final = v.final[id]
			if a := v.appended[id]; final == "" && a != "" && !appendedStreaming.MatchString(a) {
				final = a
			}
			return final != ""
		})
	})
	return final
}

func TestAMembersRoomStreamAppendsAnotherMembersMessageAndStreamsTheAnswerUnderItsOwnEvents(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	f := newRoomFixture(t, store, app.TS.URL)
	f.agent("Xavier")

	v := watchRoom(t, f.memberC, f.eventsPath(0), nil)
	sent := f.say(app.RT, f.owner, "@Xavier count for me [[tokens:40]][[slow:5ms]]")
	answer := sent.Answers[0].ID
	final := v.waitFinal(t, answer)

	want := answerTokens(1, 40)
	v.state(func(v *roomView) bool {
		u, a := strconv.FormatInt(sent.User.ID, 10), strconv.FormatInt(answer, 10)
		if len(v.order) != 2 || v.order[0] != u || v.order[1] != a {
			t.Errorf("appended %v, want the message %s then the answer %s", v.order, u, a)
		}
		if !strings.Contains(v.appended[u], `data-speaker="`) || !strings.Contains(v.appended[u], "count for me") {
			t.Errorf("the member's message was appended as %.400s", v.appended[u])
		}
		if !strings.Contains(v.appended[a], `data-status="streaming"`) || strings.Contains(v.appended[a], "sse-connect") {
			t.Errorf("the answer was not appended as a placeholder listening on the room's stream: %.600s", v.appended[a])
		}
		if v.text[a] != want {
			t.Errorf("the streamed text of %s is %q, want %q", a, v.text[a], want)
		}
		for _, n := range v.names {
			if n == "delta" || n == "snapshot" || n == "done" {
				t.Errorf("an answer's event %q is not named after its message", n)
			}
		}
		return true
	})
	if !strings.Contains(final, `data-status="complete"`) || !strings.Contains(final, `data-speaker="Xavier"`) ||
		!strings.Contains(final, "tok40") {
		t.Fatalf("the final form is %.800s", final)
	}
}

func TestARemovedMembersOpenRoomStreamEndsAtOnceSayingSo(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	f := newRoomFixture(t, store, app.TS.URL)
	f.agent("Xavier")
	v := watchRoom(t, f.memberC, f.eventsPath(0), nil)
	sent := f.say(app.RT, f.owner, "@Xavier go on for a while [[tokens:400]][[slow:20ms]]")
	id := strconv.FormatInt(sent.Answers[0].ID, 10)
	testwait.For(t, "the answer streaming to the member", 0, func() bool {
		return v.state(func(v *roomView) bool { return len(v.text[id]) > 0 })
	})

	start := time.Now()
	if err := store.RemoveRoomMember(context.Background(), f.owner.ID, f.room.ID, f.member.ID); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the member's stream to end", 0, func() bool {
		return v.state(func(v *roomView) bool { return v.ended })
	})
	t.Logf("removal → stream ended in %v", time.Since(start))
	v.state(func(v *roomView) bool {
		if !strings.Contains(v.gone, "You are no longer a member of this room") {
			t.Errorf("the stream ended without saying why: %q", v.gone)
		}
		if last := v.names[len(v.names)-1]; last != "room-gone" {
			t.Errorf("the last event is %q: something of the room was sent after the end of access", last)
		}
		return true
	})
	if r := f.memberC.Get(f.eventsPath(0)); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a former member's stream = %d, want 404", r.StatusCode)
	}
}

func TestARoomStreamIsOnlyForTheRoomsMembers(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	f := newRoomFixture(t, store, app.TS.URL)
	stranger := testenv.NewClient(t, app.TS.URL)
	stranger.Register("stranger@example.com", password)
	if r := stranger.Get(f.eventsPath(0)); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a non-member's room stream = %d, want 404", r.StatusCode)
	}
	if r := f.memberC.Get(fmt.Sprintf("/rooms/%d/events", f.room.ID+1000)); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a stream of no room = %d, want 404", r.StatusCode)
	}
}

func TestARoomStreamResumesAfterTheLastEventIDItSentWithoutRepeatingMessages(t *testing.T) {
	t.Parallel()
	roomStreamResumes(t, false)
}

// The first answer may end before the stream first reads the line (the
// model answers while the stream opens): it is appended in its final
// form, with its id as the resume point, and no done event follows.
func TestARoomStreamResumesPastAnAnswerThatHadEndedBeforeTheStreamOpened(t *testing.T) {
	t.Parallel()
	roomStreamResumes(t, true)
}

// roomStreamResumes: a member's stream shows an answer's final form and
// resumes, from the last id it sent, with only what came after it
// (endedFirst: the answer ended before the stream opened).
func roomStreamResumes(t *testing.T, endedFirst bool) {
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	f := newRoomFixture(t, store, app.TS.URL)
	f.agent("Xavier")
	first := f.say(app.RT, f.owner, "@Xavier one [[tokens:3]]")
	if endedFirst {
		testwait.For(t, "the first answer to complete", 0, func() bool {
			m, err := store.Message(context.Background(), f.owner.ID, first.Answers[0].ID)
			return err == nil && m.Status == db.MsgComplete
		})
	}
	v := watchRoom(t, f.memberC, f.eventsPath(0), nil)
	if final := v.waitFinal(t, first.Answers[0].ID); !strings.Contains(final, "tok3") {
		t.Fatalf("the first answer's final form is %.600s", final)
	}
	var last string
	testwait.For(t, "the resume point past the first answer", 0, func() bool {
		return v.state(func(v *roomView) bool { last = v.lastID; return last == strconv.FormatInt(first.Answers[0].ID, 10) })
	})

	// The browser reconnects by itself with the last id it got.
	second := f.say(app.RT, f.owner, "just a remark")
	again := watchRoom(t, f.memberC, f.eventsPath(0), http.Header{"Last-Event-Id": {last}})
	want := strconv.FormatInt(second.User.ID, 10)
	testwait.For(t, "the new message on the resumed stream", 0, func() bool {
		return again.state(func(v *roomView) bool { return len(v.order) > 0 })
	})
	again.state(func(v *roomView) bool {
		if len(v.order) != 1 || v.order[0] != want {
			t.Errorf("the resumed stream appended %v, want only %s", v.order, want)
		}
		return true
	})
}

func TestAPageShowingAnAnswerBeingWrittenGetsItAgainAndItsFinalFormWhenItsStreamOpensLate(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	f := newRoomFixture(t, store, app.TS.URL)
	f.agent("Xavier")
	// The page showed the answer being written; by the time its stream
	// opens, the answer is complete. The page resumes before that answer.
	sent := f.say(app.RT, f.owner, "@Xavier quick [[tokens:3]]")
	answer := sent.Answers[0].ID
	testwait.For(t, "the answer to complete", 0, func() bool {
		m, err := store.Message(context.Background(), f.owner.ID, answer)
		return err == nil && m.Status == db.MsgComplete
	})
	v := watchRoom(t, f.memberC, f.eventsPath(answer-1), nil)
	id := strconv.FormatInt(answer, 10)
	testwait.For(t, "the answer again", 0, func() bool {
		return v.state(func(v *roomView) bool { return v.appended[id] != "" })
	})
	if !v.state(func(v *roomView) bool { return strings.Contains(v.appended[id], `data-status="complete"`) }) {
		t.Fatal("the answer sent again is not its final form")
	}
}

func TestARoomStreamOnOneInstanceShowsWhatHappensOnAnother(t *testing.T) {
	t.Parallel()
	store, _, apps := twoInstances(t)
	f := newRoomFixture(t, store, apps["B"].TS.URL)
	f.agent("Xavier")
	// The member watches on B; the owner's message and its answer run on A.
	v := watchRoom(t, f.memberC, f.eventsPath(0), nil)
	sent := f.say(apps["A"].RT, f.owner, "@Xavier count [[tokens:60]][[slow:10ms]]")
	answer := sent.Answers[0].ID
	final := v.waitFinal(t, answer)
	id := strconv.FormatInt(answer, 10)
	v.state(func(v *roomView) bool {
		if len(v.order) != 2 {
			t.Errorf("appended %v, want the message and its answer", v.order)
		}
		if got, want := v.text[id], answerTokens(1, 60); !strings.HasPrefix(want, got) || got == "" {
			t.Errorf("the text streamed on B is %q, not the start of the answer", got)
		}
		return true
	})
	if !strings.Contains(final, "tok60") {
		t.Fatalf("the final form on B is %.600s", final)
	}

	// A removal, written by any instance, ends the member's stream on B.
	if err := store.RemoveRoomMember(context.Background(), f.owner.ID, f.room.ID, f.member.ID); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the member's stream on B to end", 0, func() bool {
		return v.state(func(v *roomView) bool { return v.ended && v.gone != "" })
	})
}

func TestARoomStreamShowsTheQueueOfAnswersAsItChanges(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	f := newRoomFixture(t, store, app.TS.URL)
	f.agent("Xavier")
	f.agent("Yuki")
	v := watchRoom(t, f.memberC, f.eventsPath(0), nil)
	sent := f.say(app.RT, f.owner, "@Xavier then @Yuki [[tokens:30]][[slow:20ms]]")
	testwait.For(t, "both answers in the queue, the first answering", 0, func() bool {
		return v.state(func(v *roomView) bool {
			return strings.Count(v.queue, `data-testid="room-turn"`) == 2 &&
				strings.Contains(v.queue, fmt.Sprintf(`data-run-id="%d" data-message-id="%d" data-status="running" data-agent="Xavier"`, sent.Runs[0].ID, sent.Answers[0].ID)) &&
				strings.Contains(v.queue, fmt.Sprintf(`data-run-id="%d" data-message-id="%d" data-status="queued" data-agent="Yuki"`, sent.Runs[1].ID, sent.Answers[1].ID))
		})
	})
	v.waitFinal(t, sent.Answers[1].ID)
	testwait.For(t, "the queue to empty", 0, func() bool {
		return v.state(func(v *roomView) bool { return !strings.Contains(v.queue, "room-turn") })
	})
}

func TestARoomStreamNoticesALostMembershipWithoutANote(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	f := newRoomFixture(t, store, app.TS.URL)
	v := watchRoom(t, f.memberC, f.eventsPath(0), nil)
	testwait.For(t, "the stream to start", 0, func() bool {
		return app.Handler.OpenStreams() == 1
	})
	// Written behind the application's back: no note is sent, and the
	// stream's regular check finds the membership gone.
	if _, err := store.Pool.Exec(context.Background(), "DELETE FROM room_members WHERE room_id = $1 AND user_id = $2",
		f.room.ID, f.member.ID); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the stream to end", 0, func() bool {
		return v.state(func(v *roomView) bool { return v.ended && v.gone != "" })
	})
}

func TestOnlyTheAskerOrTheOwnerStopsARoomsAnswerAndOnlyTheAskerDecidesItsApprovals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{})
	f := newRoomFixture(t, store, app.TS.URL)
	f.agent("Xavier")
	other := testenv.NewClient(t, app.TS.URL)
	other.Register("other@example.com", password)
	if _, err := store.InviteRoomMember(ctx, f.owner.ID, f.room.ID, "other@example.com"); err != nil {
		t.Fatal(err)
	}
	sent := f.say(app.RT, f.member, "@Xavier a long one [[tokens:2000]][[slow:20ms]]")
	run := sent.Runs[0].ID
	stop := fmt.Sprintf("/rooms/%d/runs/%d/stop", f.room.ID, run)

	r := other.HTMX(stop, nil)
	if r.StatusCode != http.StatusUnprocessableEntity || r.Header.Get("HX-Retarget") != "#room-notice" ||
		!strings.Contains(r.Body, "or the room") {
		t.Fatalf("another member's Stop = %d %q: %.300s; want the refusal in the room's notice", r.StatusCode, r.Header.Get("HX-Retarget"), r.Body)
	}
	if r := other.Post(stop, nil); r.StatusCode != http.StatusForbidden {
		t.Fatalf("another member's plain Stop = %d, want 403", r.StatusCode)
	}
	approval, err := store.AddStep(ctx, run, db.StepApproval, db.StepPending, db.StepData{Tool: "write_file"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	decide := fmt.Sprintf("/rooms/%d/runs/%d/steps/%d/decide", f.room.ID, run, approval.ID)
	if r := f.ownerC.Post(decide, url.Values{"decision": {"once"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("the owner's decision on the member's approval = %d, want 403 (only the asker decides)", r.StatusCode)
	}
	if r := f.memberC.Post(decide, url.Values{"decision": {"always"}}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("an 'always' in a room = %d, want 400", r.StatusCode)
	}
	wrongRun := fmt.Sprintf("/rooms/%d/runs/%d/steps/%d/decide", f.room.ID, run+1000, approval.ID)
	if r := f.memberC.Post(wrongRun, url.Values{"decision": {"once"}}); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a step named with another run = %d, want 404", r.StatusCode)
	}
	if r := f.memberC.HTMX(stop, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("the asker's Stop = %d: %.300s", r.StatusCode, r.Body)
	}
	testwait.For(t, "the answer to be stopped", 0, func() bool {
		m, err := store.Message(ctx, f.owner.ID, sent.Answers[0].ID)
		return err == nil && m.Status == db.MsgCancelled
	})
}

func TestASubAgentsApprovalInARoomIsDecidedByTheAskerFromTheRoomsPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	app := testenv.Start(t, store, testenv.Options{DefaultModel: "toolie"})
	f := newRoomFixture(t, store, app.TS.URL)
	if _, err := store.AddRoomAgent(ctx, f.owner.ID, f.room.ID, db.RoomAgentInput{Name: "Lead", Model: "toolie", Tools: true}); err != nil {
		t.Fatal(err)
	}
	sent := f.say(app.RT, f.member, "@Lead "+delegation(agent.ToolDelegateTask,
		map[string]any{"task": `Write it. [[tool:write_file {"path":"r.txt","content":"R"}]]`, "tools": []string{"write_file"}}))
	// The sub-agent's write asks (write_file asks by default): the
	// approval is the child run's step.
	var ap db.Step
	testwait.For(t, "the sub-agent's approval", 20*time.Second, func() bool {
		steps, err := store.Steps(ctx, f.owner.ID, sent.Runs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			for _, c := range s.Subagents {
				for _, cs := range c.Steps {
					if cs.Kind == db.StepApproval && cs.Status == db.StepPending {
						ap = cs
						return true
					}
				}
			}
		}
		return false
	})
	// The asker decides it with the form the room's page shows.
	page := f.memberC.Get(fmt.Sprintf("/rooms/%d", f.room.ID))
	form := regexp.MustCompile(`data-step-id="` + strconv.FormatInt(ap.ID, 10) + `" method="post" action="([^"]+)"`).FindStringSubmatch(page.Body)
	if form == nil {
		t.Fatalf("the room's page shows no form for the sub-agent's approval %d:\n%.4000s", ap.ID, page.Body)
	}
	if r := f.memberC.Post(html.UnescapeString(form[1]), url.Values{"decision": {"once"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("the asker's decision at %s = %d: %.300s", form[1], r.StatusCode, r.Body)
	}
	testwait.For(t, "the answer to end", 20*time.Second, func() bool {
		m, err := store.Message(ctx, f.owner.ID, sent.Answers[0].ID)
		return err == nil && m.Status != db.MsgStreaming
	})
	st, _, err := store.StepOf(ctx, f.owner.ID, ap.ID)
	if err != nil || st.Status == db.StepPending {
		t.Fatalf("the sub-agent's approval after the asker's decision: %s (%v)", st.Status, err)
	}
}
