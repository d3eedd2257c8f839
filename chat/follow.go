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
	// pollSafetyEvery: a run that is not live here is read when a note
	// about it arrives (chat/notes.go), and at least this often, should
	// a note be lost.
	pollSafetyEvery = 3 * time.Second
	maxCoalesce     = 64 // deltas joined into one event
)

// Follow reports one of user's runs to emit from its current state to its
// end: a run executing here live (deltas that queue up joined, so a slow
// reader gets fewer, larger events), a run queued or executing on another
// instance from the database (status, the text as its progress rows are
// saved, as deltas, and agent steps; read when that instance's note says
// so), and a finished run by its final answer. shown is the status the
// reader already shows, not sent again. Follow returns nil after
// FollowDone or when a lagging reader is dropped (it reconnects and starts
// from a fresh snapshot), emit's error, or ctx's when it ends first.
func (rt *Runtime) Follow(ctx context.Context, user, run int64, shown string, emit func(FollowEvent) error) error {
	// Ownership first, in one query (no snapshot for one read).
	r, err := rt.store.Run(ctx, user, run)
	if err != nil {
		return fmt.Errorf("read run %d: %w", run, err)
	}
	f := &follower{rt: rt, ctx: ctx, user: user, run: run, shown: shown, emit: emit,
		beat: time.NewTicker(followHeartbeat), seq: -1, first: -1}
	defer f.beat.Stop()
	noted, unwatch := rt.notes.watch(run)
	defer unwatch()
	local := time.NewTicker(pollLocalEvery)
	defer local.Stop()
	var nextFull, nextTell time.Time
	if r.Status == db.RunRunning && r.InstanceID != rt.cfg.Instance {
		// Before anything else: the tokens from now on come at the
		// running instance's fast rounds only once it has heard this.
		rt.tellFollowing(ctx, run)
		nextTell = time.Now().Add(followRenew)
	}
	full, incremental := true, false
	for {
		if snap, events, unsubscribe, ok := rt.Subscribe(run); ok {
			defer unsubscribe()
			return f.live(snap, events)
		}
		now := time.Now()
		if full || now.After(nextFull) {
			nextFull = now.Add(pollSafetyEvery)
			if done, err := f.poll(true); done || err != nil {
				return err
			}
		} else if incremental {
			if done, err := f.poll(false); done || err != nil {
				return err
			}
		}
		full, incremental = false, false
		if f.shown != db.RunRunning {
			nextTell = time.Time{} // told again as soon as it runs
		} else if f.msg != 0 && now.After(nextTell) {
			// Its instance saves its progress often while we follow.
			nextTell = now.Add(followRenew)
			rt.tellFollowing(ctx, run)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.beat.C:
			if err := emit(FollowEvent{Kind: FollowHeartbeat}); err != nil {
				return err
			}
		case <-noted:
			incremental = true
		case <-local.C:
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
	// shown is the status last reported, trace the steps last reported.
	shown, trace   string
	text, thinking strings.Builder // live deltas not reported yet
	// Of a run followed from the database: its answer, the last progress
	// row reported (-1: none yet; the text is read whole), and what shows
	// a restart of its text: the lowest row seen and the row's own text's
	// length; shownLen is the bytes of answer text reported.
	msg               int64
	agent             bool
	read              bool
	seq, first        int
	baseLen, shownLen int
}

// poll reports what changed of a run that is not live here: the run's row,
// steps and whole text when whole (a note of its end or stop, a safety
// round), else only its new progress rows; done says the run ended (and its final
// answer was reported).
func (f *follower) poll(whole bool) (done bool, err error) {
	text := whole
	if whole || f.msg == 0 || f.agent {
		// (An agent run's steps change without a note of their own: its
		// row and steps are read at every note.)
		r, err := f.rt.store.Run(f.ctx, f.user, f.run)
		if err != nil {
			return true, fmt.Errorf("read run %d: %w", f.run, err)
		}
		if !r.Active() {
			return true, f.done(r.AssistantMessageID, nil)
		}
		if err := f.status(r.Status); err != nil {
			return true, err
		}
		if r.Kind == db.RouteAgent {
			f.agent = true
			var steps []db.Step
			err := f.rt.store.ReadSnapshot(f.ctx, func(s *db.DB) error {
				var err error
				steps, err = s.Steps(f.ctx, f.user, f.run)
				return err
			})
			if err == nil { // failed: the next poll tries again
				if sig := traceSignature(steps); sig != f.trace {
					f.trace = sig
					if err := f.emit(FollowEvent{Kind: FollowTrace, Steps: steps}); err != nil {
						return true, err
					}
				}
			}
		}
		if r.Status == db.RunQueued || r.AssistantMessageID == nil {
			return false, nil
		}
		if f.msg == 0 {
			f.msg, text = *r.AssistantMessageID, true
		}
	}
	return f.progress(text)
}

// progress reports the answer's progress rows not reported yet (whole: or
// the whole text, when it differs from what was reported).
func (f *follower) progress(whole bool) (done bool, err error) {
	after := f.seq
	if whole {
		after = -1
	}
	p, err := f.rt.store.ProgressAfter(f.ctx, f.user, f.msg, after)
	if err != nil {
		return false, nil // gone, or a failed read: the run's row says at the next whole poll
	}
	if p.Status != db.MsgStreaming {
		if whole {
			return false, nil // settling: its note (or the next poll) brings the end
		}
		return f.poll(true)
	}
	restarted := p.BaseLen != f.baseLen || (f.first >= 0 && p.First != f.first)
	if after >= 0 && restarted {
		// The run wrote its answer anew (an agent's next round).
		if p, err = f.rt.store.ProgressAfter(f.ctx, f.user, f.msg, -1); err != nil {
			return false, nil
		}
		after = -1
	}
	var text, thinking strings.Builder
	if after < 0 {
		text.WriteString(p.Base)
	}
	for _, r := range p.Rows {
		text.WriteString(r.Content)
		thinking.WriteString(r.Thinking)
		f.seq = r.Seq
	}
	f.baseLen, f.first = p.BaseLen, p.First
	if after < 0 {
		again := f.read
		f.read = true
		if again && text.Len() == f.shownLen && !restarted {
			return false, nil // a safety read: nothing was missed
		}
		f.shownLen = text.Len()
		if err := f.emit(FollowEvent{Kind: FollowSnapshot, Text: text.String()}); err != nil {
			return true, err
		}
		return false, f.emit(FollowEvent{Kind: FollowSnapshotThinking, Text: thinking.String()})
	}
	if thinking.Len() > 0 {
		if err := f.emit(FollowEvent{Kind: FollowThinking, Text: thinking.String()}); err != nil {
			return true, err
		}
	}
	if text.Len() > 0 {
		f.shownLen += text.Len()
		if err := f.emit(FollowEvent{Kind: FollowDelta, Text: text.String()}); err != nil {
			return true, err
		}
	}
	return false, nil
}

func traceSignature(steps []db.Step) string {
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "%d:%s:%d;", s.ID, s.Status, s.UpdatedAt.UnixNano())
		for _, c := range s.Subagents {
			// A sub-agent's status, live text and steps.
			fmt.Fprintf(&b, "[%d:%s:%d:%s]", c.ID, c.Status, len(c.Sub.Live), traceSignature(c.Steps))
		}
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
		return true, f.done(nil, ev.Message)
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
	it.Speaker, it.SpeakerKind = SpeakerOf(m)
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
