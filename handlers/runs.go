package handlers

import (
	"context"
	"fmt"
	"html"
	"net/http"

	"weft/chat"
	"weft/db"
	"weft/views"
)

type runStore interface {
	Run(ctx context.Context, user, id int64) (db.Run, error)
	bodyStore
}

type runtime interface {
	Send(ctx context.Context, user int64, in chat.Input) (db.Sent, error)
	Retry(ctx context.Context, user, assistantMsg int64, model string) (db.Sent, error)
	Edit(ctx context.Context, user, message int64, content string) (db.Sent, error)
	Continue(ctx context.Context, user, assistantMsg int64) (db.Sent, error)
	DeleteMessage(ctx context.Context, user, message int64) (db.DeletedSubtree, error)
	DeleteThread(ctx context.Context, user, thread int64) ([]string, error)
	Cancel(ctx context.Context, user, run int64) (db.Run, error)
	Follow(ctx context.Context, user, run int64, shown string, emit func(chat.FollowEvent) error) error
	TitleChanged(thread int64) (<-chan struct{}, func())
	Compact(ctx context.Context, user, thread int64) (db.Message, error)
	ContextGauge(ctx context.Context, user, thread int64) (chat.Gauge, error)
	ThreadView(ctx context.Context, user, thread, at int64) (chat.ThreadView, error)
	History(ctx context.Context, user, thread, before int64) (chat.HistoryView, error)
}

// runs serves a run's event stream and its stop button.
type runs struct {
	store   runStore
	models  modelCatalog
	rt      runtime
	closing <-chan struct{} // closed when the server shuts down
	// streams caps each user's open streams and ends them at logout.
	streams  *streamRegistry
	sessions interface{ Token(context.Context) string }
}

// events serves GET /runs/{id}/events: the current state of the run first,
// then live events, and the final message last. It works for queued runs,
// runs executing here, runs executing on another instance (from the
// database, at flush granularity) and finished runs (chat.Runtime.Follow).
func (h *runs) events(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if _, err := h.store.Run(r.Context(), u.ID, id); err != nil {
		storeError(w, r, err)
		return
	}
	ctx, es, done, ok := openUserStream(w, r, u.ID, h.streams, h.sessions, h.closing)
	if !ok {
		return
	}
	defer done()
	// The status the page already shows is not sent again: swapping the run
	// bar for nothing could swallow a click on its Stop button.
	_ = h.rt.Follow(ctx, u.ID, id, r.URL.Query().Get("shown"), func(ev chat.FollowEvent) error {
		return h.frame(ctx, es, u.ID, id, ev)
	}) // the browser reconnects when it needs to
}

// frame writes one event of run's stream; payloads are escaped HTML.
func (h *runs) frame(ctx context.Context, es *eventStream, user, run int64, ev chat.FollowEvent) error {
	switch ev.Kind {
	case chat.FollowStatus:
		return es.sendComponent(ctx, views.EventStatus, views.RunBar(run, ev.Status))
	case chat.FollowSnapshot:
		return es.send(views.EventSnapshot, html.EscapeString(ev.Text))
	case chat.FollowSnapshotThinking:
		return es.send(views.EventSnapshotThinking, html.EscapeString(ev.Text))
	case chat.FollowDelta:
		return es.send(views.EventDelta, html.EscapeString(ev.Text))
	case chat.FollowThinking:
		return es.send(views.EventThinking, html.EscapeString(ev.Text))
	case chat.FollowTrace:
		return es.sendComponent(ctx, views.EventTrace, views.Trace(ev.Steps, true))
	case chat.FollowHeartbeat:
		return es.comment()
	case chat.FollowDone:
		if ev.Item == nil {
			return es.send(views.EventDone, "")
		}
		vs := messageViews(ctx, h.store, user, []chat.MessageItem{*ev.Item}, h.models.ChatModels(ctx))
		return es.sendComponent(ctx, views.EventDone, views.MessageItem(vs[0]))
	}
	return nil
}

// cancel serves POST /runs/{id}/cancel: Stop on a running answer, Cancel on
// a queued one.
func (h *runs) cancel(w http.ResponseWriter, r *http.Request) {
	u, _ := currentUser(r)
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	run, err := h.rt.Cancel(r.Context(), u.ID, id)
	if err != nil {
		storeError(w, r, err)
		return
	}
	if isHTMX(r) {
		w.WriteHeader(http.StatusNoContent) // the event stream shows the outcome
		return
	}
	redirect(w, r, fmt.Sprintf("/t/%d", run.ThreadID))
}
