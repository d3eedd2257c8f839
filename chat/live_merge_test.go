package chat

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"weft/db"
)

// fakeClock is a clock whose time moves only when the test says; timers
// due by then run in Advance, in order.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), f: f})
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	var due []func()
	for len(c.timers) > 0 && !c.timers[0].at.After(c.now) {
		due, c.timers = append(due, c.timers[0].f), c.timers[1:]
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

func testLiveRun(c clock) *liveRun {
	msg := int64(2)
	return newLiveRun(db.Run{ID: 1, ThreadID: 1, OwnerID: 1, Kind: db.RouteChat, Status: db.RunRunning, AssistantMessageID: &msg},
		5*time.Millisecond, c)
}

// drain takes the events waiting on ch without blocking.
func drain(ch chan Event) []Event {
	var out []Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, ev)
		default:
			return out
		}
	}
}

func TestTokensInABurstBecomeOneEventAndTheFirstGoesAtOnce(t *testing.T) {
	c := &fakeClock{now: time.Unix(1_000_000, 0)}
	lr := testLiveRun(c)
	_, ch, ok := lr.subscribe()
	if !ok {
		t.Fatal("subscribe")
	}
	var sent strings.Builder
	var got []Event
	token := func(i int) {
		s := fmt.Sprintf("tok%d ", i)
		sent.WriteString(s)
		lr.append(EventDelta, s)
	}

	// The first token is an event before anything else happens.
	token(1)
	if first := drain(ch); len(first) != 1 || first[0].Text != "tok1 " {
		t.Fatalf("after the first token: %+v, want its event at once", first)
	}
	got = append(got, Event{Kind: EventDelta, Text: "tok1 "})

	// 999 more in bursts of 37, 10 µs apart, with a 20 ms pause between
	// bursts: the first token after each pause goes at once, the rest of
	// the burst waits for the window.
	n, bursts := 1, 0
	for n < 1000 {
		c.Advance(20 * time.Millisecond)
		bursts++
		for k := 0; k < 37 && n < 1000; k++ {
			n++
			token(n)
			if k == 0 {
				if evs := drain(ch); len(evs) != 1 || evs[0].Text != fmt.Sprintf("tok%d ", n) {
					t.Fatalf("first token after a pause: %+v", evs)
				} else {
					got = append(got, evs...)
				}
			}
			c.Advance(10 * time.Microsecond)
		}
		if evs := drain(ch); len(evs) != 0 {
			t.Fatalf("a burst published %d events inside the window", len(evs))
		}
		c.Advance(5 * time.Millisecond) // the window ends
		got = append(got, drain(ch)...)
	}
	var joined strings.Builder
	for _, ev := range got {
		if ev.Kind != EventDelta {
			t.Fatalf("unexpected event %+v", ev)
		}
		joined.WriteString(ev.Text)
	}
	if joined.String() != sent.String() {
		t.Fatalf("the events do not rebuild the text:\n got %q\nwant %q", joined.String(), sent.String())
	}
	if len(got) != 1+2*bursts {
		t.Fatalf("%d events for 1,000 tokens in %d bursts, want %d (first token, then two per burst)", len(got), bursts, 1+2*bursts)
	}
}

func TestMergedEventsKeepThinkingAndAnswerApartAndInOrder(t *testing.T) {
	c := &fakeClock{now: time.Unix(1_000_000, 0)}
	lr := testLiveRun(c)
	_, early, _ := lr.subscribe()
	type piece struct {
		kind EventKind
		text string
	}
	script := []piece{
		{EventThinking, "Let "}, {EventThinking, "me "}, {EventThinking, "see. "},
		{EventDelta, "The "}, {EventDelta, "answer "},
		{EventThinking, "(hm) "},
		{EventDelta, "is "}, {EventDelta, "42."},
	}
	var late chan Event
	var lateSnap Snapshot
	for i, p := range script {
		lr.append(p.kind, p.text)
		c.Advance(time.Microsecond)
		if i == 4 {
			// A subscriber joins while text is held: its snapshot has the
			// held text, and nobody gets it twice.
			lateSnap, late, _ = lr.subscribe()
		}
	}
	lr.end(db.Message{ID: 2, Content: "The answer is 42."}) // publishes what is held first

	rebuild := func(evs []Event, content, thinking string) (string, string) {
		t.Helper()
		done := false
		for _, ev := range evs {
			switch ev.Kind {
			case EventDelta:
				content += ev.Text
			case EventThinking:
				thinking += ev.Text
			case EventDone:
				done = true
			}
			if done && ev.Kind != EventDone {
				t.Fatalf("text after the final event: %+v", ev)
			}
		}
		if !done {
			t.Fatal("no final event")
		}
		return content, thinking
	}
	evs := drain(early)
	var kinds []EventKind
	for _, ev := range evs {
		if n := len(kinds); n == 0 || kinds[n-1] != ev.Kind {
			kinds = append(kinds, ev.Kind)
		}
	}
	want := []EventKind{EventThinking, EventDelta, EventThinking, EventDelta, EventDone}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("kinds in order %v, want %v (events %+v)", kinds, want, evs)
	}
	if len(evs) >= len(script)+1 {
		t.Fatalf("%d events for %d pieces: nothing was merged", len(evs), len(script))
	}
	if content, th := rebuild(evs, "", ""); content != "The answer is 42." || th != "Let me see. (hm) " {
		t.Fatalf("early subscriber rebuilt %q / %q", content, th)
	}
	if content, th := rebuild(drain(late), lateSnap.Content, lateSnap.Thinking); content != "The answer is 42." || th != "Let me see. (hm) " {
		t.Fatalf("late subscriber rebuilt %q / %q", content, th)
	}
}

// An event sits in every subscriber's buffered channel subscriberBuffer
// times over: it must stay a few words (the final message goes by pointer).
func TestEventStaysSmall(t *testing.T) {
	if n := unsafe.Sizeof(Event{}); n > 64 {
		t.Fatalf("Event is %d bytes; a subscriber's channel would hold %d KB", n, int(n)*subscriberBuffer/1024)
	}
}
