package chat_test

import (
	"context"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/internal/testwait"
)

// roomEnv is an env whose user (the owner, "owner@example.com") has a room
// with a second member.
type roomEnv struct {
	*env
	room   db.Room // as the owner sees it
	member db.User
}

func newRoomEnv(t *testing.T, cfg chat.Config) *roomEnv {
	t.Helper()
	e := newEnv(t, cfg)
	mustExec(t, e.store, "UPDATE users SET display_name = 'Olivia' WHERE id = $1", e.user.ID)
	room, err := e.store.CreateRoom(context.Background(), e.user.ID, e.ws.ID, "Planning")
	if err != nil {
		t.Fatal(err)
	}
	re := &roomEnv{env: e, room: room}
	re.member, _ = e.newUser("member@example.com")
	mustExec(t, e.store, "UPDATE users SET display_name = 'Max' WHERE id = $1", re.member.ID)
	re.join(re.member)
	return re
}

// join makes u a member of the room.
func (e *roomEnv) join(u db.User) {
	e.t.Helper()
	mustExec(e.t, e.store, "INSERT INTO room_members (room_id, user_id, role, invited_by) VALUES ($1, $2, 'member', $3)",
		e.room.ID, u.ID, e.user.ID)
}

// agent adds an agent to the room.
func (e *roomEnv) agent(name, model, prompt string, params string, tools bool) db.RoomAgent {
	e.t.Helper()
	if params == "" {
		params = "{}"
	}
	var id int64
	err := e.store.Pool.QueryRow(context.Background(), `INSERT INTO room_agents (room_id, name, model, prompt, params, tools)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6) RETURNING id`, e.room.ID, name, model, prompt, params, tools).Scan(&id)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, a := range e.agents() {
		if a.ID == id {
			return a
		}
	}
	e.t.Fatalf("agent %s not found", name)
	return db.RoomAgent{}
}

func (e *roomEnv) agents() []db.RoomAgent {
	e.t.Helper()
	as, err := e.store.RoomAgents(context.Background(), e.user.ID, e.room.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return as
}

// as is the room as member u sees it.
func (e *roomEnv) as(u db.User) db.Room {
	e.t.Helper()
	r, err := e.store.RoomForMember(context.Background(), u.ID, e.room.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// say posts content to the room as u.
func (e *roomEnv) say(u db.User, content string) chat.RoomSent {
	e.t.Helper()
	sent, err := e.rt.RoomSend(context.Background(), u.ID, e.as(u), content)
	if err != nil {
		e.t.Fatalf("room send %q: %v", content, err)
	}
	return sent
}

// settled waits until the room's queue is empty and returns its line.
func (e *roomEnv) settled() []chat.MessageItem {
	e.t.Helper()
	testwait.For(e.t, "the room's queue to empty", 20*time.Second, func() bool {
		q, err := e.store.RoomQueue(context.Background(), e.user.ID, e.room.ThreadID)
		if err != nil {
			e.t.Fatal(err)
		}
		return len(q) == 0
	})
	v, err := e.rt.RoomView(context.Background(), e.user.ID, e.as(e.user), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return v.Messages
}

// line is the room's line as "speaker: content" (an agent's as
// "@speaker: content").
func line(items []chat.MessageItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		who := it.Speaker
		if it.SpeakerKind == chat.SpeakerAgent {
			who = "@" + who
		}
		out[i] = who + ": " + it.Message.Content
	}
	return out
}
