package db_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// TestEveryWriteThatChangesAThreadsMessagesNotesTheThread: a thread's live
// pages (issue 21) learn of a change by the thread's note, so every write
// that adds or removes messages of a thread, or moves its active branch,
// sends it — and one that changes another thread does not note this one.
func TestEveryWriteThatChangesAThreadsMessagesNotesTheThread(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := testenv.NewDB(t)
	u, ws := newUser(t, s, "notes@example.com")
	first := send(t, s, u.ID, db.Send{WorkspaceID: ws.ID, Title: "t", Content: "one"})
	thread := first.Thread.ID
	other := send(t, s, u.ID, db.Send{WorkspaceID: ws.ID, Title: "o", Content: "elsewhere"})

	var mu sync.Mutex
	notes := map[int64]int{}
	ready := make(chan struct{})
	var once sync.Once
	go s.Listen(ctx, func() { once.Do(func() { close(ready) }) }, func(n db.Note) {
		if n.Kind == db.NoteThread {
			mu.Lock()
			notes[n.ID]++
			mu.Unlock()
		}
	})
	testwait.Closed(t, "the listener", 10*time.Second, ready)
	count := func(id int64) int { mu.Lock(); defer mu.Unlock(); return notes[id] }

	finish := func(m db.Message, r db.Run, status string) {
		t.Helper()
		msg := map[string]string{db.RunCompleted: db.MsgComplete, db.RunCancelled: db.MsgCancelled, db.RunInterrupted: db.MsgInterrupted}[status]
		if _, err := s.FinishRun(ctx, r.ID, m.ID, db.Finish{RunStatus: status, MsgStatus: msg, Content: "answer"}); err != nil {
			t.Fatal(err)
		}
	}
	finish(first.Assistant, first.Run, db.RunCompleted)
	var retried, edited, second db.Sent
	var clear db.Message
	var label db.Label
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"send", func() (err error) {
			second, err = s.SendMessage(ctx, u.ID, db.Send{ThreadID: thread, Content: "two", Kind: "chat"})
			return err
		}},
		{"retry", func() (err error) {
			finish(second.Assistant, second.Run, db.RunCancelled)
			retried, err = s.RetryAnswer(ctx, u.ID, second.Assistant.ID, db.Fixed("chat"), "")
			return err
		}},
		{"select a branch", func() error {
			finish(retried.Assistant, retried.Run, db.RunCompleted)
			_, err := s.SelectBranch(ctx, u.ID, second.Assistant.ID)
			return err
		}},
		{"continue", func() error {
			_, err := s.ContinueAnswer(ctx, u.ID, second.Assistant.ID, "")
			return err
		}},
		{"leave a branch", func() error {
			_, err := s.LeaveBranch(ctx, u.ID, retried.Assistant.ID)
			return err
		}},
		{"edit", func() (err error) {
			edited, err = s.EditMessage(ctx, u.ID, second.User.ID, "two, edited", db.Fixed("chat"))
			return err
		}},
		{"jump to a label", func() (err error) {
			if label, err = s.AddLabel(ctx, u.ID, retried.Assistant.ID, "kept"); err != nil {
				return err
			}
			_, err = s.JumpToLabel(ctx, u.ID, label.ID)
			return err
		}},
		{"clear the context", func() (err error) {
			clear, err = s.AddContextClear(ctx, u.ID, first.Assistant.ID)
			return err
		}},
		{"undo the clear", func() error {
			_, err := s.UndoContextClear(ctx, u.ID, clear.ID)
			return err
		}},
		{"compact", func() error {
			_, err := s.AddCompaction(ctx, u.ID, first.Assistant.ID, "summary", db.MessageMeta{})
			return err
		}},
		{"ask for an image", func() error {
			_, _, err := s.AddImageRequest(ctx, u.ID, thread, "a cat", "", "test", 4)
			return err
		}},
		{"resume an agent run", func() error {
			a, err := s.SendMessage(ctx, u.ID, db.Send{ThreadID: thread, Content: "work", Kind: db.RouteAgent})
			if err != nil {
				return err
			}
			finish(a.Assistant, a.Run, db.RunInterrupted)
			_, err = s.ResumeRun(ctx, u.ID, a.Run.ID)
			return err
		}},
		{"delete a message", func() error {
			_, err := s.DeleteMessage(ctx, u.ID, edited.User.ID)
			return err
		}},
		{"delete the thread", func() error {
			_, err := s.DeleteThread(ctx, u.ID, thread)
			return err
		}},
	} {
		before := count(thread)
		if err := c.change(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		testwait.For(t, fmt.Sprintf("the note of %s", c.name), 10*time.Second, func() bool { return count(thread) > before })
	}
	if n := count(other.Thread.ID); n != 0 {
		t.Fatalf("writes to thread %d noted thread %d %d times", thread, other.Thread.ID, n)
	}
}
