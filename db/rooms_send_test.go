package db_test

import (
	"context"
	"errors"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

// chatRoute answers every room turn on the chat route.
func chatRoute(db.RouteFacts) (string, string) { return db.RouteChat, "" }

func TestAnAgentsAnswerHandsOnOnlyWithinTheRoomsDepthToOthersNotYetQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	owner, ws := newUser(t, store, "owner@example.com")
	room, err := store.CreateRoom(ctx, owner.ID, ws.ID, "Room")
	if err != nil {
		t.Fatal(err)
	}
	var a, b, c int64
	for _, x := range []struct {
		id   *int64
		name string
	}{{&a, "a"}, {&b, "b"}, {&c, "c"}} {
		if err := store.Pool.QueryRow(ctx, "INSERT INTO room_agents (room_id, name) VALUES ($1, $2) RETURNING id", room.ID, x.name).Scan(x.id); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, store, "UPDATE rooms SET mention_depth = 1 WHERE id = $1", room.ID)
	posted, err := store.PostToRoom(ctx, owner.ID, db.RoomPost{Room: room.ID, Content: "@a @b", Agents: []int64{a, b}, DefaultModel: "m", Route: chatRoute})
	if err != nil {
		t.Fatal(err)
	}
	first := posted.Runs[0] // a's turn, depth 0; b's is still queued
	mustExec(t, store, "UPDATE runs SET status = 'completed' WHERE id = $1", first.ID)

	handed, err := store.QueueRoomMentions(ctx, first, []int64{a, b, c}, "m", chatRoute)
	if err != nil {
		t.Fatal(err)
	}
	if len(handed.Runs) != 1 || *handed.Runs[0].RoomAgentID != c || handed.Runs[0].MentionDepth != 1 ||
		*handed.Runs[0].AskedBy != owner.ID || *handed.Runs[0].UserMessageID != posted.Answers[0].ID ||
		*handed.Answers[0].ParentID != posted.Answers[1].ID || handed.Answers[0].Speaker != "c" || handed.Answers[0].Metadata.Model != "m" {
		t.Fatalf("handed on: %+v %+v", handed.Runs, handed.Answers)
	}
	// c's turn is at the room's depth: what it mentions is not queued.
	deeper, err := store.QueueRoomMentions(ctx, handed.Runs[0], []int64{a}, "m", chatRoute)
	if err != nil || len(deeper.Runs) != 0 {
		t.Fatalf("beyond the room's depth: %d runs, %v", len(deeper.Runs), err)
	}
}

func TestARemovedMemberCannotPostAndAnAgentRemovedMeanwhileRefusesThePost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	owner, ws := newUser(t, store, "owner@example.com")
	member, _ := newUser(t, store, "member@example.com")
	room, err := store.CreateRoom(ctx, owner.ID, ws.ID, "Room")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, store, "INSERT INTO room_members (room_id, user_id, role) VALUES ($1, $2, 'member')", room.ID, member.ID)
	got, err := store.PostToRoom(ctx, member.ID, db.RoomPost{Room: room.ID, Content: "hello", Route: chatRoute})
	if err != nil || got.User.Speaker != "member@example.com" || *got.User.AuthorID != member.ID {
		t.Fatalf("a member's post: %+v, %v", got.User, err)
	}
	if _, err := store.PostToRoom(ctx, owner.ID, db.RoomPost{Room: room.ID, Content: "@x", Agents: []int64{999999}, Route: chatRoute}); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a post to an agent that is not the room's: %v", err)
	}
	mustExec(t, store, "DELETE FROM room_members WHERE room_id = $1 AND user_id = $2", room.ID, member.ID)
	if _, err := store.PostToRoom(ctx, member.ID, db.RoomPost{Room: room.ID, Content: "still here?", Route: chatRoute}); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a removed member posts: %v", err)
	}
	line, err := store.RoomLineAfter(ctx, owner.ID, room.ThreadID, 0, 10)
	if err != nil || len(line) != 1 || line[0].Content != "hello" {
		t.Fatalf("the line after the refusals: %+v, %v", line, err)
	}
}

func TestAnAnswerAskedForByAMemberWhoIsGoneHandsOnToNobody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRoomFixture(t)
	other, err := f.store.AddRoomAgent(ctx, f.alice.ID, f.room.ID, db.RoomAgentInput{Name: "Critic", Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	posted, err := f.store.PostToRoom(ctx, f.bob.ID, db.RoomPost{Room: f.room.ID, Content: "@Scout go", Agents: []int64{f.agent.ID}, Route: chatRoute})
	if err != nil {
		t.Fatal(err)
	}
	// Bob's answer completes just as the owner removes him: what it
	// mentions is no longer asked for by a member of the room.
	mustExec(t, f.store, "UPDATE runs SET status = 'completed' WHERE id = $1", posted.Runs[0].ID)
	if err := f.store.RemoveRoomMember(ctx, f.alice.ID, f.room.ID, f.bob.ID); err != nil {
		t.Fatal(err)
	}
	handed, err := f.store.QueueRoomMentions(ctx, posted.Runs[0], []int64{other.ID}, "m", chatRoute)
	if err != nil || len(handed.Runs) != 0 {
		t.Fatalf("a removed member's answer handed on: %d runs, %v", len(handed.Runs), err)
	}
	queue, err := f.store.RoomQueue(ctx, f.alice.ID, f.room.ThreadID)
	if err != nil || len(queue) != 0 {
		t.Fatalf("the room's queue after the removal: %+v, %v", queue, err)
	}
}

func TestStoppingAnAccountsRunsStopsTheRoomAnswersItAskedFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRoomFixture(t)
	posted, err := f.store.PostToRoom(ctx, f.bob.ID, db.RoomPost{Room: f.room.ID, Content: "@Scout go", Agents: []int64{f.agent.ID}, Route: chatRoute})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := f.store.PostToRoom(ctx, f.alice.ID, db.RoomPost{Room: f.room.ID, Content: "@Scout me too", Agents: []int64{f.agent.ID}, Route: chatRoute})
	if err != nil {
		t.Fatal(err)
	}
	// What disabling or deleting Bob's account stops: also his answers in
	// Alice's room, run as Alice's.
	if _, err := f.store.CancelUserRuns(ctx, f.bob.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		who  string
		run  int64
		want string
	}{{"Bob's", posted.Runs[0].ID, db.RunCancelled}, {"Alice's", mine.Runs[0].ID, db.RunQueued}} {
		r, err := f.store.Run(ctx, f.alice.ID, c.run)
		if err != nil || r.Status != c.want {
			t.Errorf("%s answer in the room = %q (%v), want %q", c.who, r.Status, err, c.want)
		}
	}
}

// The owner's removal of a member stops the runs the member asked for
// (RoomRunsToStop, after the removal's commit); an answer of theirs that
// completes just then must not hand on to new turns that nobody may
// decide. Likewise once the asker's account is gone.
func TestAnAnswerAskedBySomeoneNoLongerInTheRoomHandsOnToNobody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	owner, ws := newUser(t, store, "owner@example.com")
	member, _ := newUser(t, store, "member@example.com")
	room, err := store.CreateRoom(ctx, owner.ID, ws.ID, "Room")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, store, "INSERT INTO room_members (room_id, user_id, role) VALUES ($1, $2, 'member')", room.ID, member.ID)
	var a, b int64
	for _, x := range []struct {
		id   *int64
		name string
	}{{&a, "a"}, {&b, "b"}} {
		if err := store.Pool.QueryRow(ctx, "INSERT INTO room_agents (room_id, name) VALUES ($1, $2) RETURNING id", room.ID, x.name).Scan(x.id); err != nil {
			t.Fatal(err)
		}
	}
	posted, err := store.PostToRoom(ctx, member.ID, db.RoomPost{Room: room.ID, Content: "@a", Agents: []int64{a}, DefaultModel: "m", Route: chatRoute})
	if err != nil {
		t.Fatal(err)
	}
	answered := posted.Runs[0]
	mustExec(t, store, "UPDATE runs SET status = 'completed' WHERE id = $1", answered.ID)

	if err := store.RemoveRoomMember(ctx, owner.ID, room.ID, member.ID); err != nil {
		t.Fatal(err)
	}
	handed, err := store.QueueRoomMentions(ctx, answered, []int64{b}, "m", chatRoute)
	if err != nil || len(handed.Runs) != 0 {
		t.Fatalf("a removed member's answer handed on: %d runs, %v", len(handed.Runs), err)
	}
	gone := answered
	gone.AskedBy = nil
	mustExec(t, store, "INSERT INTO room_members (room_id, user_id, role) VALUES ($1, $2, 'member')", room.ID, member.ID)
	if handed, err := store.QueueRoomMentions(ctx, gone, []int64{b}, "m", chatRoute); err != nil || len(handed.Runs) != 0 {
		t.Fatalf("an answer whose asker's account is gone handed on: %d runs, %v", len(handed.Runs), err)
	}
	if handed, err := store.QueueRoomMentions(ctx, answered, []int64{b}, "m", chatRoute); err != nil || len(handed.Runs) != 1 {
		t.Fatalf("a member's answer, back in the room, hands on: %d runs, %v", len(handed.Runs), err)
	}
}
