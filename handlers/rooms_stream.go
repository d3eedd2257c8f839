package handlers

import (
	"context"
	"errors"
	"html"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"

	"weft/chat"
	"weft/db"
	"weft/views"
)

// roomStreamStore is what a room's stream reads besides the runtime.
type roomStreamStore interface {
	RoomForMember(ctx context.Context, user, room int64) (db.Room, error)
	RoomQueue(ctx context.Context, owner, thread int64) ([]db.RoomTurn, error)
	bodyStore
}

// roomStreamRuntime is the conversation runtime as a room's stream uses
// it: the room's new messages, each answer's run events, and the notes
// that the room changed.
type roomStreamRuntime interface {
	RoomMessagesAfter(ctx context.Context, user int64, room db.Room, after int64) ([]chat.MessageItem, error)
	Follow(ctx context.Context, user, run int64, shown string, emit func(chat.FollowEvent) error) error
	WatchThread(thread int64) (<-chan struct{}, func())
}

// roomRecheck: a room's stream reads the member's membership (and the
// room's new messages) at every note about the room and at least this
// often, should a note be lost.
const roomRecheck = 3 * time.Second

// roomStreams serves GET /rooms/{id}/events, a room's one live stream per
// tab: the room's new messages, every answer being written (each under
// event names of its own message), and the end of the member's access.
type roomStreams struct {
	store    roomStreamStore
	rt       roomStreamRuntime
	models   modelCatalog
	closing  <-chan struct{}
	streams  *streamRegistry
	sessions interface{ Token(context.Context) string }
	recheck  time.Duration // 0: roomRecheck
}

// events serves GET /rooms/{id}/events?after=N: N is where the page's
// line resumes (its last message, or just before its oldest answer still
// being written); a browser reconnecting by itself says where the stream
// had got to (Last-Event-ID), so nothing is missed and little repeated.
func (h *roomStreams) events(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	room, err := h.store.RoomForMember(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	after := resumePoint(r, "after")
	ctx, es, done, ok := openUserStream(w, r, u.ID, h.streams, h.sessions, h.closing)
	if !ok {
		return
	}
	defer done()
	s := newRoomSession(h, u.ID, room, after, es)
	s.run(ctx)
}

// every is how often a room's stream reads the room without a note.
func (h *roomStreams) every() time.Duration {
	if h.recheck > 0 {
		return h.recheck
	}
	return roomRecheck
}

// resumePoint is the message after which a stream of messages (a room's, a
// thread's live watch) starts: the last id a browser reconnecting by itself
// got, else the query parameter param the page set.
func resumePoint(r *http.Request, param string) int64 {
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get(param)} {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	return 0
}

// roomSession is one open room stream.
type roomSession struct {
	h    *roomStreams
	user int64
	out  *muxStream
	poke chan struct{} // a follower saw its answer's status change or end
	wg   sync.WaitGroup

	mu   sync.Mutex
	room db.Room
	// after is the last message sent; pending the answers sent as
	// placeholders that have not ended yet (message ids), following the
	// runs followed (the runs of those answers).
	after     int64
	pending   map[int64]bool
	following map[int64]bool
	queue     string // the queue last sent (its HTML)
}

func newRoomSession(h *roomStreams, user int64, room db.Room, after int64, es *eventStream) *roomSession {
	return &roomSession{h: h, user: user, room: room, after: after, out: &muxStream{es: es},
		poke: make(chan struct{}, 1), pending: map[int64]bool{}, following: map[int64]bool{}}
}

// run sends the room's line after the resume point, then whatever changes,
// until the member's access ends, the browser leaves or the server shuts
// down.
func (s *roomSession) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		s.wg.Wait()
	}()
	s.mu.Lock()
	thread := s.room.ThreadID
	s.mu.Unlock()
	watchLoop(ctx, s.h.rt.WatchThread, thread, s.h.every(), s.poke, s.out, func() bool { return s.refresh(ctx, cancel) })
}

// refresh reads the room again: the membership first (gone: the stream
// says so and ends), then its new messages, which it sends, following the
// answers among them that are being written. false: the stream ends.
func (s *roomSession) refresh(ctx context.Context, cancel context.CancelFunc) bool {
	s.mu.Lock()
	roomID := s.room.ID
	s.mu.Unlock()
	room, err := s.h.store.RoomForMember(ctx, s.user, roomID)
	if errors.Is(err, db.ErrNotFound) {
		// Removed, left, or the room was deleted: at once, and nothing of
		// the room is sent after this (the answers' followers included).
		var b strings.Builder
		_ = views.RoomGone().Render(ctx, &b)
		_ = s.out.end(views.EventRoomGone, b.String())
		cancel()
		return false
	}
	if err != nil {
		if ctx.Err() == nil {
			slog.Warn("room stream: read membership", "room", roomID, "err", err)
		}
		return ctx.Err() == nil // the next round tries again
	}
	s.mu.Lock()
	s.room = room
	after := s.after
	s.mu.Unlock()
	items, err := s.h.rt.RoomMessagesAfter(ctx, s.user, room, after)
	if err != nil {
		if ctx.Err() == nil {
			slog.Warn("room stream: read messages", "room", roomID, "err", err)
		}
		return ctx.Err() == nil
	}
	if !s.append(ctx, cancel, room, items) {
		return false
	}
	if len(items) > 0 {
		s.nudge() // a long line comes a page at a time
	}
	return s.sendQueue(ctx, room)
}

// append sends new messages of the room's line, following the answers
// among them being written.
func (s *roomSession) append(ctx context.Context, cancel context.CancelFunc, room db.Room, items []chat.MessageItem) bool {
	if len(items) == 0 {
		return true
	}
	vs := messageViews(ctx, s.h.store, room.OwnerID, items, s.h.models.ChatModels(ctx))
	for _, v := range vs {
		var b strings.Builder
		if err := views.RoomMessage(room.ID, v).Render(ctx, &b); err != nil {
			slog.Warn("room stream: render message", "message", v.Message.ID, "err", err)
			return false
		}
		m := v.Message
		live := v.Run != nil && m.Status == db.MsgStreaming
		s.mu.Lock()
		s.after = max(s.after, m.ID)
		if live {
			s.pending[m.ID] = true
		}
		resume := s.resumeLocked()
		s.mu.Unlock()
		if s.out.sendWithID(views.EventRoomAppend, resume, b.String()) != nil {
			return false
		}
		if live {
			// After its placeholder: its first event finds its listeners.
			s.follow(ctx, cancel, room, m.ID, v.Run.ID, v.Run.Status)
		}
	}
	return true
}

// sendQueue sends the room's queue when it differs from the one shown.
func (s *roomSession) sendQueue(ctx context.Context, room db.Room) bool {
	turns, err := s.h.store.RoomQueue(ctx, room.OwnerID, room.ThreadID)
	if err != nil {
		if ctx.Err() == nil {
			slog.Warn("room stream: read queue", "room", room.ID, "err", err)
		}
		return ctx.Err() == nil
	}
	var b strings.Builder
	if err := views.RoomQueue(turns).Render(ctx, &b); err != nil {
		return false
	}
	s.mu.Lock()
	same := b.String() == s.queue
	s.queue = b.String()
	s.mu.Unlock()
	return same || s.out.send(views.EventRoomQueue, b.String()) == nil
}

// resumeLocked is where a reconnection resumes: after the last message
// sent, or before the oldest answer still shown being written (its final
// form, sent again, replaces the placeholder).
func (s *roomSession) resumeLocked() int64 {
	r := s.after
	for m := range s.pending {
		r = min(r, m-1)
	}
	return r
}

// follow relays one answer's run events, under its message's event names,
// until its final message (once per run).
func (s *roomSession) follow(ctx context.Context, cancel context.CancelFunc, room db.Room, msg, run int64, shown string) {
	s.mu.Lock()
	if s.following[run] {
		s.mu.Unlock()
		return
	}
	s.following[run] = true
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f := &roomFollower{s: s, ctx: ctx, room: room, msg: msg, run: run, shown: shown}
		for {
			err := s.h.rt.Follow(ctx, room.OwnerID, run, f.shown, f.frame)
			switch {
			case f.done || ctx.Err() != nil:
				return
			case errors.Is(err, errStreamEnded):
				cancel() // the browser left: the whole stream ends
				return
			case errors.Is(err, db.ErrNotFound):
				// The run is gone (its room with it: the session ends).
				s.mu.Lock()
				delete(s.following, run)
				s.mu.Unlock()
				return
			case err != nil:
				// A read failed: again after the recheck interval, from a
				// fresh snapshot. The session's rounds append only what is
				// new, so nothing else would follow this answer again.
				slog.Warn("room stream: follow", "run", run, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(s.h.every()):
				}
				continue
			}
			// Dropped for lagging: again, from a fresh snapshot.
		}
	}()
}

// nudge wakes the session's loop (coalesced).
func (s *roomSession) nudge() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// roomFollower relays the events of one answer of a room.
type roomFollower struct {
	s        *roomSession
	ctx      context.Context
	room     db.Room
	msg, run int64
	shown    string // the status the placeholder shows
	done     bool
	buf      strings.Builder
}

// name is the room event of this answer for a run stream's event.
func (f *roomFollower) name(event string) string { return views.RoomEvent(event, f.msg) }

// frame sends one event of the answer's run; payloads are escaped HTML.
func (f *roomFollower) frame(ev chat.FollowEvent) error {
	ctx, out := f.ctx, f.s.out
	switch ev.Kind {
	case chat.FollowStatus:
		f.shown = ev.Status
		f.s.nudge() // the queue shows it
		return f.render(ctx, f.name(views.EventStatus), views.RoomRunBar(f.room.ID, f.run, ev.Status))
	case chat.FollowSnapshot:
		return out.send(f.name(views.EventSnapshot), html.EscapeString(ev.Text))
	case chat.FollowSnapshotThinking:
		return out.send(f.name(views.EventSnapshotThinking), html.EscapeString(ev.Text))
	case chat.FollowDelta:
		return out.send(f.name(views.EventDelta), html.EscapeString(ev.Text))
	case chat.FollowThinking:
		return out.send(f.name(views.EventThinking), html.EscapeString(ev.Text))
	case chat.FollowTrace:
		return f.render(ctx, f.name(views.EventTrace), views.InRoom(f.room.ID, views.Trace(ev.Steps, true)))
	case chat.FollowDone:
		f.done = true
		defer f.s.nudge()
		f.buf.Reset()
		if ev.Item != nil {
			vs := messageViews(ctx, f.s.h.store, f.room.OwnerID, []chat.MessageItem{*ev.Item}, f.s.h.models.ChatModels(ctx))
			if err := views.RoomMessage(f.room.ID, vs[0]).Render(ctx, &f.buf); err != nil {
				return err
			}
		}
		f.s.mu.Lock()
		delete(f.s.pending, f.msg)
		resume := f.s.resumeLocked()
		f.s.mu.Unlock()
		return out.sendWithID(f.name(views.EventDone), resume, f.buf.String())
	}
	return nil // heartbeats: the session sends its own
}

// render sends c as one event.
func (f *roomFollower) render(ctx context.Context, event string, c templ.Component) error {
	f.buf.Reset()
	if err := c.Render(ctx, &f.buf); err != nil {
		return err
	}
	return f.s.out.send(event, f.buf.String())
}
