package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

// roomSetup is an app with three signed-in people: Olive (the first
// account) who makes rooms, Mel whom she invites, and Stan, in no room.
type roomSetup struct {
	store            *db.DB
	app              *testenv.App
	owner, mel, stan *testenv.Client
}

func newRoomSetup(t *testing.T) roomSetup {
	t.Helper()
	s := roomSetup{store: testenv.NewDB(t)}
	s.app = testenv.Start(t, s.store, testenv.Options{})
	for _, p := range []struct {
		c     **testenv.Client
		email string
	}{{&s.owner, "olive@example.com"}, {&s.mel, "mel@example.com"}, {&s.stan, "stan@example.com"}} {
		*p.c = testenv.NewClient(t, s.app.TS.URL)
		(*p.c).Register(p.email, password)
	}
	return s
}

// createRoom makes a room through /rooms and returns its id.
func createRoom(t *testing.T, c *testenv.Client, name string) int64 {
	t.Helper()
	r := c.Post("/rooms", url.Values{"name": {name}})
	loc := r.Header.Get("Location")
	id, err := strconv.ParseInt(strings.TrimPrefix(loc, "/rooms/"), 10, 64)
	if r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/rooms/") || err != nil {
		t.Fatalf("create room %q = %d %q: %.300s", name, r.StatusCode, loc, r.Body)
	}
	return id
}

// post expects a redirect to want from a form post.
func postTo(t *testing.T, c *testenv.Client, path string, form url.Values, want string) {
	t.Helper()
	r := c.Post(path, form)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != want {
		t.Fatalf("POST %s %v = %d %q, want a redirect to %s: %.400s", path, form, r.StatusCode, r.Header.Get("Location"), want, r.Body)
	}
}

// refused expects a form post to come back with status and the message.
func refused(t *testing.T, c *testenv.Client, path string, form url.Values, status int, msg string) {
	t.Helper()
	r := c.Post(path, form)
	if r.StatusCode != status || !strings.Contains(r.Body, msg) {
		t.Fatalf("POST %s %v = %d, want %d with %q: %.600s", path, form, r.StatusCode, status, msg, r.Body)
	}
}

func TestCreatingARoomLandsOnItsPageAndTheSidebarListsItButNotItsThread(t *testing.T) {
	t.Parallel()
	s := newRoomSetup(t)
	refused(t, s.owner, "/rooms", url.Values{"name": {"  "}}, http.StatusUnprocessableEntity, "A room needs a name")
	id := createRoom(t, s.owner, "Launch plan")
	page := s.owner.Get(fmt.Sprintf("/rooms/%d", id))
	if page.StatusCode != http.StatusOK {
		t.Fatalf("room page = %d", page.StatusCode)
	}
	for _, want := range []string{
		fmt.Sprintf(`data-testid="room" data-room-id="%d"`, id), // the sidebar
		`data-testid="composer"`, `data-testid="send"`, `name="content"`,
		`data-testid="room-invite"`, `data-testid="room-agent-add"`, `data-testid="room-settings-form"`,
		fmt.Sprintf(`sse-connect="/rooms/%d/events?after=0"`, id), // the room's one stream
	} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the room page lacks %s", want)
		}
	}
	if strings.Contains(page.Body, `data-testid="thread-link"`) {
		t.Errorf("the room's thread is listed as a thread:\n%s", page.Body)
	}
	list := s.owner.Get("/rooms")
	if list.StatusCode != http.StatusOK || !strings.Contains(list.Body, "Launch plan") || !strings.Contains(list.Body, `data-testid="room-create"`) {
		t.Fatalf("/rooms = %d: %.600s", list.StatusCode, list.Body)
	}
	// Another user's workspace is not a place for one's room.
	ws, err := s.store.DefaultWorkspace(context.Background(), userID(t, s.store, "mel@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if r := s.owner.Post("/rooms", url.Values{"name": {"Intrusion"}, "workspace_id": {fmt.Sprint(ws.ID)}}); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a room in another user's workspace = %d, want 404", r.StatusCode)
	}
}

func userID(t *testing.T, store *db.DB, email string) int64 {
	t.Helper()
	u, err := store.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

func TestARoomsThreadIsReachedOnlyThroughTheRoom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newRoomSetup(t)
	id := createRoom(t, s.owner, "Hidden")
	postTo(t, s.owner, fmt.Sprintf("/rooms/%d/agents", id), url.Values{"name": {"Scout"}, "model": {"tiny:latest"}}, fmt.Sprintf("/rooms/%d", id))
	postTo(t, s.owner, fmt.Sprintf("/rooms/%d/messages", id), url.Values{"content": {"@Scout look around"}}, fmt.Sprintf("/rooms/%d", id))
	room, err := s.store.RoomForMember(ctx, userID(t, s.store, "olive@example.com"), id)
	if err != nil {
		t.Fatal(err)
	}
	run := waitIdle(t, s.store, room.OwnerID, room.ThreadID)
	T, M, U, R := room.ThreadID, *run.AssistantMessageID, *run.UserMessageID, run.ID
	// Its owner opening it as a thread lands in the room.
	if r := s.owner.Get(fmt.Sprintf("/t/%d", T)); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != fmt.Sprintf("/rooms/%d", id) {
		t.Fatalf("GET /t/%d = %d %q, want a redirect to the room", T, r.StatusCode, r.Header.Get("Location"))
	}
	// Every other thread route is a 404, even for its owner.
	for _, c := range []struct{ method, path string }{
		{"GET", fmt.Sprintf("/t/%d/history?before=%d", T, M)},
		{"GET", fmt.Sprintf("/t/%d/export.json", T)},
		{"GET", fmt.Sprintf("/t/%d/context", T)},
		{"POST", fmt.Sprintf("/t/%d/messages", T)},
		{"POST", fmt.Sprintf("/t/%d/rename", T)},
		{"POST", fmt.Sprintf("/t/%d/shares", T)},
		{"POST", fmt.Sprintf("/t/%d/delete", T)},
		{"POST", fmt.Sprintf("/m/%d/retry", M)},
		{"POST", fmt.Sprintf("/m/%d/edit", U)},
		{"POST", fmt.Sprintf("/m/%d/fork", M)},
		{"POST", fmt.Sprintf("/m/%d/delete", U)},
		{"POST", fmt.Sprintf("/runs/%d/cancel", R)},
		{"GET", fmt.Sprintf("/runs/%d/events", R)},
		{"GET", fmt.Sprintf("/t/%d/watch?leaf=%d", T, M)},
	} {
		if r := s.owner.Do(c.method, c.path, url.Values{"content": {"x"}, "title": {"x"}}); r.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s as the room's owner = %d, want 404", c.method, c.path, r.StatusCode)
		}
	}
	if _, err := s.store.RoomForMember(ctx, room.OwnerID, id); err != nil {
		t.Fatalf("the room after the refused thread routes: %v", err)
	}
	// An answer's citations open for every member, and for nobody else.
	if err := s.store.SetSources(ctx, M, []db.Source{{N: 1, Document: "notes.txt", Text: "the passage"}}); err != nil {
		t.Fatal(err)
	}
	postTo(t, s.owner, fmt.Sprintf("/rooms/%d/members", id), url.Values{"email": {"mel@example.com"}}, fmt.Sprintf("/rooms/%d", id))
	for _, c := range []struct {
		who    string
		client *testenv.Client
		want   int
	}{{"the owner", s.owner, 200}, {"a member", s.mel, 200}, {"someone else", s.stan, 404}} {
		r := c.client.Get(fmt.Sprintf("/m/%d/sources/1", M))
		if r.StatusCode != c.want || (c.want == 200) != strings.Contains(r.Body, "the passage") {
			t.Errorf("a citation of the room's answer for %s = %d, want %d", c.who, r.StatusCode, c.want)
		}
	}
	// A room's message is copied by its members (like a citation), and by
	// nobody else.
	for _, c := range []struct {
		who    string
		client *testenv.Client
		want   int
	}{{"the owner", s.owner, 200}, {"a member", s.mel, 200}, {"someone else", s.stan, 404}} {
		r := c.client.Get(fmt.Sprintf("/m/%d/markdown", U))
		if r.StatusCode != c.want || (c.want == 200) != strings.Contains(r.Body, "look around") {
			t.Errorf("the markdown of a room's message for %s = %d %.80q, want %d", c.who, r.StatusCode, r.Body, c.want)
		}
	}
	page := s.owner.Get(fmt.Sprintf("/rooms/%d", id))
	if !strings.Contains(page.Body, `data-testid="copy-message"`) {
		t.Errorf("the room page has no copy buttons")
	}
	if !strings.Contains(page.Body, "look around") || !strings.Contains(page.Body, fmt.Sprintf(`data-message-id="%d"`, M)) ||
		!strings.Contains(page.Body, `data-speaker="olive"`) || !strings.Contains(page.Body, `data-speaker="Scout"`) {
		t.Fatalf("the room page does not show its line:\n%s", page.Body)
	}
}

func TestTheOwnerManagesMembersAndAMemberReadsWritesAndLeaves(t *testing.T) {
	t.Parallel()
	s := newRoomSetup(t)
	id := createRoom(t, s.owner, "Crew")
	room := fmt.Sprintf("/rooms/%d", id)
	refused(t, s.owner, room+"/members", url.Values{"email": {"nobody@example.com"}}, http.StatusUnprocessableEntity,
		"No active account on this instance uses nobody@example.com.")
	refused(t, s.owner, room+"/members", url.Values{"email": {"olive@example.com"}}, http.StatusUnprocessableEntity, "is already in this room")
	postTo(t, s.owner, room+"/members", url.Values{"email": {"MEL@example.com"}}, room)
	refused(t, s.owner, room+"/members", url.Values{"email": {"mel@example.com"}}, http.StatusUnprocessableEntity, "is already in this room")

	// Mel sees the room, in her sidebar too, and may write, but not manage.
	page := s.mel.Get(room)
	if page.StatusCode != http.StatusOK || !strings.Contains(page.Body, fmt.Sprintf(`data-testid="room" data-room-id="%d"`, id)) ||
		!strings.Contains(page.Body, `data-testid="composer"`) || strings.Contains(page.Body, `data-testid="room-invite"`) ||
		!strings.Contains(page.Body, `data-testid="room-leave"`) {
		t.Fatalf("Mel's room page = %d:\n%.3000s", page.StatusCode, page.Body)
	}
	postTo(t, s.mel, room+"/messages", url.Values{"content": {"hello from Mel"}}, room)
	for _, c := range []struct {
		path string
		form url.Values
	}{
		{room + "/members", url.Values{"email": {"stan@example.com"}}},
		{room + "/agents", url.Values{"name": {"Mine"}, "model": {"tiny:latest"}}},
		{room + "/settings", url.Values{"name": {"Mel's"}, "mention_depth": {"1"}}},
		{room + "/delete", url.Values{"confirm": {"Crew"}}},
		{fmt.Sprintf("%s/members/%d/remove", room, userID(t, s.store, "olive@example.com")), nil},
	} {
		refused(t, s.mel, c.path, c.form, http.StatusForbidden, "Only the room&#39;s owner")
	}
	// Stan, in no room, gets nothing.
	if r := s.stan.Get(room); r.StatusCode != http.StatusNotFound {
		t.Fatalf("Stan's GET %s = %d, want 404", room, r.StatusCode)
	}
	// The owner cannot leave; Mel can, and then the room is gone for her.
	refused(t, s.owner, room+"/leave", nil, http.StatusConflict, "delete it instead")
	postTo(t, s.mel, room+"/leave", nil, "/rooms")
	if r := s.mel.Get(room); r.StatusCode != http.StatusNotFound {
		t.Fatalf("Mel after leaving = %d, want 404", r.StatusCode)
	}
	if r := s.mel.Get("/rooms"); strings.Contains(r.Body, fmt.Sprintf(`data-room-id="%d"`, id)) {
		t.Fatal("Mel's sidebar still lists the room she left")
	}
	// Invited again, then removed by the owner.
	postTo(t, s.owner, room+"/members", url.Values{"email": {"mel@example.com"}}, room)
	postTo(t, s.owner, fmt.Sprintf("%s/members/%d/remove", room, userID(t, s.store, "mel@example.com")), nil, room)
	if r := s.mel.Get(room); r.StatusCode != http.StatusNotFound {
		t.Fatalf("Mel after removal = %d, want 404", r.StatusCode)
	}
}

func TestAgentsAndSettingsAreCheckedBeforeTheyAreSaved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newRoomSetup(t)
	id := createRoom(t, s.owner, "Lab")
	room := fmt.Sprintf("/rooms/%d", id)
	agent := func(name, model string, more ...string) url.Values {
		v := url.Values{"name": {name}, "model": {model}, "prompt": {"Be exact."}}
		for i := 0; i+1 < len(more); i += 2 {
			v.Add(more[i], more[i+1])
		}
		return v
	}
	refused(t, s.owner, room+"/agents", agent("9lives", "tiny:latest"), http.StatusUnprocessableEntity, "An agent&#39;s name is a letter")
	refused(t, s.owner, room+"/agents", agent("Scout", "no-such-model"), http.StatusUnprocessableEntity, "Choose the agent&#39;s model")
	refused(t, s.owner, room+"/agents", agent("Scout", "tiny:latest", "temperature", "7"), http.StatusUnprocessableEntity, "Temperature must be")
	refused(t, s.owner, room+"/agents", agent("Scout", "tiny:latest", "policy_write_file", "sometimes"), http.StatusUnprocessableEntity, "auto, ask or deny")
	postTo(t, s.owner, room+"/agents", agent("Scout", "tiny:latest", "temperature", "0.2", "tools", "on", "policy_write_file", "deny"), room)
	refused(t, s.owner, room+"/agents", agent("SCOUT", "tiny:latest"), http.StatusUnprocessableEntity, "already has an agent named @SCOUT")

	owner := userID(t, s.store, "olive@example.com")
	agents, err := s.store.RoomAgents(ctx, owner, id)
	if err != nil || len(agents) != 1 {
		t.Fatalf("agents = %+v, %v", agents, err)
	}
	a := agents[0]
	if a.Name != "Scout" || a.Model != "tiny:latest" || a.Prompt != "Be exact." || !a.Tools || a.ToolPolicy["write_file"] != "deny" || a.Params["temperature"] != 0.2 {
		t.Fatalf("saved agent = %+v", a)
	}
	edit := fmt.Sprintf("%s/agents/%d", room, a.ID)
	if r := s.owner.Get(edit); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `value="0.2"`) {
		t.Fatalf("the agent's page = %d: %.1000s", r.StatusCode, r.Body)
	}
	postTo(t, s.owner, edit, agent("Critic", "tiny:latest"), room)
	if agents, err = s.store.RoomAgents(ctx, owner, id); err != nil || agents[0].Name != "Critic" || agents[0].Tools || len(agents[0].ToolPolicy) != 0 {
		t.Fatalf("edited agent = %+v, %v", agents, err)
	}

	settings := url.Values{"name": {"Lab 2"}, "default_agent": {fmt.Sprint(a.ID)}, "mention_depth": {"3"},
		"summarize_at": {"70"}, "history_messages": {"50"}, "keep_recent": {"4"}}
	bad := url.Values{}
	for k, v := range settings {
		bad[k] = v
	}
	bad.Set("mention_depth", "9")
	refused(t, s.owner, room+"/settings", bad, http.StatusUnprocessableEntity, "Mention depth must be a whole number from 0 to 8.")
	bad.Set("mention_depth", "3")
	bad.Set("default_agent", "999999")
	refused(t, s.owner, room+"/settings", bad, http.StatusUnprocessableEntity, "must be one of the room&#39;s agents")
	postTo(t, s.owner, room+"/settings", settings, room)
	r, err := s.store.RoomForMember(ctx, owner, id)
	if err != nil || r.Name != "Lab 2" || r.DefaultAgentID == nil || *r.DefaultAgentID != a.ID || r.MentionDepth != 3 ||
		r.SummarizeAt != 70 || r.HistoryMessages != 50 || r.KeepRecent != 4 {
		t.Fatalf("room after its settings = %+v, %v", r, err)
	}

	// Deleting the agent, then the room (its name typed exactly).
	postTo(t, s.owner, edit+"/delete", nil, room)
	if r := s.owner.Get(edit); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a deleted agent's page = %d, want 404", r.StatusCode)
	}
	refused(t, s.owner, room+"/delete", url.Values{"confirm": {"lab 2"}}, http.StatusUnprocessableEntity, "type its name exactly")
	postTo(t, s.owner, room+"/delete", url.Values{"confirm": {"Lab 2"}}, "/rooms")
	if r := s.owner.Get(room); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a deleted room = %d, want 404", r.StatusCode)
	}
	var threads int
	if err := s.store.Pool.QueryRow(ctx, "SELECT count(*) FROM threads WHERE id = $1", r.ThreadID).Scan(&threads); err != nil || threads != 0 {
		t.Fatalf("the deleted room's thread: %d rows, %v", threads, err)
	}
}

func TestAnEmptyRoomMessageIsRefusedInTheComposer(t *testing.T) {
	t.Parallel()
	s := newRoomSetup(t)
	id := createRoom(t, s.owner, "Quiet")
	r := s.owner.HTMX(fmt.Sprintf("/rooms/%d/messages", id), url.Values{"content": {"   "}})
	if r.StatusCode != http.StatusUnprocessableEntity || r.Header.Get("HX-Retarget") != "#composer-notice" {
		t.Fatalf("an empty message = %d %q: %.300s", r.StatusCode, r.Header.Get("HX-Retarget"), r.Body)
	}
	r = s.owner.HTMX(fmt.Sprintf("/rooms/%d/messages", id), url.Values{"content": {"a quiet hello"}})
	if r.StatusCode != http.StatusNoContent {
		t.Fatalf("a message sent by htmx = %d, want 204 (the room's stream shows it): %.300s", r.StatusCode, r.Body)
	}
	if page := s.owner.Get(fmt.Sprintf("/rooms/%d", id)); !strings.Contains(page.Body, "a quiet hello") {
		t.Fatalf("the room does not show the message sent:\n%.2000s", page.Body)
	}
}

// The copy button of a room's message (issue 21) reads GET /m/{id}/markdown,
// a thread route of the room's thread: it opens for the room's owner and
// every member, for the owner's message, a member's and an agent's answer,
// and is a 404 for anyone else.
func TestEveryMemberOfARoomCopiesItsMessagesAsMarkdownAndNobodyElse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newRoomSetup(t)
	id := createRoom(t, s.owner, "Copies")
	room := fmt.Sprintf("/rooms/%d", id)
	postTo(t, s.owner, room+"/members", url.Values{"email": {"mel@example.com"}}, room)
	postTo(t, s.owner, room+"/agents", url.Values{"name": {"Scout"}, "model": {"tiny:latest"}}, room)
	postTo(t, s.owner, room+"/messages", url.Values{"content": {"@Scout look **around**\r\nplease"}}, room)
	r, err := s.store.RoomForMember(ctx, userID(t, s.store, "olive@example.com"), id)
	if err != nil {
		t.Fatal(err)
	}
	run := waitIdle(t, s.store, r.OwnerID, r.ThreadID)
	postTo(t, s.mel, room+"/messages", url.Values{"content": {"I'll *read* it."}}, room)
	var mine int64
	if err := s.store.Pool.QueryRow(ctx, "SELECT max(id) FROM messages WHERE thread_id = $1", r.ThreadID).Scan(&mine); err != nil {
		t.Fatal(err)
	}
	answer, err := s.store.Message(ctx, r.OwnerID, *run.AssistantMessageID)
	if err != nil || answer.Content == "" {
		t.Fatalf("the agent's answer: %q %v", answer.Content, err)
	}
	for _, m := range []struct {
		id   int64
		want string
	}{{*run.UserMessageID, "@Scout look **around**\nplease"}, {*run.AssistantMessageID, strings.ReplaceAll(answer.Content, "\r\n", "\n")}, {mine, "I'll *read* it."}} {
		for _, c := range []struct {
			who    string
			client *testenv.Client
		}{{"the owner", s.owner}, {"a member", s.mel}} {
			got := c.client.Get(fmt.Sprintf("/m/%d/markdown", m.id))
			if got.StatusCode != http.StatusOK || got.Body != m.want {
				t.Errorf("message %d copied by %s = %d %q, want %q", m.id, c.who, got.StatusCode, got.Body, m.want)
			}
		}
		if got := s.stan.Get(fmt.Sprintf("/m/%d/markdown", m.id)); got.StatusCode != http.StatusNotFound {
			t.Errorf("message %d copied by someone in no room = %d, want 404", m.id, got.StatusCode)
		}
	}
	// The room's page offers the copy on every message.
	page := s.mel.Get(room)
	for _, m := range []int64{*run.UserMessageID, *run.AssistantMessageID, mine} {
		if !strings.Contains(page.Body, fmt.Sprintf(`data-copy-message="/m/%d/markdown"`, m)) {
			t.Errorf("the room's page has no copy button for message %d", m)
		}
	}
}
