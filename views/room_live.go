package views

import (
	"context"
	"io"
	"strconv"
	"unicode"

	"github.com/a-h/templ"

	"weft/chat"
	"weft/db"
)

// Names of the events of a room's one stream (GET /rooms/{id}/events). The
// room-wide ones carry the room's new messages, its queue and the end of
// the member's access; every answer being written gets the run stream's
// events (EventDelta …) under names of its own, RoomEvent(EventDelta,
// message id), so that each placeholder's listeners swap only their own
// text, all over one connection.
const (
	// EventRoomAppend adds messages to the end of the room's line (a
	// placeholder for an answer being written). Its SSE id is the message
	// id: a browser reconnecting by itself resumes after it, and rooms.js
	// drops an append of a message the page already shows.
	EventRoomAppend = "room-append"
	// EventRoomQueue replaces the room's queue of answers.
	EventRoomQueue = "room-queue"
	// EventRoomGone says the member may no longer see the room and closes
	// the stream (sse-close).
	EventRoomGone = "room-gone"
)

// RoomEvent is the name of a run stream's event (EventDelta, EventDone …)
// of the room's answer msg, e.g. "delta-42".
func RoomEvent(event string, msg int64) string { return event + "-" + id(msg) }

// MsgRoomGone is what a member sees when their access to an open room
// ends (removed, left, or the room deleted).
const MsgRoomGone = "You are no longer a member of this room."

type roomKey struct{}

// InRoom renders c as part of room's page: the controls of its answers
// (Stop, approvals, questions) post to the room's routes, which check the
// member's rights, instead of the thread's, which only the room's owner
// could use.
func InRoom(room int64, c templ.Component) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		return c.Render(context.WithValue(ctx, roomKey{}, room), w)
	})
}

// roomOf is the room being rendered (0: none, a thread).
func roomOf(ctx context.Context) int64 {
	r, _ := ctx.Value(roomKey{}).(int64)
	return r
}

// roomURL is the path of a room.
func roomURL(room int64) string { return "/rooms/" + id(room) }

// stepURL is where an approval's decision or a question's answers go:
// the step's own route in a thread, the room's in a room (verb "decide"
// or "answer").
func stepURL(ctx context.Context, s db.Step, verb string) string {
	if room := roomOf(ctx); room != 0 {
		return roomURL(room) + "/runs/" + id(s.RunID) + "/steps/" + id(s.ID) + "/" + verb
	}
	return "/steps/" + id(s.ID) + "/" + verb
}

// RoomResumePoint is where the stream of a room's page starts: after the
// last message it shows or, when it shows answers being written, just
// before the oldest of them. Those come again first, in their state of
// the moment (rooms.js swaps each in place of the one shown), so an answer
// that ended between the page and its stream is shown ended.
func RoomResumePoint(ms []MessageView) int64 {
	if len(ms) == 0 {
		return 0
	}
	r := ms[len(ms)-1].Message.ID
	for _, m := range ms {
		if m.Run != nil && m.Message.Status == db.MsgStreaming {
			r = min(r, m.Message.ID-1)
		}
	}
	return r
}

// speakerOf is who wrote a room message, as it was named then, and
// whether a member or an agent.
func speakerOf(m db.Message) string {
	name, _ := chat.SpeakerOf(m)
	return name
}

func speakerKindOf(m db.Message) string {
	_, kind := chat.SpeakerOf(m)
	return kind
}

// turnLabel is a queued answer's state and, unless that names them
// already, who asked for it.
func turnLabel(t db.RoomTurn) string {
	s := turnStatusLabel(t)
	if t.Asker != "" && t.Status != db.RunWaiting {
		s += ", for " + t.Asker
	}
	return s
}

// initial is the first letter of a name, upper case, for its avatar.
func initial(name string) string {
	for _, r := range name {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return string(unicode.ToUpper(r))
		}
	}
	return "?"
}

// avatarTint is which of app.css's avatar tints (1–3) a member's name
// gets: by its initial, so the same name always gets the same tint and
// names of neighbouring letters differ.
func avatarTint(name string) string {
	r := []rune(initial(name))[0]
	return strconv.Itoa(int(r)%3 + 1)
}

// turnStatusLabel says where a room's answer is, naming who it waits for.
func turnStatusLabel(t db.RoomTurn) string {
	switch t.Status {
	case db.RunQueued:
		return "queued"
	case db.RunRunning:
		return "answering"
	case db.RunWaiting:
		if t.Asker != "" {
			return "waiting for " + t.Asker
		}
		return "waiting"
	}
	return t.Status
}
