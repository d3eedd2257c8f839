package chat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/internal/testwait"
)

// answerItem is the item of message id among a view's messages.
func answerItem(t *testing.T, v chat.ThreadView, id int64) chat.MessageItem {
	t.Helper()
	for _, it := range v.Messages {
		if it.Message.ID == id {
			return it
		}
	}
	t.Fatalf("message %d is not on the page", id)
	return chat.MessageItem{}
}

func TestAThreadViewShowsAStreamingAnswerWithItsRunAndAnAnswerWithoutOneAsFinal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{FlushEvery: 20 * time.Millisecond})
	sent := e.send(0, "[[slow:2ms]][[tokens:400]]")
	ctx := context.Background()
	views, streaming := 0, 0
	testwait.For(t, "the answer to end", 20*time.Second, func() bool {
		v, err := e.rt.ThreadView(ctx, e.user.ID, sent.Thread.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		views++
		it := answerItem(t, v, sent.Assistant.ID)
		switch {
		case it.Message.Status == db.MsgStreaming && it.Run == nil:
			t.Fatalf("view %d: a streaming answer without its run (%d chars)", views, len(it.Message.Content))
		case it.Run == nil && it.Message.Status != db.MsgComplete:
			t.Fatalf("view %d: the answer ended %s", views, it.Message.Status)
		case it.Run != nil && it.Run.ID != sent.Run.ID:
			t.Fatalf("view %d: the answer comes with run %d, want %d", views, it.Run.ID, sent.Run.ID)
		case it.Run != nil:
			streaming++
			return false
		}
		if it.Message.Content != tokens(1, 400) {
			t.Fatalf("view %d: the final answer is %q", views, it.Message.Content)
		}
		return true
	})
	if streaming == 0 {
		t.Fatal("no view caught the answer while it streamed: the test proved nothing")
	}
}

func TestAThreadViewReadsTheThreadItsWorkspaceRolesAndKnowledgeBases(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	ctx := context.Background()
	kb, err := e.store.CreateKB(ctx, e.user.ID, e.ws.ID, db.KBInput{Name: "Manuals", EmbedModel: "embedder", Dims: 8})
	if err != nil {
		t.Fatal(err)
	}
	sent, err := e.rt.Send(ctx, e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Content: "Hello", SetKBs: true, KBs: []int64{kb.ID}})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(sent)
	v, err := e.rt.ThreadView(ctx, e.user.ID, sent.Thread.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v.Thread.ID != sent.Thread.ID || v.Workspace.ID != e.ws.ID || len(v.Messages) != 2 || v.More || v.OtherBranch != 0 {
		t.Fatalf("view = thread %d, workspace %d, %d messages, more %v, other %d", v.Thread.ID, v.Workspace.ID, len(v.Messages), v.More, v.OtherBranch)
	}
	if len(v.KBs) != 1 || len(v.Attached) != 1 || v.Attached[0].ID != kb.ID {
		t.Fatalf("knowledge bases %v, attached %v", v.KBs, v.Attached)
	}
	other, _ := e.newUser("other@example.com")
	if _, err := e.rt.ThreadView(ctx, other.ID, sent.Thread.ID, 0); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("another user reads the thread: %v", err)
	}
}

func TestAThreadViewAtAMessageShowsItsBranchWithoutChangingTheSavedOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	ctx := context.Background()
	first := e.send(0, "version one")
	e.wait(first)
	edited, err := e.rt.Edit(ctx, e.user.ID, first.User.ID, "version two")
	if err != nil {
		t.Fatal(err)
	}
	e.wait(edited)
	v, err := e.rt.ThreadView(ctx, e.user.ID, first.Thread.ID, first.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.OtherBranch != first.Assistant.ID || len(v.Messages) != 2 || v.Messages[0].Message.Content != "version one" {
		t.Fatalf("at the first version: other branch %d (want %d), %d messages", v.OtherBranch, first.Assistant.ID, len(v.Messages))
	}
	if v.Messages[0].Branch.Count != 2 {
		t.Fatalf("the edited message shows %d versions, want 2", v.Messages[0].Branch.Count)
	}
	saved, err := e.rt.ThreadView(ctx, e.user.ID, first.Thread.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if saved.OtherBranch != 0 || saved.Messages[0].Message.Content != "version two" {
		t.Fatalf("the saved branch changed: other %d, first %q", saved.OtherBranch, saved.Messages[0].Message.Content)
	}
}

func TestHistoryIsThePageAboveAMessageOfTheThread(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	ctx := context.Background()
	first := e.send(0, "one")
	e.wait(first)
	second := e.send(first.Thread.ID, "two")
	e.wait(second)
	h, err := e.rt.History(ctx, e.user.ID, first.Thread.ID, second.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 2 || h.Messages[0].Message.ID != first.User.ID || h.Messages[1].Message.ID != first.Assistant.ID || h.More {
		t.Fatalf("history above the second message: %d messages, more %v", len(h.Messages), h.More)
	}
	if top, err := e.rt.History(ctx, e.user.ID, first.Thread.ID, first.User.ID); err != nil || len(top.Messages) != 0 {
		t.Fatalf("history above the first message: %d messages, %v", len(top.Messages), err)
	}
	other := e.send(0, "elsewhere")
	if _, err := e.rt.History(ctx, e.user.ID, first.Thread.ID, other.User.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a message of another thread: %v", err)
	}
}
