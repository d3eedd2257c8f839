package chat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"weft/db"
)

// FollowKind says what a FollowEvent carries.
type FollowKind int

// Kinds of events Follow emits, each one event of the run's stream.
const (
	FollowStatus           FollowKind = iota + 1 // Status: the status the run shows changed
	FollowSnapshot                               // Text: the answer so far, replacing what is shown
	FollowSnapshotThinking                       // Text: the thinking so far, replacing what is shown
	FollowDelta                                  // Text: answer text appended
	FollowThinking                               // Text: thinking text appended
	FollowTrace                                  // Steps: an agent run's steps changed
	FollowDone                                   // Item: the final answer (nil: none to show)
	FollowHeartbeat                              // nothing happened for a while; keep the connection
)

// FollowEvent is one thing Follow reports about a run.
type FollowEvent struct {
	Kind   FollowKind
	Status string
	Text   string
	Steps  []db.Step
	Item   *MessageItem
}

const (
	followHeartbeat = 15 * time.Second
	pollLocalEvery  = 50 * time.Millisecond // is a queued run live here yet?
	pollDBEvery     = time.Second           // state of runs that are not live here
	maxCoalesce     = 64                    // deltas joined into one event
)

// Follow reports one of user's runs to emit from its current state to its
// end: a run executing here live (deltas that queue up joined, so a slow
// reader gets fewer, larger events), a run queued or executing on another
// instance from the database (status, flushed text and agent steps, at
// flush granularity), and a finished run by its final answer. shown is the
// status the reader already shows, not sent again. Follow returns nil after
// FollowDone or when a lagging reader is dropped (it reconnects and starts
// from a fresh snapshot), emit's error, or ctx's when it ends first.
func (rt *Runtime) Follow(ctx context.Context, user, run int64, shown string, emit func(FollowEvent) error) error {
	// Ownership first, in one query (no snapshot for one read).
	if _, err := rt.store.Run(ctx, user, run); err != nil {
		return fmt.Errorf("read run %d: %w", run, err)
	}
	f := &follower{rt: rt, ctx: ctx, user: user, run: run, shown: shown, emit: emit,
		beat: time.NewTicker(followHeartbeat)}
	defer f.beat.Stop()
	var nextDB time.Time
	for {
		if snap, events, unsubscribe, ok := rt.Subscribe(run); ok {
			defer unsubscribe()
			return f.live(snap, events)
		}
		if now := time.Now(); now.After(nextDB) {
			nextDB = now.Add(pollDBEvery)
			if done, err := f.poll(); done || err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.beat.C:
			if err := emit(FollowEvent{Kind: FollowHeartbeat}); err != nil {
				return err
			}
		case <-time.After(pollLocalEvery):
		}
	}
}

// follower is the state of one Follow.
type follower struct {
	rt        *Runtime
	ctx       context.Context
	user, run int64
	emit      func(FollowEvent) error
	beat      *time.Ticker
	// shown is the status last reported; remote and trace the text and
	// steps last reported of a run followed from the database.
	shown, remote, trace string
	text, thinking       strings.Builder // live deltas not reported yet
}

// polled is a run as read from the database.
type polled struct {
	run    db.Run
	steps  []db.Step
	answer *db.Message // the text flushed so far, when it is running
}

// pollRun reads run, with its steps and flushed answer, from one snapshot.
func (rt *Runtime) pollRun(ctx context.Context, user, run int64) (polled, error) {
	var p polled
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		var err error
		if p.run, err = s.Run(ctx, user, run); err != nil || !p.run.Active() {
			return err
		}
		if p.run.Kind == db.RouteAgent {
			p.steps, _ = s.Steps(ctx, user, run) // a failed read: the next poll tries again
		}
		if p.run.Status != db.RunQueued && p.run.AssistantMessageID != nil {
			if m, err := s.Message(ctx, user, *p.run.AssistantMessageID); err == nil {
				p.answer = &m
			}
		}
		return nil
	})
	if err != nil {
		return polled{}, fmt.Errorf("read run %d: %w", run, err)
	}
	return p, nil
}

// poll reports what changed of a run that is not live here; done says the
// run ended (and its final answer was reported).
func (f *follower) poll() (done bool, err error) {
	p, err := f.rt.pollRun(f.ctx, f.user, f.run)
	if err != nil {
		return true, err
	}
	if !p.run.Active() {
		return true, f.done(p.run.AssistantMessageID, nil)
	}
	if err := f.status(p.run.Status); err != nil {
		return true, err
	}
	if p.run.Kind == db.RouteAgent && p.steps != nil {
		if sig := traceSignature(p.steps); sig != f.trace {
			f.trace = sig
			if err := f.emit(FollowEvent{Kind: FollowTrace, Steps: p.steps}); err != nil {
				return true, err
			}
		}
	}
	if p.answer != nil && p.answer.Content != f.remote {
		// Running on another instance: follow its flushed text.
		f.remote = p.answer.Content
		if err := f.emit(FollowEvent{Kind: FollowSnapshot, Text: p.answer.Content}); err != nil {
			return true, err
		}
	}
	return false, nil
}

func traceSignature(steps []db.Step) string {
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "%d:%s:%d;", s.ID, s.Status, s.UpdatedAt.UnixNano())
	}
	return b.String()
}

// status reports the run's status unless it is the one shown.
func (f *follower) status(s string) error {
	if s == f.shown {
		return nil
	}
	f.shown = s
	return f.emit(FollowEvent{Kind: FollowStatus, Status: s})
}

// steps reports an agent run's steps as they are now (none yet: nothing).
func (f *follower) steps() error {
	var steps []db.Step
	err := f.rt.store.ReadSnapshot(f.ctx, func(s *db.DB) error {
		var err error
		steps, err = s.Steps(f.ctx, f.user, f.run)
		return err
	})
	if err != nil || len(steps) == 0 {
		return nil // a failed read: the next step event tries again
	}
	return f.emit(FollowEvent{Kind: FollowTrace, Steps: steps})
}

// live reports a run executing here: its state when joined, then its
// events.
func (f *follower) live(snap Snapshot, events <-chan Event) error {
	if err := f.status(snap.Status); err != nil {
		return err
	}
	if err := f.emit(FollowEvent{Kind: FollowSnapshot, Text: snap.Content}); err != nil {
		return err
	}
	if err := f.emit(FollowEvent{Kind: FollowSnapshotThinking, Text: snap.Thinking}); err != nil {
		return err
	}
	if snap.Kind == db.RouteAgent {
		if err := f.steps(); err != nil {
			return err
		}
	}
	for {
		select {
		case <-f.ctx.Done():
			return f.ctx.Err()
		case <-f.beat.C:
			if err := f.emit(FollowEvent{Kind: FollowHeartbeat}); err != nil {
				return err
			}
		case ev, open := <-events:
			for n := 1; ; n++ {
				if !open {
					return f.flush() // dropped for lagging
				}
				if done, err := f.apply(ev); done || err != nil {
					return err
				}
				if n >= maxCoalesce || !nextEvent(events, &ev, &open) {
					break
				}
			}
			if err := f.flush(); err != nil {
				return err
			}
		}
	}
}

// nextEvent takes another event if one is already waiting.
func nextEvent(events <-chan Event, ev *Event, open *bool) bool {
	select {
	case *ev, *open = <-events:
		return true
	default:
		return false
	}
}

// apply takes one live event: text is held to be joined, everything else
// is reported after the text before it.
func (f *follower) apply(ev Event) (done bool, err error) {
	switch ev.Kind {
	case EventDelta:
		f.text.WriteString(ev.Text)
	case EventThinking:
		f.thinking.WriteString(ev.Text)
	case EventStatus:
		if ev.Status != f.shown {
			if err := f.flush(); err != nil {
				return true, err
			}
			return false, f.status(ev.Status)
		}
	case EventReset:
		// The round's text moved into its step.
		f.text.Reset()
		f.thinking.Reset()
		if err := f.emit(FollowEvent{Kind: FollowSnapshot}); err != nil {
			return true, err
		}
		return false, f.emit(FollowEvent{Kind: FollowSnapshotThinking})
	case EventStep:
		if err := f.flush(); err != nil {
			return true, err
		}
		return false, f.steps()
	case EventDone:
		if err := f.flush(); err != nil {
			return true, err
		}
		return true, f.done(nil, &ev.Message)
	}
	return false, nil
}

// flush reports the text held: thinking first, as it came first.
func (f *follower) flush() error {
	if f.thinking.Len() > 0 {
		if err := f.emit(FollowEvent{Kind: FollowThinking, Text: f.thinking.String()}); err != nil {
			return err
		}
		f.thinking.Reset()
	}
	if f.text.Len() > 0 {
		if err := f.emit(FollowEvent{Kind: FollowDelta, Text: f.text.String()}); err != nil {
			return err
		}
		f.text.Reset()
	}
	return nil
}

// done reports the final answer: m, or else the message id reads (none:
// an empty final event).
func (f *follower) done(id *int64, m *db.Message) error {
	if m == nil && id != nil {
		if msg, err := f.rt.store.Message(f.ctx, f.user, *id); err == nil {
			m = &msg
		}
	}
	if m == nil {
		return f.emit(FollowEvent{Kind: FollowDone})
	}
	item := f.rt.finalItem(f.ctx, f.user, *m)
	return f.emit(FollowEvent{Kind: FollowDone, Item: &item})
}

// finalItem is a settled answer as its run's final event shows it: with its
// agent steps, its branch position, and whether the page should fetch the
// generated title. Each part is best effort: one that cannot be read is
// left out.
func (rt *Runtime) finalItem(ctx context.Context, user int64, m db.Message) MessageItem {
	it := MessageItem{Message: m}
	_ = rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		if m.Metadata.Route == db.RouteAgent {
			if rs, err := s.StepsOfMessages(ctx, user, []int64{m.ID}); err == nil {
				if x, ok := rs[m.ID]; ok {
					it.Steps, it.AgentRun = x.Steps, &x.Run
				}
			}
		}
		if b, err := s.Branches(ctx, user, m.ThreadID, []db.Message{m}); err == nil {
			it.Branch = b[m.ID]
		}
		if m.Status == db.MsgComplete {
			// The page may still show the provisional title even when the
			// generated one was stored before this event was rendered (it
			// is written right after the answer): the first answer of a
			// thread asks for the title, which answers at once when it is
			// there.
			if t, err := s.Thread(ctx, user, m.ThreadID); err == nil && t.TitleState != db.TitleUser {
				it.AwaitTitle = t.TitleState == db.TitleProvisional || firstAnswer(ctx, s, user, m)
			}
		}
		return nil
	})
	return it
}

// firstAnswer reports whether m answers the thread's first message.
func firstAnswer(ctx context.Context, s *db.DB, user int64, m db.Message) bool {
	if m.ParentID == nil {
		return false
	}
	q, err := s.Message(ctx, user, *m.ParentID)
	return err == nil && q.ParentID == nil
}
