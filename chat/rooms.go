package chat

import (
	"context"
	"errors"
	"fmt"

	"weft/db"
	"weft/internal/usererr"
)

// Rooms (issue 20): members and agents in one conversation, backed by one
// thread of the room's owner (db/rooms.go). Every function here takes the
// acting member and the room as db.RoomForMember returned it (the
// caller's authorization), reads the room's thread as its owner (the
// thread machinery authorizes by the thread's owner) and applies the
// room's own rules: who may stop an answer (its asker or the owner), who
// decides its approvals and answers its questions (its asker).

// Speaker kinds of a room's message (MessageItem.SpeakerKind).
const (
	SpeakerMember = "member"
	SpeakerAgent  = "agent"
)

// SpeakerOf says who wrote a message of a room: a member's message is
// "member", an agent's answer "agent", with the name as it was when it was
// written. A thread's message has neither ("", "").
func SpeakerOf(m db.Message) (name, kind string) {
	switch {
	case m.Speaker == "":
		return "", ""
	case m.Role == db.RoleUser:
		return m.Speaker, SpeakerMember
	case m.Role == db.RoleAssistant:
		return m.Speaker, SpeakerAgent
	}
	return "", ""
}

// RoomSent is what a member's message to a room created: the message, and
// the answer (a streaming placeholder) and queued run of each agent that
// answers it, in the order they run.
type RoomSent struct {
	User    db.Message
	Answers []db.Message
	Runs    []db.Run
}

// RoomSend posts a member's message to a room. It goes to the agents it
// mentions (@name, in the order of their first mention, each once), else
// to the room's default agent, else to nobody (it is only posted). A
// "@name" that is no agent's is text (it may name a member): only an empty
// or too long message is refused, or one that asks agents while the member
// already has RoomPendingPerMember answers waiting (ErrRoomBusy). The
// first answer starts at once when the room's queue is free.
func (rt *Runtime) RoomSend(ctx context.Context, user int64, room db.Room, content string) (RoomSent, error) {
	content, err := validContent(content)
	if err != nil {
		return RoomSent{}, err
	}
	var agents []db.RoomAgent
	if err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		var err error
		agents, err = s.RoomAgents(ctx, user, room.ID)
		return err
	}); err != nil {
		return RoomSent{}, err
	}
	answering := routeMessage(content, agents, room.DefaultAgentID)
	ids := make([]int64, len(answering))
	model := ""
	for i, a := range answering {
		ids[i] = a.ID
		if a.Model == "" && model == "" {
			model = rt.models.Default(ctx)
		}
	}
	posted, err := rt.store.PostToRoom(ctx, user, db.RoomPost{Room: room.ID, Content: content, Agents: ids,
		DefaultModel: model, Route: ChooseRoute, MaxPending: RoomPendingPerMember})
	if errors.Is(err, db.ErrRoomQueueFull) {
		return RoomSent{}, ErrRoomBusy
	}
	if err != nil {
		return RoomSent{}, err
	}
	out := RoomSent{User: posted.User, Answers: posted.Answers, Runs: posted.Runs}
	if len(out.Runs) > 0 {
		if r, ok := rt.kick(posted.Thread.ID); ok && r.ID == out.Runs[0].ID {
			out.Runs[0] = r
		}
	}
	return out, nil
}

// RoomPendingPerMember is how many answers one member may have queued,
// running or waiting in a room at once (their hand-ons included): the
// runs are the owner's, and one member must not fill the room's queue,
// which every member's page shows, for everyone. A message that asks no
// agent is always posted.
const RoomPendingPerMember = 10

// ErrRoomBusy refuses a message that asks agents for answers while its
// member already has RoomPendingPerMember of them waiting in the room.
var ErrRoomBusy = usererr.New(fmt.Sprintf("You already have %d answers waiting in this room: wait for them, "+
	"or stop one, before you ask again.", RoomPendingPerMember))

// ErrNotAsker refuses a room member's action on an answer that only its
// asker (or, for Stop, the room's owner) may take; its user message names
// who may.
var ErrNotAsker = errors.New("room: not the asker")

// RoomStop stops an answer of the room (run, queued or running): its
// asker or the room's owner may; anyone else is refused with ErrNotAsker
// ("Only <asker> or the room's owner can stop this answer."). A run of
// another thread is db.ErrNotFound.
func (rt *Runtime) RoomStop(ctx context.Context, user int64, room db.Room, run int64) error {
	var turn db.RoomTurn
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		var err error
		if room, err = s.RoomForMember(ctx, user, room.ID); err != nil {
			return err
		}
		turn, err = s.RoomRun(ctx, room.OwnerID, room.ThreadID, run)
		return err
	})
	if err != nil {
		return err
	}
	if !room.IsOwner() && (turn.AskedBy == nil || *turn.AskedBy != user) {
		return usererr.Wrap(ErrNotAsker, fmt.Sprintf("Only %s or the room's owner can stop this answer.", askerName(turn)))
	}
	_, err = rt.Cancel(ctx, room.OwnerID, run)
	return err
}

// askerName names the asker of a turn in a refusal.
func askerName(t db.RoomTurn) string {
	if t.Asker == "" {
		return "the member who asked"
	}
	return t.Asker
}

// RoomTurn is one answer of a room's queue: its run and message, the
// agent answering, the member who asked, its status (queued, running or
// waiting) and its mention depth.
type RoomTurn = db.RoomTurn

// RoomView is what a room's page shows of its conversation, read from one
// snapshot: the newest page of the line (or the page above a message),
// the room's agents, and its queue.
type RoomView struct {
	Room     db.Room
	Agents   []db.RoomAgent
	Messages []MessageItem // with speakers; oldest first
	More     bool          // older messages exist above
	Queue    []RoomTurn
}

// RoomView reads a room's line for a member: the newest PathPageSize
// messages, or with before (a message of the room) the page above it.
func (rt *Runtime) RoomView(ctx context.Context, user int64, room db.Room, before int64) (RoomView, error) {
	var v RoomView
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		var err error
		if v.Room, err = s.RoomForMember(ctx, user, room.ID); err != nil {
			return err
		}
		owner := v.Room.OwnerID
		t, err := s.Thread(ctx, owner, v.Room.ThreadID)
		if err != nil {
			return err
		}
		var msgs []db.Message
		if before > 0 {
			m, err := s.Message(ctx, owner, before)
			if err != nil {
				return err
			}
			if m.ThreadID != t.ID {
				return db.ErrNotFound
			}
			if m.ParentID != nil {
				if msgs, v.More, err = s.PathTo(ctx, owner, *m.ParentID, PathPageSize); err != nil {
					return err
				}
			}
		} else if msgs, v.More, err = s.ActivePath(ctx, owner, t.ID, PathPageSize); err != nil {
			return err
		}
		if v.Messages, err = messageItems(ctx, s, owner, t, msgs); err != nil {
			return err
		}
		if v.Agents, err = s.RoomAgents(ctx, user, v.Room.ID); err != nil {
			return err
		}
		v.Queue, err = s.RoomQueue(ctx, owner, t.ID)
		return err
	})
	if err != nil {
		return RoomView{}, fmt.Errorf("read room %d: %w", room.ID, err)
	}
	return v, nil
}

// roomLinePage caps what RoomMessagesAfter returns at once.
const roomLinePage = 200

// RoomMessagesAfter returns the messages of a room's line newer than after
// (a message id; 0: from the start), oldest first, at most 200: what a
// room's stream appends. A streaming answer comes with its run.
func (rt *Runtime) RoomMessagesAfter(ctx context.Context, user int64, room db.Room, after int64) ([]MessageItem, error) {
	var out []MessageItem
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		r, err := s.RoomForMember(ctx, user, room.ID)
		if err != nil {
			return err
		}
		t, err := s.Thread(ctx, r.OwnerID, r.ThreadID)
		if err != nil {
			return err
		}
		msgs, err := s.RoomLineAfter(ctx, r.OwnerID, t.ID, after, roomLinePage)
		if err != nil {
			return err
		}
		out, err = messageItems(ctx, s, r.OwnerID, t, msgs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read room %d: %w", room.ID, err)
	}
	return out, nil
}
