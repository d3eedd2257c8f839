package views

import (
	"context"
	"io"

	"github.com/a-h/templ"

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
	// id: a browser reconnecting by itself resumes after it, and app.js
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

// roomStreamURL is where a room's page opens its stream: after the last
// message it shows, following the answers it shows being written.
func roomStreamURL(room, after int64, live []int64) string {
	u := roomURL(room) + "/events?after=" + id(after)
	if len(live) > 0 {
		u += "&live="
		for i, r := range live {
			if i > 0 {
				u += ","
			}
			u += id(r)
		}
	}
	return u
}

// speakerOf is who wrote a room message, as it was named then.
func speakerOf(m db.Message) string { return "" }
