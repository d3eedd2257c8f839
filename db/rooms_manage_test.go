package db_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

func TestCreatingARoomMakesItsHiddenThreadAndTheOwnersMembership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	alice, aws := newUser(t, store, "alice@example.com")
	bob, _ := newUser(t, store, "bob@example.com")
	room, err := store.CreateRoom(ctx, alice.ID, aws.ID, "Planning")
	if err != nil {
		t.Fatal(err)
	}
	if room.Name != "Planning" || room.OwnerID != alice.ID || room.WorkspaceID != aws.ID || !room.IsOwner() {
		t.Fatalf("room = %+v", room)
	}
	th, err := store.Thread(ctx, alice.ID, room.ThreadID)
	if err != nil {
		t.Fatal(err)
	}
	if !th.IsRoom || th.Title != "Planning" {
		t.Fatalf("backing thread = %+v, want is_room titled Planning", th)
	}
	members, err := store.RoomMembers(ctx, alice.ID, room.ID)
	if err != nil || len(members) != 1 || members[0].UserID != alice.ID || members[0].Role != db.RoomOwner {
		t.Fatalf("members = %+v, %v; want the owner alone", members, err)
	}
	if _, err := store.RoomForMember(ctx, bob.ID, room.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a non-member reads the room: err = %v, want ErrNotFound", err)
	}
	if _, err := store.CreateRoom(ctx, bob.ID, aws.ID, "Mine"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a room in another user's workspace: err = %v, want ErrNotFound", err)
	}
	if got, err := store.RoomOfThread(ctx, alice.ID, room.ThreadID); err != nil || got != room.ID {
		t.Fatalf("room of the thread = %d, %v; want %d", got, err, room.ID)
	}
}

func TestARoomsThreadIsNeverListedOrSearchedAsAThread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	alice, aws := newUser(t, store, "alice@example.com")
	plain := send(t, store, alice.ID, db.Send{WorkspaceID: aws.ID, Title: "Plain", Content: "budget talk"}).Thread
	room, err := store.CreateRoom(ctx, alice.ID, aws.ID, "Budget")
	if err != nil {
		t.Fatal(err)
	}
	send(t, store, alice.ID, db.Send{ThreadID: room.ThreadID, Content: "budget in the room"})
	page, _, err := store.SidebarThreads(ctx, alice.ID, aws.ID, nil, 50)
	if err != nil || len(page) != 1 || page[0].ID != plain.ID {
		t.Fatalf("sidebar = %+v, %v; want only the plain thread", page, err)
	}
	hits, err := store.Search(ctx, alice.ID, aws.ID, "budget", 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.ThreadID == room.ThreadID {
			t.Fatalf("search found the room's thread: %+v", h)
		}
	}
	if len(hits) == 0 {
		t.Fatal("search found nothing; want the plain thread")
	}
	// Archived: a room's thread is never archived by the app, but even so
	// the archive list leaves it out.
	if _, err := store.Pool.Exec(ctx, "UPDATE threads SET archived = true WHERE id = $1", room.ThreadID); err != nil {
		t.Fatal(err)
	}
	if arch, err := store.ArchivedThreads(ctx, alice.ID, aws.ID, 50); err != nil || len(arch) != 0 {
		t.Fatalf("archived = %+v, %v; want none", arch, err)
	}
	if in, err := store.InRoomThread(ctx, alice.ID, db.ObjThread, room.ThreadID); err != nil || !in {
		t.Fatalf("InRoomThread(the room's thread) = %v, %v; want true", in, err)
	}
	// Nor is it moved to another workspace or shared by a link, even with
	// messages in it.
	other, err := store.CreateWorkspace(ctx, alice.ID, "Other")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.MoveThread(ctx, alice.ID, room.ThreadID, other.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("move the room's thread: err = %v, want ErrNotFound", err)
	}
	if _, err := store.CreateShare(ctx, alice.ID, room.ThreadID, db.NewShare{TokenSHA256: make([]byte, 32), TokenHint: "abcdef"}); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("share the room's thread: err = %v, want ErrNotFound", err)
	}
	if in, err := store.InRoomThread(ctx, alice.ID, db.ObjThread, plain.ID); err != nil || in {
		t.Fatalf("InRoomThread(plain thread) = %v, %v; want false", in, err)
	}
}

// roomFixture is a room of alice's with bob as a member, one agent, and
// carol, who is in no room.
type roomFixture struct {
	store             *db.DB
	alice, bob, carol db.User
	aws               db.Workspace
	room              db.Room
	agent             db.RoomAgent
}

func newRoomFixture(t *testing.T) roomFixture {
	t.Helper()
	ctx := context.Background()
	f := roomFixture{store: testenv.NewDB(t)}
	f.alice, f.aws = newUser(t, f.store, "alice@example.com")
	f.bob, _ = newUser(t, f.store, "bob@example.com")
	f.carol, _ = newUser(t, f.store, "carol@example.com")
	var err error
	if f.room, err = f.store.CreateRoom(ctx, f.alice.ID, f.aws.ID, "Launch"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.InviteRoomMember(ctx, f.alice.ID, f.room.ID, "BOB@example.com"); err != nil {
		t.Fatal(err)
	}
	if f.agent, err = f.store.AddRoomAgent(ctx, f.alice.ID, f.room.ID, db.RoomAgentInput{Name: "Scout", Model: "tiny"}); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRoomsAreReachedOnlyByMembersAndManagedOnlyByTheOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRoomFixture(t)
	s, room, agent := f.store, f.room.ID, f.agent.ID
	anAgent := db.RoomAgentInput{Name: "Other", Model: "tiny"}
	settings := db.RoomSettings{Name: "Taken", MentionDepth: 1, SummarizeAt: 50, KeepRecent: 2}
	msg := send(t, s, f.alice.ID, db.Send{ThreadID: f.room.ThreadID, Content: "in the room"}).User.ID
	// Every function, as a given user; each must refuse carol (not a
	// member) and bob for the owner's changes.
	calls := func(u int64) map[string]error {
		e := func(_ any, err error) error { return err }
		return map[string]error{
			"RoomForMember":        e(s.RoomForMember(ctx, u, room)),
			"RoomAgents":           e(nonEmpty(s.RoomAgents(ctx, u, room))),
			"RoomMembers":          e(nonEmpty(s.RoomMembers(ctx, u, room))),
			"RoomMessageForMember": e(s.RoomMessageForMember(ctx, u, msg)),
			"InviteRoomMember":     e(s.InviteRoomMember(ctx, u, room, "carol@example.com")),
			"RemoveRoomMember":     s.RemoveRoomMember(ctx, u, room, f.bob.ID),
			"UpdateRoomSettings":   s.UpdateRoomSettings(ctx, u, room, settings),
			"AddRoomAgent":         e(s.AddRoomAgent(ctx, u, room, anAgent)),
			"UpdateRoomAgent":      e(s.UpdateRoomAgent(ctx, u, room, agent, anAgent)),
			"DeleteRoomAgent":      s.DeleteRoomAgent(ctx, u, room, agent),
			"RoomRunsToStop":       e(s.RoomRunsToStop(ctx, u, room, 0, 0)),
			"RoomOfThread":         e(s.RoomOfThread(ctx, u, f.room.ThreadID)),
			"LeaveRoom":            s.LeaveRoom(ctx, u, room),
		}
	}
	for name, err := range calls(f.carol.ID) {
		if !errors.Is(err, db.ErrNotFound) {
			t.Errorf("%s as a non-member: err = %v, want ErrNotFound", name, err)
		}
	}
	if rooms, err := s.MemberRooms(ctx, f.carol.ID, 50); err != nil || len(rooms) != 0 {
		t.Errorf("a non-member's rooms = %+v, %v; want none", rooms, err)
	}
	memberMay := map[string]bool{"RoomForMember": true, "RoomAgents": true, "RoomMembers": true, "RoomMessageForMember": true, "LeaveRoom": true}
	for name, err := range calls(f.bob.ID) {
		if memberMay[name] {
			if err != nil {
				t.Errorf("%s as a member: %v", name, err)
			}
		} else if !errors.Is(err, db.ErrNotFound) {
			t.Errorf("%s as a member: err = %v, want ErrNotFound", name, err)
		}
	}
	// Nothing the refused calls tried happened.
	got, err := s.RoomForMember(ctx, f.alice.ID, room)
	if err != nil || got.Name != "Launch" {
		t.Fatalf("room after refused changes = %+v, %v", got, err)
	}
	agents, err := s.RoomAgents(ctx, f.alice.ID, room)
	if err != nil || len(agents) != 1 || agents[0].Name != "Scout" {
		t.Fatalf("agents after refused changes = %+v, %v", agents, err)
	}
	members, err := s.RoomMembers(ctx, f.alice.ID, room)
	if err != nil || len(members) != 1 {
		t.Fatalf("members after bob left = %+v, %v; want the owner alone", members, err)
	}
	if _, err := s.RoomForMember(ctx, f.bob.ID, room); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("bob after leaving: err = %v, want ErrNotFound", err)
	}
	// The owner cannot leave, nor be removed.
	if err := s.LeaveRoom(ctx, f.alice.ID, room); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("the owner leaves: err = %v, want ErrNotFound", err)
	}
	if err := s.RemoveRoomMember(ctx, f.alice.ID, room, f.alice.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("the owner removes themself: err = %v, want ErrNotFound", err)
	}
}

// nonEmpty turns an empty list into ErrNotFound, so that a list read by a
// non-member counts as refused only when it is refused or empty.
func nonEmpty[T any](list []T, err error) ([]T, error) {
	if err == nil && len(list) == 0 {
		return nil, db.ErrNotFound
	}
	return list, err
}

func TestInvitingNamesAnActiveAccountOnceAndRemovingEndsAccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRoomFixture(t)
	s := f.store
	if _, err := s.InviteRoomMember(ctx, f.alice.ID, f.room.ID, "nobody@example.com"); !errors.Is(err, db.ErrRoomNoUser) {
		t.Fatalf("unknown email: err = %v, want ErrRoomNoUser", err)
	}
	if _, err := s.InviteRoomMember(ctx, f.alice.ID, f.room.ID, "bob@example.com"); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("bob again: err = %v, want ErrConflict", err)
	}
	if _, err := s.InviteRoomMember(ctx, f.alice.ID, f.room.ID, "alice@example.com"); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("the owner: err = %v, want ErrConflict", err)
	}
	if _, err := s.SetUserDisabled(ctx, f.alice.ID, f.carol.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InviteRoomMember(ctx, f.alice.ID, f.room.ID, "carol@example.com"); !errors.Is(err, db.ErrRoomNoUser) {
		t.Fatalf("a disabled account: err = %v, want ErrRoomNoUser", err)
	}
	rooms, err := s.MemberRooms(ctx, f.bob.ID, 50)
	if err != nil || len(rooms) != 1 || rooms[0].ID != f.room.ID || rooms[0].MyRole != db.RoomMember ||
		rooms[0].Members != 2 || rooms[0].Agents != 1 || rooms[0].OwnerName != "alice@example.com" {
		t.Fatalf("bob's rooms = %+v, %v", rooms, err)
	}
	if err := s.RemoveRoomMember(ctx, f.alice.ID, f.room.ID, f.bob.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RoomForMember(ctx, f.bob.ID, f.room.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("bob after removal: err = %v, want ErrNotFound", err)
	}
	if rooms, err := s.MemberRooms(ctx, f.bob.ID, 50); err != nil || len(rooms) != 0 {
		t.Fatalf("bob's rooms after removal = %+v, %v", rooms, err)
	}
}

func TestAgentsKeepTheirProfileAndOnlyTheOwnersKnowledgeBasesOfTheRoomsWorkspace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRoomFixture(t)
	s := f.store
	kb, err := s.CreateKB(ctx, f.alice.ID, f.aws.ID, db.KBInput{Name: "Docs", EmbedModel: "embedder", Dims: 256})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateWorkspace(ctx, f.alice.ID, "Elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := s.CreateKB(ctx, f.alice.ID, other.ID, db.KBInput{Name: "Far", EmbedModel: "embedder", Dims: 256})
	if err != nil {
		t.Fatal(err)
	}
	bws, err := s.DefaultWorkspace(ctx, f.bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := s.CreateKB(ctx, f.bob.ID, bws.ID, db.KBInput{Name: "Bob's", EmbedModel: "embedder", Dims: 256})
	if err != nil {
		t.Fatal(err)
	}
	temp := 0.3
	in := db.RoomAgentInput{Name: "Critic", Model: "tiny", Prompt: "Find the flaw.", Params: db.RoleParams{Temperature: &temp},
		Tools: true, ToolPolicy: map[string]string{"write_file": "deny", "skill:review": "ask"}, KBs: []int64{kb.ID}}
	a, err := s.AddRoomAgent(ctx, f.alice.ID, f.room.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "Critic" || a.Prompt != "Find the flaw." || !a.Tools || a.ToolPolicy["write_file"] != "deny" ||
		a.ToolPolicy["skill:review"] != "ask" || a.Params["temperature"] != 0.3 || len(a.KBs) != 1 || a.KBs[0] != kb.ID {
		t.Fatalf("agent = %+v", a)
	}
	if _, err := s.AddRoomAgent(ctx, f.alice.ID, f.room.ID, db.RoomAgentInput{Name: "CRITIC", Model: "tiny"}); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("same name in another case: err = %v, want ErrConflict", err)
	}
	for name, kbs := range map[string][]int64{"another workspace's": {elsewhere.ID}, "another user's": {bobs.ID}, "a missing": {kb.ID, 1 << 40}} {
		in.KBs = kbs
		if _, err := s.UpdateRoomAgent(ctx, f.alice.ID, f.room.ID, a.ID, in); !errors.Is(err, db.ErrNotFound) {
			t.Errorf("%s knowledge base: err = %v, want ErrNotFound", name, err)
		}
	}
	in.KBs, in.Tools, in.Name = nil, false, "Critic2"
	if a, err = s.UpdateRoomAgent(ctx, f.alice.ID, f.room.ID, a.ID, in); err != nil || a.Name != "Critic2" || a.Tools || len(a.KBs) != 0 {
		t.Fatalf("updated agent = %+v, %v", a, err)
	}
	// An agent of another room is not this room's to change.
	otherRoom, err := s.CreateRoom(ctx, f.alice.ID, f.aws.ID, "Other")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRoomAgent(ctx, f.alice.ID, otherRoom.ID, a.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("delete through another room: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteRoomAgent(ctx, f.alice.ID, f.room.ID, a.ID); err != nil {
		t.Fatal(err)
	}
}

func TestRoomSettingsTakeOnlyTheRoomsOwnAgentAsDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRoomFixture(t)
	s := f.store
	otherRoom, err := s.CreateRoom(ctx, f.alice.ID, f.aws.ID, "Other")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := s.AddRoomAgent(ctx, f.alice.ID, otherRoom.ID, db.RoomAgentInput{Name: "Far", Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	set := db.RoomSettings{Name: "Launch day", DefaultAgentID: &foreign.ID, MentionDepth: 3, SummarizeAt: 60, HistoryMessages: 40, KeepRecent: 4}
	if err := s.UpdateRoomSettings(ctx, f.alice.ID, f.room.ID, set); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("another room's agent as default: err = %v, want ErrNotFound", err)
	}
	set.DefaultAgentID = &f.agent.ID
	if err := s.UpdateRoomSettings(ctx, f.alice.ID, f.room.ID, set); err != nil {
		t.Fatal(err)
	}
	r, err := s.RoomForMember(ctx, f.bob.ID, f.room.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "Launch day" || r.DefaultAgentID == nil || *r.DefaultAgentID != f.agent.ID || r.MentionDepth != 3 ||
		r.SummarizeAt != 60 || r.HistoryMessages != 40 || r.KeepRecent != 4 || r.IsOwner() {
		t.Fatalf("room as bob sees it = %+v", r)
	}
	if th, err := s.Thread(ctx, f.alice.ID, f.room.ThreadID); err != nil || th.Title != "Launch day" {
		t.Fatalf("the room's thread = %+v, %v; want it named after the room", th, err)
	}
	// Deleting the default agent leaves the room without one.
	if err := s.DeleteRoomAgent(ctx, f.alice.ID, f.room.ID, f.agent.ID); err != nil {
		t.Fatal(err)
	}
	if r, err = s.RoomForMember(ctx, f.alice.ID, f.room.ID); err != nil || r.DefaultAgentID != nil {
		t.Fatalf("room after its default agent went = %+v, %v", r, err)
	}
}

func TestEveryRoomChangeTellsTheRoomsWatchers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newRoomFixture(t)
	s := f.store
	var mu sync.Mutex
	notes := 0
	ready := make(chan struct{})
	var once sync.Once
	go s.Listen(ctx, func() { once.Do(func() { close(ready) }) }, func(n db.Note) {
		if n.Kind == db.NoteThread && n.ID == f.room.ThreadID {
			mu.Lock()
			notes++
			mu.Unlock()
		}
	})
	testwait.Closed(t, "the listener", 10*time.Second, ready)
	count := func() int { mu.Lock(); defer mu.Unlock(); return notes }
	want := 0
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"invite", func() error {
			_, err := s.InviteRoomMember(ctx, f.alice.ID, f.room.ID, "carol@example.com")
			return err
		}},
		{"remove", func() error { return s.RemoveRoomMember(ctx, f.alice.ID, f.room.ID, f.carol.ID) }},
		{"leave", func() error { return s.LeaveRoom(ctx, f.bob.ID, f.room.ID) }},
		{"add agent", func() error {
			_, err := s.AddRoomAgent(ctx, f.alice.ID, f.room.ID, db.RoomAgentInput{Name: "Two", Model: "tiny"})
			return err
		}},
		{"edit agent", func() error {
			_, err := s.UpdateRoomAgent(ctx, f.alice.ID, f.room.ID, f.agent.ID, db.RoomAgentInput{Name: "Scout", Model: "small"})
			return err
		}},
		{"settings", func() error {
			return s.UpdateRoomSettings(ctx, f.alice.ID, f.room.ID, db.RoomSettings{Name: "R", MentionDepth: 1, SummarizeAt: 80, KeepRecent: 6})
		}},
		{"delete agent", func() error { return s.DeleteRoomAgent(ctx, f.alice.ID, f.room.ID, f.agent.ID) }},
	} {
		name := c.name
		if err := c.change(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want++
		testwait.For(t, fmt.Sprintf("the note of %s", name), 10*time.Second, func() bool { return count() >= want })
	}
}
