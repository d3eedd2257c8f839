package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/views"
)

func TestAnEventWithAnIDCarriesItOnALineOfItsOwnBeforeItsName(t *testing.T) {
	rec := httptest.NewRecorder()
	es, err := startEventStream(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := es.sendWithID("room-append", 42, "<li>a\nb</li>"); err != nil {
		t.Fatal(err)
	}
	if err := es.send("delta-42", "x"); err != nil {
		t.Fatal(err)
	}
	want := "id: 42\nevent: room-append\ndata: <li>a\ndata: b</li>\n\nevent: delta-42\ndata: x\n\n"
	if got := rec.Body.String(); got != want {
		t.Fatalf("framed as %q, want %q", got, want)
	}
}

func TestConcurrentWritersOfOneStreamNeverInterleaveTheirEvents(t *testing.T) {
	rec := httptest.NewRecorder()
	es, err := startEventStream(rec)
	if err != nil {
		t.Fatal(err)
	}
	m := &muxStream{es: es}
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Several lines each: an interleaved write would split them.
				data := fmt.Sprintf("w%d\nn%d\nw%d", w, i, w)
				if err := m.send(views.RoomEvent(views.EventDelta, int64(w)), data); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	events, other := parseSSE(rec.Body.String())
	if len(other) > 0 {
		t.Fatalf("stray fields: %q", other)
	}
	if len(events) != writers*each {
		t.Fatalf("%d events read back, want %d", len(events), writers*each)
	}
	next := map[string]int{}
	for _, ev := range events {
		var w, i, w2 int
		if _, err := fmt.Sscanf(ev[1], "w%d\nn%d\nw%d", &w, &i, &w2); err != nil || w != w2 {
			t.Fatalf("event %q was torn by another writer's", ev[1])
		}
		if want := views.RoomEvent(views.EventDelta, int64(w)); ev[0] != want {
			t.Fatalf("writer %d's event is named %q, want %q", w, ev[0], want)
		}
		if i != next[ev[0]] {
			t.Fatalf("writer %d's event %d came where %d was due", w, i, next[ev[0]])
		}
		next[ev[0]]++
	}
}

func TestAnEndedStreamWritesNothingAfterItsLastEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	es, err := startEventStream(rec)
	if err != nil {
		t.Fatal(err)
	}
	m := &muxStream{es: es}
	if err := m.send("delta-1", "before"); err != nil {
		t.Fatal(err)
	}
	if err := m.end(views.EventRoomGone, "gone"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{m.send("delta-1", "after"), m.sendWithID("room-append", 3, "after"), m.comment(), m.end("x", "y")} {
		if !errors.Is(err, errStreamEnded) {
			t.Fatalf("a write after the end answered %v, want errStreamEnded", err)
		}
	}
	events, _ := parseSSE(rec.Body.String())
	if len(events) != 2 || events[1] != [2]string{views.EventRoomGone, "gone"} {
		t.Fatalf("the stream reads %q, want the last event to be the end", events)
	}
}

// roomFrames runs a room follower's frames for message 42 (run 7) and
// returns the events written and the ids they carried.
func roomFrames(t *testing.T, evs ...chat.FollowEvent) (events [][2]string, body string, s *roomSession) {
	t.Helper()
	rec := httptest.NewRecorder()
	es, err := startEventStream(rec)
	if err != nil {
		t.Fatal(err)
	}
	s = newRoomSession(&roomStreams{}, 1, db.Room{ID: 5, ThreadID: 9, OwnerID: 1}, 50, es)
	s.pending[42], s.pending[45] = true, true
	f := &roomFollower{s: s, ctx: context.Background(), room: s.room, msg: 42, run: 7}
	for _, ev := range evs {
		if err := f.frame(ev); err != nil {
			t.Fatal(err)
		}
	}
	events, _ = parseSSE(rec.Body.String())
	return events, rec.Body.String(), s
}

func TestARoomAnswersEventsAreNamedAfterItsOwnMessage(t *testing.T) {
	events, _, _ := roomFrames(t,
		chat.FollowEvent{Kind: chat.FollowStatus, Status: db.RunRunning},
		chat.FollowEvent{Kind: chat.FollowSnapshot, Text: "Hel"},
		chat.FollowEvent{Kind: chat.FollowSnapshotThinking, Text: ""},
		chat.FollowEvent{Kind: chat.FollowHeartbeat},
		chat.FollowEvent{Kind: chat.FollowDelta, Text: "lo <b>"},
		chat.FollowEvent{Kind: chat.FollowThinking, Text: "hm"},
		chat.FollowEvent{Kind: chat.FollowTrace},
	)
	want := []string{"status-42", "snapshot-42", "snapshot-thinking-42", "delta-42", "thinking-42", "trace-42"}
	if len(events) != len(want) {
		t.Fatalf("events %q, want the names %q (heartbeats are the session's)", events, want)
	}
	for i, ev := range events {
		if ev[0] != want[i] {
			t.Fatalf("event %d is %q, want %q", i, ev[0], want[i])
		}
	}
	if !strings.Contains(events[0][1], `hx-post="/rooms/5/runs/7/stop"`) {
		t.Fatalf("the status event's Stop does not post to the room's route: %s", events[0][1])
	}
	if events[3][1] != "lo &lt;b&gt;" {
		t.Fatalf("the delta is %q, want the text escaped", events[3][1])
	}
}

func TestARoomAnswersFinalEventMovesTheResumePointPastIt(t *testing.T) {
	_, body, s := roomFrames(t, chat.FollowEvent{Kind: chat.FollowDone})
	// 45 is still being written: a reconnection resumes before it.
	if !strings.HasPrefix(body, "id: 44\nevent: done-42\n") {
		t.Fatalf("the final event is framed %q, want id 44 and the name done-42", body)
	}
	if s.pending[42] {
		t.Fatal("the ended answer is still counted as being written")
	}
}

// flakyFollow is a room stream's runtime whose first Follow of a run fails
// (a read that failed) and whose next one ends the answer.
type flakyFollow struct {
	mu    sync.Mutex
	calls int
}

func (f *flakyFollow) RoomMessagesAfter(context.Context, int64, db.Room, int64) ([]chat.MessageItem, error) {
	return nil, nil
}

func (f *flakyFollow) WatchThread(int64) (<-chan struct{}, func()) { return nil, func() {} }

func (f *flakyFollow) Follow(_ context.Context, _, _ int64, _ string, emit func(chat.FollowEvent) error) error {
	f.mu.Lock()
	f.calls++
	first := f.calls == 1
	f.mu.Unlock()
	if first {
		return errors.New("read run 7: connection reset")
	}
	return emit(chat.FollowEvent{Kind: chat.FollowDone})
}

func TestARoomAnswerWhoseFollowFailedIsFollowedAgainToItsEnd(t *testing.T) {
	rec := httptest.NewRecorder()
	es, err := startEventStream(rec)
	if err != nil {
		t.Fatal(err)
	}
	s := newRoomSession(&roomStreams{rt: &flakyFollow{}, recheck: time.Millisecond}, 1, db.Room{ID: 5, ThreadID: 9, OwnerID: 1}, 42, es)
	s.pending[42] = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.follow(ctx, cancel, s.room, 42, 7, db.RunRunning)
	s.wg.Wait() // the follower's goroutine has ended
	events, _ := parseSSE(rec.Body.String())
	if len(events) != 1 || events[0][0] != "done-42" {
		t.Fatalf("the stream reads %q, want the answer's end after its follow failed once", events)
	}
	if s.pending[42] {
		t.Fatal("the ended answer is still counted as being written")
	}
}
