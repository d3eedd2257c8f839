package chat

import (
	"strings"
	"sync"

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
	Kind    EventKind
	Text    string
	Status  string
	Message db.Message
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
// watching. The runner never blocks on a subscriber.
type liveRun struct {
	id, threadID, msgID, owner int64
	kind                       string

	mu       sync.Mutex
	status   string
	content  strings.Builder
	thinking strings.Builder
	subs     map[chan Event]struct{}
	ended    bool

	cancel     func()
	stopReason string // StopUser or StopShutdown, set before cancel
}

func newLiveRun(r db.Run) *liveRun {
	status := db.RunRunning
	if r.Status == db.RunWaiting {
		status = db.RunWaiting // an adopted agent run waiting for the user
	}
	return &liveRun{id: r.ID, threadID: r.ThreadID, msgID: *r.AssistantMessageID, owner: r.OwnerID,
		kind: r.Kind, status: status, subs: map[chan Event]struct{}{}}
}

// subscribe returns the current state and a channel of everything after it.
func (l *liveRun) subscribe() (Snapshot, chan Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return Snapshot{}, nil, false
	}
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

// append adds text (to the answer or the thinking) and publishes it.
func (l *liveRun) append(kind EventKind, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if kind == EventThinking {
		l.thinking.WriteString(text)
	} else {
		l.content.WriteString(text)
	}
	l.publishLocked(Event{Kind: kind, Text: text})
}

// reset clears the text so far (an agent round ended in tool calls).
func (l *liveRun) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.content.Reset()
	l.thinking.Reset()
	l.publishLocked(Event{Kind: EventReset})
}

// stepped publishes that an agent step was added or changed.
func (l *liveRun) stepped() {
	l.mu.Lock()
	defer l.mu.Unlock()
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
	l.ended = true
	l.publishLocked(Event{Kind: EventDone, Message: final})
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
	l.status = status
	l.publishLocked(Event{Kind: EventStatus, Status: status})
}
