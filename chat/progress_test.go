package chat_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testwait"
)

func TestAFastModelsTokensReachSubscribersMergedAndExactly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	sent := e.send(0, "[[tokens:1000]]")
	snap, events, unsubscribe, ok := e.rt.Subscribe(sent.Run.ID)
	if !ok {
		t.Fatal("a run just sent is not live on this instance")
	}
	defer unsubscribe()
	var got strings.Builder
	got.WriteString(snap.Content)
	deltas, done := 0, false
	for ev := range events {
		switch ev.Kind {
		case chat.EventDelta:
			deltas++
			got.WriteString(ev.Text)
		case chat.EventDone:
			done = true
		}
	}
	if !done {
		t.Fatal("the subscriber was dropped before the end (too many events)")
	}
	if want := tokens(1, 1000); got.String() != want {
		t.Fatalf("the events do not rebuild the answer: %d bytes, want %d", got.Len(), len(want))
	}
	// Each token is its own chunk from the model; delivered one event per
	// token they would have been 1,000.
	if deltas > 250 {
		t.Fatalf("%d delta events for 1,000 tokens sent at once: not merged", deltas)
	}
}

// flakyStore fails every other progress save, half of them after the
// save committed (the caller never learns it reached the database).
type flakyStore struct {
	chat.Store
	mu    sync.Mutex
	calls int
}

func (f *flakyStore) SaveProgress(ctx context.Context, parts []db.Progress, live []int64) ([]int64, []int64, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	switch n % 4 {
	case 1:
		return nil, nil, errors.New("connection refused")
	case 3:
		if _, _, err := f.Store.SaveProgress(ctx, parts, live); err != nil {
			return nil, nil, err
		}
		return nil, nil, errors.New("connection reset after commit")
	}
	return f.Store.SaveProgress(ctx, parts, live)
}

func TestFailedProgressSavesAreRetriedWithoutLosingOrRepeatingText(t *testing.T) {
	t.Parallel()
	flaky := &flakyStore{}
	e := newEnvWrapped(t, chat.Config{FlushEvery: 20 * time.Millisecond}, func(s *db.DB) chat.Store {
		flaky.Store = s
		return flaky
	})
	sent := e.send(0, "[[slow:2ms]][[tokens:120]][[hang]]")
	want := tokens(1, 120)
	// While it streams, the stored text is always a beginning of the
	// answer (a repeated save would show text twice) …
	testwait.For(t, "all 120 tokens stored while the model hangs", 20*time.Second, func() bool {
		got := e.message(sent.Assistant.ID).Content
		if !strings.HasPrefix(want, got) {
			t.Fatalf("stored text is not a beginning of the answer: %q", got)
		}
		return got == want
	})
	// … and many saves failed on the way.
	flaky.mu.Lock()
	calls := flaky.calls
	flaky.mu.Unlock()
	if calls < 4 {
		t.Fatalf("only %d progress rounds", calls)
	}
	var rows, bytes int
	if err := e.store.Pool.QueryRow(context.Background(), `SELECT count(*), COALESCE(sum(octet_length(content)), 0)
		FROM message_progress WHERE message_id = $1`, sent.Assistant.ID).Scan(&rows, &bytes); err != nil {
		t.Fatal(err)
	}
	if bytes != len(want) || rows < 2 {
		t.Fatalf("progress holds %d bytes in %d rows, want the answer's %d bytes once", bytes, rows, len(want))
	}
	if _, err := e.rt.Cancel(context.Background(), e.user.ID, sent.Run.ID); err != nil {
		t.Fatal(err)
	}
	run, m := e.wait(sent)
	if run.Status != db.RunCancelled || m.Content != want {
		t.Fatalf("after stop: %s %q", run.Status, m.Content)
	}
}

func TestAStopFromAnotherInstanceReachesARunWhoseModelIsSilent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{Instance: "A", FlushEvery: 50 * time.Millisecond})
	other := e.runtime(chat.Config{Instance: "B"})
	sent := e.send(0, "[[tokens:2]][[hang]]")
	if err := e.fake.WaitChunks(context.Background(), 0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Cancel(context.Background(), e.user.ID, sent.Run.ID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.fake.WaitCancelled(ctx, 1); err != nil {
		t.Fatalf("no token came after the stop, and the stop was not noticed: %v", err)
	}
	if run, m := e.wait(sent); run.Status != db.RunCancelled || m.Content != tokens(1, 2) {
		t.Fatalf("run %s, text %q", run.Status, m.Content)
	}
}

func TestTheThinkingIsSavedWhenTheAnswerBegins(t *testing.T) {
	t.Parallel()
	// Saves come only from the thinking→answer boundary here.
	e := newEnv(t, chat.Config{FlushEvery: time.Hour})
	sent, err := e.rt.Send(context.Background(), e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Model: "thinker", Content: "[[think]][[tokens:3]][[hang]]"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(fakeollama.ThinkingChunks, "")
	testwait.For(t, "the thinking stored", 10*time.Second, func() bool {
		m := e.message(sent.Assistant.ID)
		return m.Status == db.MsgStreaming && m.Metadata.Thinking == want
	})
	if _, err := e.rt.Cancel(context.Background(), e.user.ID, sent.Run.ID); err != nil {
		t.Fatal(err)
	}
	if _, m := e.wait(sent); m.Metadata.Thinking != want || m.Content != tokens(1, 3) {
		t.Fatalf("after stop: %q / %q", m.Metadata.Thinking, m.Content)
	}
}

func TestARunOfADeadInstanceIsSettledWithItsProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	// The env's own runtime would claim the queued run at once (its note):
	// only the next runtime, started below, may see it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	e.rt.Shutdown(ctx)
	cancel()
	sent, err := e.store.SendMessage(context.Background(), e.user.ID, db.Send{WorkspaceID: e.ws.ID, Content: "q", Kind: "chat", Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	// The instance died after three saves of progress.
	deltas := []string{"The first ", "part, then ", "a «second»."}
	for i, d := range deltas {
		mustExec(t, e.store, `INSERT INTO message_progress (message_id, seq, content) VALUES ($1, $2, $3)`, sent.Assistant.ID, i, d)
	}
	mustExec(t, e.store, `INSERT INTO instances (id, heartbeat_at) VALUES ('gone', now() - interval '1 minute')`)
	mustExec(t, e.store, `UPDATE runs SET status = 'running', instance_id = 'gone' WHERE id = $1`, sent.Run.ID)

	e.runtime(chat.Config{Instance: "next", StaleAfter: time.Second}) // settles dead instances' runs as it starts
	run, m := e.wait(sent)
	if run.Status != db.RunInterrupted || m.Status != db.MsgInterrupted || m.Content != strings.Join(deltas, "") {
		t.Fatalf("settled: run %s, message %s %q", run.Status, m.Status, m.Content)
	}
	var rows int
	if err := e.store.Pool.QueryRow(context.Background(), `SELECT count(*) FROM message_progress WHERE message_id = $1`, sent.Assistant.ID).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d progress rows left (%v)", rows, err)
	}
}
