package chat

import (
	"strings"
	"sync"
	"time"

	"weft/db"
)

// EventKind says what an Event carries.
type EventKind int

// Kinds of events a run publishes to its subscribers.
const (
	EventDelta    EventKind = iota + 1 // answer text appended (Text)
	EventThinking                      // thinking text appended (Text)
	EventStatus                        // the run's status changed (Status)
	EventDone                          // the run ended; Message is the final answer
	EventReset                         // the text so far was cleared (an agent's next round)
	EventStep                          // an agent step was added or changed (read the steps)
)

// Event is one thing that happened to a live run.
type Event struct {
	Kind   EventKind
	Text   string
	Status string
	// Message is the final answer (EventDone only). A pointer keeps Event
	// at 48 bytes: each subscriber's buffered channel costs 24 KB, where
	// the struct inline made it 170 KB (1,000 streams: 172 MB of heap).
	Message *db.Message
}

// Snapshot is the state of a live run when a subscriber joins: every event
// after it continues exactly from here.
type Snapshot struct {
	RunID    int64
	Kind     string // the run's route
	Status   string
	Content  string
	Thinking string
}

// subscriberBuffer is how many events a slow subscriber may lag behind
// before it is dropped (its browser reconnects and gets a fresh snapshot).
const subscriberBuffer = 512

// liveRun is a run executing on this instance: the text so far and who is
// watching. The runner never blocks on a subscriber, nor on the database.
//
// Text that arrives within merge of the last event is held and published
// as one event when the window ends (or before anything else is
// published), so a burst of tokens costs one event and one write on every
// event stream; text after a pause, the first included, goes at once.
// Subscribers see exactly the text appended, in order: thinking and answer
// text are never merged together.
type liveRun struct {
	id, threadID, msgID, owner int64
	kind                       string

	mu       sync.Mutex
	status   string
	content  strings.Builder
	thinking strings.Builder
	subs     map[chan Event]struct{}
	ended    bool

	// Merging (guarded by mu): the bytes of content and thinking published,
	// the kind of the text held (0: none), when the last text event went
	// out, and whether a timer will publish what is held.
	merge            time.Duration
	clock            clock
	pubContent       int
	pubThinking      int
	held             EventKind
	lastText         time.Time
	timerSet         bool
	publishHeldAfter func() // the timer's function

	// Progress (guarded by mu, written by the progress writer): the bytes
	// of content and thinking in the database, the next row's sequence
	// number, whether the stored text must be dropped first (after a
	// reset, or when the run writes its answer anew), and a generation
	// that a reset bumps.
	savedContent  int
	savedThinking int
	seq           int
	restart       bool
	gen           uint64

	cancel     func()
	stopReason string // StopUser or StopShutdown, set before cancel
}

// clock is time for a live run's merging; tests replace it.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func())
}

type realClock struct{}

func (realClock) Now() time.Time                      { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

func newLiveRun(r db.Run, merge time.Duration, c clock) *liveRun {
	status := db.RunRunning
	if r.Status == db.RunWaiting {
		status = db.RunWaiting // an adopted agent run waiting for the user
	}
	l := &liveRun{id: r.ID, threadID: r.ThreadID, msgID: *r.AssistantMessageID, owner: r.OwnerID,
		kind: r.Kind, status: status, subs: map[chan Event]struct{}{}, merge: merge, clock: c, restart: true}
	l.publishHeldAfter = func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.timerSet = false
		l.publishHeldLocked()
	}
	return l
}

// continueFrom starts the text with the answer's stored text, which the
// run goes on writing (the database already has it).
func (l *liveRun) continueFrom(content string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.content.WriteString(content)
	l.pubContent, l.savedContent, l.restart = len(content), len(content), false
}

// subscribe returns the current state and a channel of everything after it.
func (l *liveRun) subscribe() (Snapshot, chan Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return Snapshot{}, nil, false
	}
	l.publishHeldLocked() // the snapshot has it: the others get it now
	ch := make(chan Event, subscriberBuffer)
	l.subs[ch] = struct{}{}
	return Snapshot{RunID: l.id, Kind: l.kind, Status: l.status, Content: l.content.String(), Thinking: l.thinking.String()}, ch, true
}

func (l *liveRun) unsubscribe(ch chan Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.subs[ch]; ok {
		delete(l.subs, ch)
		close(ch)
	}
}

// append adds text (to the answer or the thinking) and publishes it, at
// once or merged with what follows within the merge window.
func (l *liveRun) append(kind EventKind, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switched := l.held != 0 && l.held != kind
	if switched {
		l.publishHeldLocked()
	}
	if kind == EventThinking {
		l.thinking.WriteString(text)
	} else {
		l.content.WriteString(text)
	}
	if l.held == 0 {
		l.held = kind
		// The first text of a kind after the other goes at once too.
		if wait := l.merge - l.clock.Now().Sub(l.lastText); switched || wait <= 0 {
			l.publishHeldLocked()
		} else if !l.timerSet {
			l.timerSet = true
			l.clock.AfterFunc(wait, l.publishHeldAfter)
		}
	}
}

// publishHeldLocked publishes the text held, if any.
func (l *liveRun) publishHeldLocked() {
	var text string
	switch l.held {
	case 0:
		return
	case EventThinking:
		all := l.thinking.String()
		text, l.pubThinking = all[l.pubThinking:], len(all)
	default:
		all := l.content.String()
		text, l.pubContent = all[l.pubContent:], len(all)
	}
	kind := l.held
	l.held, l.lastText = 0, l.clock.Now()
	if text != "" {
		l.publishLocked(Event{Kind: kind, Text: text})
	}
}

// progressMark is what a progress write took from a run: the run, its
// generation then, the lengths saved, and whether it restarted the text
// and added a row.
type progressMark struct {
	lr             *liveRun
	gen            uint64
	content, think int
	restart, row   bool
}

// unsaved returns the run's text not in the database yet (ok false:
// nothing to write).
func (l *liveRun) unsaved() (db.Progress, progressMark, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, t := l.content.String(), l.thinking.String()
	if !l.restart && len(c) == l.savedContent && len(t) == l.savedThinking {
		return db.Progress{}, progressMark{}, false
	}
	p := db.Progress{Run: l.id, Message: l.msgID, Seq: l.seq, Content: c[l.savedContent:], Thinking: t[l.savedThinking:], Restart: l.restart}
	return p, progressMark{lr: l, gen: l.gen, content: len(c), think: len(t), restart: l.restart,
		row: p.Content != "" || p.Thinking != ""}, true
}

// hasUnsaved reports whether the run has text not in the database yet.
func (l *liveRun) hasUnsaved() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.restart || l.content.Len() != l.savedContent || l.thinking.Len() != l.savedThinking
}

// markSaved records a successful progress write (unless the text was
// reset since: then all of it is written anew).
func (l *liveRun) markSaved(m progressMark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.gen != l.gen {
		return
	}
	l.savedContent, l.savedThinking = m.content, m.think
	if m.restart {
		l.restart = false
	}
	if m.row {
		l.seq++
	}
}

// rewrite makes the next save write all of the text anew (its rows and
// the row's text replaced), keeping what is live.
func (l *liveRun) rewrite() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.savedContent, l.savedThinking, l.restart = 0, 0, true
}

// reset clears the text so far (an agent round ended in tool calls).
func (l *liveRun) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.publishHeldLocked()
	l.content.Reset()
	l.thinking.Reset()
	l.pubContent, l.pubThinking = 0, 0
	l.savedContent, l.savedThinking, l.restart = 0, 0, true
	l.gen++
	l.publishLocked(Event{Kind: EventReset})
}

// stepped publishes that an agent step was added or changed.
func (l *liveRun) stepped() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.publishHeldLocked()
	l.publishLocked(Event{Kind: EventStep})
}

// waiting reports whether the run waits for its user.
func (l *liveRun) waiting() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status == db.RunWaiting
}

// text returns the answer and thinking so far.
func (l *liveRun) text() (content, thinking string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.content.String(), l.thinking.String()
}

// end publishes the final message and closes every subscription.
func (l *liveRun) end(final db.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.publishHeldLocked()
	l.ended = true
	l.publishLocked(Event{Kind: EventDone, Message: &final})
	for ch := range l.subs {
		delete(l.subs, ch)
		close(ch)
	}
}

func (l *liveRun) publishLocked(ev Event) {
	for ch := range l.subs {
		select {
		case ch <- ev:
		default:
			// Too far behind: drop it rather than slow the model down.
			delete(l.subs, ch)
			close(ch)
		}
	}
}

func (l *liveRun) stop(reason string) {
	l.mu.Lock()
	if l.stopReason == "" {
		l.stopReason = reason
	}
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (l *liveRun) reason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopReason
}

// StatusCompacting is the status a running run shows while older turns are
// summarized before its request goes out (not a stored run status).
const StatusCompacting = "compacting"

// setStatus publishes a change of the run's shown status.
func (l *liveRun) setStatus(status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status == status {
		return
	}
	l.publishHeldLocked()
	l.status = status
	l.publishLocked(Event{Kind: EventStatus, Status: status})
}
