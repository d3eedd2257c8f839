package handlers

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"strings"
	"time"

	"weft/chat"
	"weft/db"
	"weft/views"
)

type runStore interface {
	Run(ctx context.Context, user, id int64) (db.Run, error)
	Message(ctx context.Context, user, id int64) (db.Message, error)
	Thread(ctx context.Context, user, id int64) (db.Thread, error)
	Branches(ctx context.Context, user, thread int64, msgs []db.Message) (map[int64]db.Branch, error)
	Steps(ctx context.Context, user, run int64) ([]db.Step, error)
	StepsOfMessages(ctx context.Context, user int64, msgs []int64) (map[int64]db.RunSteps, error)
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
	Subscribe(run int64) (chat.Snapshot, <-chan chat.Event, func(), bool)
	TitleChanged(thread int64) (<-chan struct{}, func())
	Compact(ctx context.Context, user, thread int64) (db.Message, error)
	ContextGauge(ctx context.Context, user, thread int64) (chat.Gauge, error)
	MessageItems(ctx context.Context, user int64, t db.Thread, msgs []db.Message) ([]chat.MessageItem, error)
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

const (
	heartbeatEvery = 15 * time.Second
	pollLocalEvery = 50 * time.Millisecond // is a queued run live here yet?
	pollDBEvery    = time.Second           // state of runs that are not live here
	maxCoalesce    = 64                    // deltas joined into one event
)

// events serves GET /runs/{id}/events: the current state of the run first,
// then live events, and the final message last. It works for queued runs,
// runs executing here, runs executing on another instance (from the
// database, at flush granularity) and finished runs.
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
	ctx, release, ok := h.streams.open(r.Context(), u.ID, h.sessions.Token(r.Context()))
	if !ok {
		w.Header().Set("Retry-After", "30")
		errorPage(w, r, http.StatusTooManyRequests, msgTooManyStreams)
		return
	}
	defer release()
	es, err := startEventStream(w)
	if err != nil {
		return
	}
	beat := time.NewTicker(heartbeatEvery)
	defer beat.Stop()
	// The status the page already shows is not sent again: swapping the run
	// bar for nothing could swallow a click on its Stop button.
	lastStatus, lastRemote, lastTrace := r.URL.Query().Get("shown"), "", ""
	var nextDB time.Time
	for {
		if snap, events, unsubscribe, ok := h.rt.Subscribe(id); ok {
			err := h.relay(ctx, es, u.ID, snap, lastStatus, events, beat.C)
			unsubscribe()
			_ = err // the browser reconnects when it needs to
			return
		}
		if now := time.Now(); now.After(nextDB) {
			nextDB = now.Add(pollDBEvery)
			run, err := h.store.Run(ctx, u.ID, id)
			if err != nil {
				return
			}
			if !run.Active() {
				_ = h.sendDone(ctx, es, u.ID, run)
				return
			}
			if run.Status != lastStatus {
				lastStatus = run.Status
				if es.sendComponent(ctx, views.EventStatus, views.RunBar(run.ID, run.Status)) != nil {
					return
				}
			}
			if run.Kind == db.RouteAgent {
				if sig, err := h.sendTraceIfChanged(ctx, es, u.ID, run.ID, lastTrace); err != nil {
					return
				} else {
					lastTrace = sig
				}
			}
			if run.Status != db.RunQueued && run.AssistantMessageID != nil {
				// Running on another instance: follow its flushed text.
				m, err := h.store.Message(ctx, u.ID, *run.AssistantMessageID)
				if err == nil && m.Content != lastRemote {
					lastRemote = m.Content
					if es.send(views.EventSnapshot, html.EscapeString(m.Content)) != nil {
						return
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-h.closing:
			return
		case <-beat.C:
			if es.comment() != nil {
				return
			}
		case <-time.After(pollLocalEvery):
		}
	}
}

// relay forwards a live run's events, joining deltas that queue up so a
// slow connection gets fewer, larger writes.
func (h *runs) relay(ctx context.Context, es *eventStream, user int64, snap chat.Snapshot, shown string, events <-chan chat.Event, beat <-chan time.Time) error {
	if snap.Status != shown {
		shown = snap.Status
		if err := es.sendComponent(ctx, views.EventStatus, views.RunBar(snap.RunID, snap.Status)); err != nil {
			return err
		}
	}
	if err := es.send(views.EventSnapshot, html.EscapeString(snap.Content)); err != nil {
		return err
	}
	if err := es.send(views.EventSnapshotThinking, html.EscapeString(snap.Thinking)); err != nil {
		return err
	}
	if snap.Kind == db.RouteAgent {
		if _, err := h.sendTraceIfChanged(ctx, es, user, snap.RunID, ""); err != nil {
			return err
		}
	}
	var text, thinking strings.Builder
	flush := func() error {
		if thinking.Len() > 0 {
			if err := es.send(views.EventThinking, html.EscapeString(thinking.String())); err != nil {
				return err
			}
			thinking.Reset()
		}
		if text.Len() > 0 {
			if err := es.send(views.EventDelta, html.EscapeString(text.String())); err != nil {
				return err
			}
			text.Reset()
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.closing:
			return errors.New("server shutting down")
		case <-beat:
			if err := es.comment(); err != nil {
				return err
			}
		case ev, open := <-events:
			for n := 1; ; n++ {
				if !open {
					// Dropped for lagging: end the response; the browser
					// reconnects and starts from a fresh snapshot.
					return flush()
				}
				switch ev.Kind {
				case chat.EventDelta:
					text.WriteString(ev.Text)
				case chat.EventThinking:
					thinking.WriteString(ev.Text)
				case chat.EventStatus:
					if ev.Status != shown {
						shown = ev.Status
						if err := flush(); err != nil {
							return err
						}
						if err := es.sendComponent(ctx, views.EventStatus, views.RunBar(snap.RunID, ev.Status)); err != nil {
							return err
						}
					}
				case chat.EventReset:
					// The round's text moved into its step.
					text.Reset()
					thinking.Reset()
					if err := es.send(views.EventSnapshot, ""); err != nil {
						return err
					}
					if err := es.send(views.EventSnapshotThinking, ""); err != nil {
						return err
					}
				case chat.EventStep:
					if err := flush(); err != nil {
						return err
					}
					if _, err := h.sendTraceIfChanged(ctx, es, user, snap.RunID, ""); err != nil {
						return err
					}
				case chat.EventDone:
					if err := flush(); err != nil {
						return err
					}
					return h.sendFinal(ctx, es, user, ev.Message)
				}
				if n >= maxCoalesce || !h.next(events, &ev, &open) {
					break
				}
			}
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// sendTraceIfChanged renders an agent run's trace from its steps and sends
// it unless it is the one last sent (sig); it returns the new signature.
func (h *runs) sendTraceIfChanged(ctx context.Context, es *eventStream, user, run int64, sig string) (string, error) {
	steps, err := h.store.Steps(ctx, user, run)
	if err != nil {
		return sig, nil // the next poll tries again
	}
	now := traceSignature(steps)
	if now == sig {
		return sig, nil
	}
	return now, es.sendComponent(ctx, views.EventTrace, views.Trace(steps, true))
}

func traceSignature(steps []db.Step) string {
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "%d:%s:%d;", s.ID, s.Status, s.UpdatedAt.UnixNano())
	}
	return b.String()
}

// next takes another event if one is already waiting.
func (h *runs) next(events <-chan chat.Event, ev *chat.Event, open *bool) bool {
	select {
	case *ev, *open = <-events:
		return true
	default:
		return false
	}
}

// sendDone sends the final message of a finished run.
func (h *runs) sendDone(ctx context.Context, es *eventStream, user int64, run db.Run) error {
	if run.AssistantMessageID == nil {
		return es.send(views.EventDone, "")
	}
	m, err := h.store.Message(ctx, user, *run.AssistantMessageID)
	if err != nil {
		return es.send(views.EventDone, "")
	}
	return h.sendFinal(ctx, es, user, m)
}

func (h *runs) sendFinal(ctx context.Context, es *eventStream, user int64, m db.Message) error {
	v := views.MessageView{MessageItem: chat.MessageItem{Message: m}, Models: h.models.ChatModels(ctx)}
	if m.Metadata.Route == db.RouteAgent {
		if rs, err := h.store.StepsOfMessages(ctx, user, []int64{m.ID}); err == nil {
			if x, ok := rs[m.ID]; ok {
				v.Steps, v.AgentRun = x.Steps, &x.Run
			}
		}
	}
	if b, err := h.store.Branches(ctx, user, m.ThreadID, []db.Message{m}); err == nil {
		v.Branch = b[m.ID]
	}
	if m.Status == db.MsgComplete {
		// The page may still show the provisional title even when the
		// generated one was stored before this event was rendered (it is
		// written right after the answer): the first answer of a thread
		// asks for the title, which answers at once when it is there.
		if t, err := h.store.Thread(ctx, user, m.ThreadID); err == nil && t.TitleState != db.TitleUser {
			v.AwaitTitle = t.TitleState == db.TitleProvisional || h.firstAnswer(ctx, user, m)
		}
	}
	vs := []views.MessageView{v}
	fillBodies(ctx, h.store, user, vs)
	return es.sendComponent(ctx, views.EventDone, views.MessageItem(vs[0]))
}

// firstAnswer reports whether m answers the thread's first message.
func (h *runs) firstAnswer(ctx context.Context, user int64, m db.Message) bool {
	if m.ParentID == nil {
		return false
	}
	q, err := h.store.Message(ctx, user, *m.ParentID)
	return err == nil && q.ParentID == nil
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
