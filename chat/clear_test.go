package chat_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"weft/chat"
	"weft/db"
)

// lastChat is the conversation part (no system message) of the newest
// streamed model request.
func (e *env) lastChat() []string {
	e.t.Helper()
	reqs := chatRequests(e.fake)
	if len(reqs) == 0 {
		e.t.Fatal("no model request")
	}
	var out []string
	for _, m := range roles(reqs[len(reqs)-1].Chat.Messages) {
		if !strings.HasPrefix(m, "system: ") {
			out = append(out, m)
		}
	}
	return out
}

// A /clear after an answer makes later requests, on the chat and the rag
// route, start after it; the turns stay in the thread; Undo sends them
// again; a sibling branch that does not pass through the cleared answer
// is not cleared.
func TestAClearMakesLaterRequestsSkipTheTurnsBeforeItUntilUndone(t *testing.T) {
	t.Parallel()
	rec := &recordingRetriever{}
	e := newEnv(t, chat.Config{Retriever: rec})
	ctx := context.Background()
	th, two := e.conversation("one", "two")

	clear, err := e.store.AddContextClear(ctx, e.user.ID, two.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.AddContextClear(ctx, e.user.ID, two.ID); !errors.Is(err, db.ErrAlreadyCleared) {
		t.Errorf("a second clear at the same place: err = %v, want ErrAlreadyCleared", err)
	}
	intruder, _ := e.newUser("intruder@example.com")
	if _, err := e.store.AddContextClear(ctx, intruder.ID, two.ID); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("a clear in another user's thread: err = %v, want ErrNotFound", err)
	}
	if _, err := e.store.UndoContextClear(ctx, intruder.ID, clear.ID); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("another user undoes the clear: err = %v, want ErrNotFound", err)
	}

	// Chat route.
	if _, three := e.wait(e.send(th.ID, "three")); three.Metadata.Route != db.RouteChat {
		t.Fatalf("the third answer came from route %q, want chat", three.Metadata.Route)
	}
	if got, want := e.lastChat(), []string{"user: three"}; !slices.Equal(got, want) {
		t.Errorf("chat after the clear sent %q, want %q", got, want)
	}

	// Rag route: the same thread with a knowledge base.
	kb, err := e.store.CreateKB(ctx, e.user.ID, e.ws.ID, db.KBInput{Name: "Manuals", EmbedModel: "embedder", Dims: 8})
	if err != nil {
		t.Fatal(err)
	}
	sent, err := e.rt.Send(ctx, e.user.ID, chat.Input{WorkspaceID: e.ws.ID, ThreadID: th.ID, Content: "four", SetKBs: true, KBs: []int64{kb.ID}})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(sent)
	if m := e.message(sent.Assistant.ID); m.Metadata.Route != db.RouteRAG {
		t.Fatalf("the fourth answer came from route %q, want rag", m.Metadata.Route)
	}
	if got, want := e.lastChat(), []string{"user: three", "assistant: You said: three", "user: four"}; !slices.Equal(got, want) {
		t.Errorf("rag after the clear sent %q, want %q", got, want)
	}
	reqs := chatRequests(e.fake)
	if sys := reqs[len(reqs)-1].Chat.Messages[0]; sys.Role != "system" || !strings.Contains(sys.Content, "a passage") {
		t.Errorf("the rag request lost its sources: %q", sys.Content)
	}
	if err := e.store.SetThreadKBs(ctx, e.user.ID, th.ID, nil); err != nil {
		t.Fatal(err)
	}

	// The turns stay in the thread.
	path, _, err := e.store.ActivePath(ctx, e.user.ID, th.ID, 100)
	if err != nil || len(path) != 8 {
		t.Fatalf("the thread's path has %d messages (%v), want 8", len(path), err)
	}

	// Another branch: a new version of "two" does not pass through the
	// cleared answer.
	edited, err := e.rt.Edit(ctx, e.user.ID, *two.ParentID, "two, again")
	if err != nil {
		t.Fatal(err)
	}
	e.wait(edited)
	if got, want := e.lastChat(), []string{"user: one", "assistant: You said: one", "user: two, again"}; !slices.Equal(got, want) {
		t.Errorf("the sibling branch sent %q, want %q", got, want)
	}

	// Back on the cleared branch, undone: everything is sent again.
	if _, err := e.store.SelectBranch(ctx, e.user.ID, sent.Assistant.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.UndoContextClear(ctx, e.user.ID, clear.ID); err != nil {
		t.Fatal(err)
	}
	e.wait(e.send(th.ID, "five"))
	want := []string{"user: one", "assistant: You said: one", "user: two", "assistant: You said: two",
		"user: three", "assistant: You said: three", "user: four", "assistant: " + e.message(sent.Assistant.ID).Content, "user: five"}
	if got := e.lastChat(); !slices.Equal(got, want) {
		t.Errorf("after Undo the request is %q, want the whole branch", got)
	}
}

// A summary of turns before a clear is not sent after it; a compaction
// after the clear summarizes only the turns after it.
func TestACompactionBeforeAClearIsNotSentAndOneAfterItCoversOnlyLaterTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	ctx := context.Background()
	th, alpha := e.conversation("alpha")
	e.wait(e.send(th.ID, "bravo"))
	old, err := e.rt.Compact(ctx, e.user.ID, th.ID) // summarizes "alpha"
	if err != nil {
		t.Fatal(err)
	}
	if *old.ParentID != alpha.ID {
		t.Fatalf("the summary hangs under %d, want the first answer %d", *old.ParentID, alpha.ID)
	}
	_, charlie := e.wait(e.send(th.ID, "charlie"))
	if got := roles(chatRequests(e.fake)[len(chatRequests(e.fake))-1].Chat.Messages); !strings.HasPrefix(got[0], "system: Summary of the earlier part") {
		t.Fatalf("before the clear the summary is not sent: %q", got)
	}
	if _, err := e.store.AddContextClear(ctx, e.user.ID, charlie.ID); err != nil {
		t.Fatal(err)
	}
	e.wait(e.send(th.ID, "delta"))
	e.wait(e.send(th.ID, "echo"))
	if got, want := roles(chatRequests(e.fake)[len(chatRequests(e.fake))-1].Chat.Messages),
		[]string{"user: delta", "assistant: You said: delta", "user: echo"}; !slices.Equal(got, want) {
		t.Errorf("after the clear the request is %q, want %q (no summary of the earlier turns)", got, want)
	}

	before := len(e.fake.Requests())
	node, err := e.rt.Compact(ctx, e.user.ID, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := node.Metadata.Compaction; c == nil || c.Covers != 2 {
		t.Errorf("the compaction after the clear covers %+v, want the 2 messages after it", node.Metadata.Compaction)
	}
	for _, r := range e.fake.Requests()[before:] {
		for _, m := range r.Chat.Messages {
			if strings.Contains(m.Content, "alpha") || strings.Contains(m.Content, "charlie") {
				t.Errorf("the summary request after the clear carries an earlier turn: %q", m.Content)
			}
		}
	}
	e.wait(e.send(th.ID, "foxtrot"))
	got := roles(chatRequests(e.fake)[len(chatRequests(e.fake))-1].Chat.Messages)
	if len(got) != 4 || !strings.HasPrefix(got[0], "system: Summary") || strings.Contains(got[0], old.Content) ||
		!slices.Equal(got[1:], []string{"user: echo", "assistant: You said: echo", "user: foxtrot"}) {
		t.Errorf("after the second compaction the request is %q", got)
	}
}
