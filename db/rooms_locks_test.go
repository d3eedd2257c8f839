package db_test

import (
	"context"
	"errors"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

// The room's writes against the run path's, in the order that closes a
// circle of lock waits (see run_locks_test.go for the method: a held row
// stops the first transaction at a known statement).

// roomLocks is a room of owner's with one member and agent x, and a
// member's message to x: its answer and run (posted).
type roomLocks struct {
	runLocks
	room   db.Room
	member int64
	agent  int64
	posted db.RoomPosted
}

func newRoomLocks(t *testing.T) roomLocks {
	t.Helper()
	ctx := context.Background()
	store := testenv.NewDB(t)
	owner, ws := newUser(t, store, "owner@example.com")
	member, _ := newUser(t, store, "member@example.com")
	room, err := store.CreateRoom(ctx, owner.ID, ws.ID, "Room")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, store, "INSERT INTO room_members (room_id, user_id, role) VALUES ($1, $2, 'member')", room.ID, member.ID)
	var agent int64
	if err := store.Pool.QueryRow(ctx, "INSERT INTO room_agents (room_id, name) VALUES ($1, 'x') RETURNING id", room.ID).Scan(&agent); err != nil {
		t.Fatal(err)
	}
	posted, err := store.PostToRoom(ctx, member.ID, db.RoomPost{Room: room.ID, Content: "@x hi", Agents: []int64{agent},
		DefaultModel: "m", Route: chatRoute})
	if err != nil {
		t.Fatal(err)
	}
	k := roomLocks{room: room, member: member.ID, agent: agent, posted: posted}
	k.runLocks = runLocks{store: store, user: owner.ID,
		sent: db.Sent{Thread: posted.Thread, User: posted.User, Assistant: posted.Answers[0], Run: posted.Runs[0]}}
	return k
}

// An agent removed while its answer is being settled (the owner's removal
// cancels the answer, whose settling then races the deletion): the
// deletion takes the agent's runs before its answers, as the settling
// does. Before the fix the foreign keys' cascade set the answers' agent to
// null first and the runs' last, waiting for the settling's run while the
// settling waited for the answer.
func TestAnAgentRemovedWhileItsAnswerIsSettledIsRemoved(t *testing.T) {
	t.Parallel()
	k := newRoomLocks(t)
	k.claim(t)
	// Both wait for the answer, the removal first.
	release := k.hold(t, "SELECT 1 FROM messages WHERE id = $1 FOR SHARE", k.sent.Assistant.ID)
	del := run("remove the agent", func() error {
		return k.store.DeleteRoomAgent(context.Background(), k.user, k.room.ID, k.agent)
	})
	k.waitLockWaiters(t, 1, del)
	fin := k.finish()
	k.waitLockWaiters(t, 2, del, fin)
	release()
	noDeadlock(t, del)
	noDeadlock(t, fin)
	r, err := k.store.Run(context.Background(), k.user, k.sent.Run.ID)
	if err != nil || r.Status != db.RunCompleted || r.RoomAgentID != nil {
		t.Fatalf("the run after both: %s, agent %v (%v)", r.Status, r.RoomAgentID, err)
	}
}

// A room deleted while a member posts to it: the post takes the room's
// thread before the member's row, as the deletion does (the thread, then
// by the cascade the room and its members). Before the fix the post held
// the member's row and waited for the thread, which the deletion held
// while it waited for the member's row.
func TestARoomDeletedWhileAMemberPostsIsDeletedAndThePostFindsNoRoom(t *testing.T) {
	t.Parallel()
	k := newRoomLocks(t)
	// The deletion stops at the member's message (it holds the thread).
	release := k.hold(t, "SELECT 1 FROM messages WHERE id = $1 FOR KEY SHARE", k.sent.User.ID)
	del := run("delete the room", func() error {
		_, err := k.store.DeleteThread(context.Background(), k.user, k.room.ThreadID)
		return err
	})
	k.waitLockWaiters(t, 1, del)
	post := run("post to the room", func() error {
		_, err := k.store.PostToRoom(context.Background(), k.member, db.RoomPost{Room: k.room.ID, Content: "anyone?", Route: chatRoute})
		return err
	})
	k.waitLockWaiters(t, 2, del, post)
	release()
	noDeadlock(t, del)
	if err := post.wait(t); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a post to a room deleted meanwhile: %v", err)
	}
}

// A room deleted while its owner saves its settings (in another tab): the
// settings take the room's thread before the room's row, as the deletion
// does. Before the fix they held the room's row and waited for the
// thread, which the deletion held while it waited for the room's row.
func TestARoomDeletedWhileItsSettingsAreSavedIsDeleted(t *testing.T) {
	t.Parallel()
	k := newRoomLocks(t)
	release := k.hold(t, "SELECT 1 FROM messages WHERE id = $1 FOR KEY SHARE", k.sent.User.ID)
	del := run("delete the room", func() error {
		_, err := k.store.DeleteThread(context.Background(), k.user, k.room.ThreadID)
		return err
	})
	k.waitLockWaiters(t, 1, del)
	save := run("save the settings", func() error {
		return k.store.UpdateRoomSettings(context.Background(), k.user, k.room.ID, db.RoomSettings{Name: "Renamed",
			MentionDepth: 1, SummarizeAt: 80, KeepRecent: 6})
	})
	k.waitLockWaiters(t, 2, del, save)
	release()
	noDeadlock(t, del)
	if err := save.wait(t); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("saving the settings of a room deleted meanwhile: %v", err)
	}
}

// A room deleted while its owner removes one of its agents: the removal
// takes the room's thread first, as the deletion does, instead of the
// room's row and then the agent's runs, which the deletion held while it
// waited for the room's row.
func TestARoomDeletedWhileOneOfItsAgentsIsRemovedIsDeleted(t *testing.T) {
	t.Parallel()
	k := newRoomLocks(t)
	release := k.hold(t, "SELECT 1 FROM messages WHERE id = $1 FOR KEY SHARE", k.sent.User.ID)
	del := run("delete the room", func() error {
		_, err := k.store.DeleteThread(context.Background(), k.user, k.room.ThreadID)
		return err
	})
	k.waitLockWaiters(t, 1, del)
	remove := run("remove the agent", func() error {
		return k.store.DeleteRoomAgent(context.Background(), k.user, k.room.ID, k.agent)
	})
	k.waitLockWaiters(t, 2, del, remove)
	release()
	noDeadlock(t, del)
	if err := remove.wait(t); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("removing an agent of a room deleted meanwhile: %v", err)
	}
}
