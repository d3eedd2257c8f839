package chat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/internal/testwait"
)

// follow collects what Follow reports of run until it returns.
func (e *env) follow(rt *chat.Runtime, run int64, shown string) []chat.FollowEvent {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []chat.FollowEvent
	err := rt.Follow(ctx, e.user.ID, run, shown, func(ev chat.FollowEvent) error {
		if ev.Kind != chat.FollowHeartbeat {
			got = append(got, ev)
		}
		return nil
	})
	if err != nil {
		e.t.Fatalf("follow run %d: %v", run, err)
	}
	return got
}

// finalOf checks that events end in a done event with a complete answer of
// content, and returns that item.
func finalOf(t *testing.T, events []chat.FollowEvent, content string) chat.MessageItem {
	t.Helper()
	if len(events) == 0 {
		t.Fatal("no events")
	}
	last := events[len(events)-1]
	if last.Kind != chat.FollowDone || last.Item == nil {
		t.Fatalf("the last event is %+v, want done with the answer", last)
	}
	if m := last.Item.Message; m.Status != db.MsgComplete || m.Content != content {
		t.Fatalf("the final answer is %s %q, want complete %q", m.Status, m.Content, content)
	}
	return *last.Item
}

// shownText is the answer a reader shows after events: snapshots replace
// it, deltas append to it.
func shownText(events []chat.FollowEvent) (text string, snapshots int) {
	var b strings.Builder
	for _, ev := range events {
		switch ev.Kind {
		case chat.FollowSnapshot:
			b.Reset()
			b.WriteString(ev.Text)
			snapshots++
		case chat.FollowDelta:
			b.WriteString(ev.Text)
		}
	}
	return b.String(), snapshots
}

func TestFollowingALiveRunReportsItsStatusTextAndFinalAnswerInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	sent := e.send(0, "[[slow:10ms]][[tokens:40]] count")
	events := e.follow(e.rt, sent.Run.ID, db.RunQueued)
	if events[0].Kind != chat.FollowStatus || events[0].Status != db.RunRunning {
		t.Fatalf("the first event is %+v, want the status running", events[0])
	}
	if events[1].Kind != chat.FollowSnapshot || events[2].Kind != chat.FollowSnapshotThinking {
		t.Fatalf("after the status: %v, %v; want the snapshots", events[1].Kind, events[2].Kind)
	}
	if text, _ := shownText(events); text != tokens(1, 40) {
		t.Fatalf("the text shown is %q", text)
	}
	it := finalOf(t, events, tokens(1, 40))
	if !it.AwaitTitle || it.Branch.Count != 1 {
		t.Fatalf("the first answer: await title %v, branch %+v", it.AwaitTitle, it.Branch)
	}
}

func TestFollowingARunThatEndedGivesItsFinalAnswerAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	first := e.send(0, "hello")
	e.wait(first)
	// The title is written after the first answer settles: while it is
	// provisional every answer rightly asks for it.
	if !testwait.Until(20*time.Second, func() bool {
		th, err := e.store.Thread(context.Background(), e.user.ID, first.Thread.ID)
		return err == nil && th.TitleState == db.TitleGenerated
	}) {
		t.Fatal("the first answer's title was never generated")
	}
	second := e.send(first.Thread.ID, "again")
	_, m := e.wait(second)
	events := e.follow(e.rt, second.Run.ID, "")
	if len(events) != 1 {
		t.Fatalf("%d events for a finished run, want only done: %+v", len(events), events)
	}
	if it := finalOf(t, events, m.Content); it.AwaitTitle {
		t.Fatal("the second answer asks for the title again")
	}
}

func TestFollowingAQueuedRunReportsItQueuedThenFollowsItWhenItStarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	a := e.send(0, "[[slow:20ms]][[tokens:30]]")
	b := e.send(a.Thread.ID, "[[slow:20ms]][[tokens:20]] second")
	if b.Run.Status != db.RunQueued {
		t.Fatalf("the second run is %s, want queued", b.Run.Status)
	}
	events := e.follow(e.rt, b.Run.ID, "")
	if events[0].Kind != chat.FollowStatus || events[0].Status != db.RunQueued {
		t.Fatalf("the first event is %+v, want the status queued", events[0])
	}
	running := false
	for _, ev := range events {
		running = running || (ev.Kind == chat.FollowStatus && ev.Status == db.RunRunning)
	}
	if !running {
		t.Fatal("the run was never reported running")
	}
	finalOf(t, events, tokens(1, 20))
}

func TestFollowingARunOnAnotherInstanceReportsItsSavedTextAsDeltasThenItsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	there := e.runtime(chat.Config{Instance: "elsewhere"})
	sent, err := there.Send(context.Background(), e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Content: "[[slow:20ms]][[tokens:150]]"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, live := e.rt.Subscribe(sent.Run.ID); live {
		t.Fatal("the run executes on the instance that follows it: the test proves nothing")
	}
	events := e.follow(e.rt, sent.Run.ID, "")
	if events[0].Kind != chat.FollowStatus || events[0].Status != db.RunRunning {
		t.Fatalf("the first event is %+v, want the status running", events[0])
	}
	// The text shown is the last snapshot followed by the deltas after it,
	// and before the end it is always a beginning of the answer.
	want := tokens(1, 150)
	var shown strings.Builder
	deltas := 0
	for _, ev := range events {
		switch ev.Kind {
		case chat.FollowSnapshot:
			shown.Reset()
			shown.WriteString(ev.Text)
		case chat.FollowDelta:
			shown.WriteString(ev.Text)
			deltas++
		default:
			continue
		}
		if !strings.HasPrefix(want, shown.String()) {
			t.Fatalf("the text shown %q is not the beginning of the answer", shown.String())
		}
	}
	// The follower asked the other instance to save often (every 20 ms
	// instead of every second): a 3 s answer comes in many deltas.
	if deltas < 10 {
		t.Fatalf("%d deltas while the run executed elsewhere for 3 s, want many", deltas)
	}
	// (The run's last text may come only with its final message.)
	if shown.Len() < len(want)/2 {
		t.Fatalf("snapshot and deltas rebuild %d bytes of the %d of the answer", shown.Len(), len(want))
	}
	finalOf(t, events, want)
}
