package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"weft/chat"
	"weft/db"
	"weft/views"
)

// threadWatchStore is what a thread page's live watch reads besides the
// runtime: the thread (its owner's) and the answers' stored renderings.
type threadWatchStore interface {
	threadReader
	bodyStore
}

// threadWatchRuntime is the conversation runtime as a live watch uses it:
// the tail of the thread's active branch, and the notes that it changed.
type threadWatchRuntime interface {
	ThreadTail(ctx context.Context, user, thread, shown int64) (chat.ThreadTail, error)
	WatchThread(thread int64) (<-chan struct{}, func())
}

// threadRecheck: a live watch reads its thread at every note about it and
// at least this often. Notes are lost while an instance's listener
// reconnects (every watcher is woken then), or when the statement that
// sends a transaction's notes right after its commit fails (db.InTx logs
// it; nobody is woken): this is a last resort.
const threadRecheck = 30 * time.Second

// threadWatches serves GET /t/{id}/watch, a thread page's live watch
// (issue 21): the messages another tab or device adds to the branch the
// page shows, or a notice when the branch moved elsewhere. An answer comes
// as its placeholder, which opens its own run stream (DESIGN §6).
type threadWatches struct {
	store    threadWatchStore
	rt       threadWatchRuntime
	models   modelCatalog
	closing  <-chan struct{}
	streams  *streamRegistry
	sessions interface{ Token(context.Context) string }
}

// watch serves GET /t/{id}/watch?leaf=N&run=R: N is the last message the
// page shows (0: none), R its run when the page shows it being written. A
// browser reconnecting by itself says where the watch had got to
// (Last-Event-ID).
func (h *threadWatches) watch(w http.ResponseWriter, r *http.Request) {
	u, t, ok := pathThread(w, r, h.store)
	if !ok {
		return
	}
	s := &threadWatch{h: h, user: u.ID, thread: t.ID, shown: resumePoint(r, "leaf"), poke: make(chan struct{}, 1)}
	if r.Header.Get("Last-Event-ID") == "" {
		s.run, _ = strconv.ParseInt(r.URL.Query().Get("run"), 10, 64)
	}
	ctx, es, done, ok := openUserStream(w, r, u.ID, h.streams, h.sessions, h.closing)
	if !ok {
		return
	}
	defer done()
	s.out = &muxStream{es: es}
	watchLoop(ctx, h.rt.WatchThread, t.ID, threadRecheck, s.poke, s.out, func() bool { return s.refresh(ctx) })
}

// threadWatch is one open live watch. Only its loop touches it.
type threadWatch struct {
	h            *threadWatches
	user, thread int64
	out          *muxStream
	poke         chan struct{}
	// shown is the last message the page shows, run its run when shown
	// being written (0: none or unknown); changed says the page's notice
	// says that the branch moved elsewhere.
	shown, run int64
	changed    bool
}

// refresh reads the thread's active branch and sends what the page lacks:
// the messages after its last one, that one again when a new run writes it,
// or the notice that the branch moved elsewhere. false: the watch ends.
func (s *threadWatch) refresh(ctx context.Context) bool {
	tail, err := s.h.rt.ThreadTail(ctx, s.user, s.thread, s.shown)
	if errors.Is(err, db.ErrNotFound) {
		var b strings.Builder
		_ = views.ThreadGone().Render(ctx, &b)
		_ = s.out.end(views.EventThreadGone, b.String())
		return false
	}
	if err != nil {
		if ctx.Err() == nil {
			slog.Warn("thread watch: read", "thread", s.thread, "err", err)
		}
		return ctx.Err() == nil // the next round tries again
	}
	if !s.notice(ctx, !tail.Extends) {
		return false
	}
	items := tail.Items
	if sh := tail.Shown; sh != nil && sh.Run != nil && sh.Run.ID != s.run {
		items = append([]chat.MessageItem{*sh}, items...)
	}
	if len(items) == 0 {
		return true
	}
	for _, v := range messageViews(ctx, s.h.store, s.user, items, s.h.models.ChatModels(ctx)) {
		var b strings.Builder
		if err := views.ThreadLiveItem(v).Render(ctx, &b); err != nil {
			slog.Warn("thread watch: render message", "message", v.Message.ID, "err", err)
			return false
		}
		s.shown, s.run = v.Message.ID, 0
		if v.Run != nil && v.Message.Status == db.MsgStreaming {
			s.run = v.Run.ID
		}
		if s.out.sendWithID(views.EventThreadAppend, s.shown, b.String()) != nil {
			return false
		}
	}
	if len(tail.Items) == chat.PathPageSize {
		// A long tail comes a page at a time.
		select {
		case s.poke <- struct{}{}:
		default:
		}
	}
	return true
}

// notice shows (on) or takes away the page's notice that the thread's
// branch moved elsewhere, when it is not so already.
func (s *threadWatch) notice(ctx context.Context, on bool) bool {
	if on == s.changed {
		return true
	}
	s.changed = on
	var b strings.Builder
	if on {
		if err := views.ThreadChanged(s.thread).Render(ctx, &b); err != nil {
			return false
		}
	}
	return s.out.send(views.EventThreadChanged, b.String()) == nil
}
