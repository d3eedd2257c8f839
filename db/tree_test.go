package db_test

import (
	"context"
	"errors"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

// finish marks a send's answer complete with text, as a run would.
func finish(t *testing.T, store *db.DB, s db.Sent, text string) {
	t.Helper()
	if _, err := store.FinishRun(context.Background(), s.Run.ID, s.Assistant.ID, db.Finish{
		RunStatus: db.RunCompleted, MsgStatus: db.MsgComplete, Content: text}); err != nil {
		t.Fatal(err)
	}
}

func contents(path []db.Message) []string {
	var out []string
	for _, m := range path {
		out = append(out, m.Content)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEditAddsASiblingBranchAndTheOldOneStaysReachable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "tree@example.com")
	q1 := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q1"})
	finish(t, store, q1, "a1")
	q2 := send(t, store, u.ID, db.Send{ThreadID: q1.Thread.ID, Content: "q2"})
	finish(t, store, q2, "a2")
	th := q1.Thread.ID

	edited, err := store.EditMessage(ctx, u.ID, q2.User.ID, "q2 better", db.Fixed(db.RouteChat))
	if err != nil {
		t.Fatal(err)
	}
	finish(t, store, edited, "a2 better")
	if *edited.User.ParentID != q1.Assistant.ID {
		t.Fatal("the edited version is not a sibling of the original")
	}
	path, _, _ := store.ActivePath(ctx, u.ID, th, 50)
	if got := contents(path); !equal(got, []string{"q1", "a1", "q2 better", "a2 better"}) {
		t.Fatalf("active path after edit = %v", got)
	}
	b, err := store.Branches(ctx, u.ID, th, path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b[edited.User.ID]; got != (db.Branch{Pos: 2, Count: 2, Prev: q2.User.ID}) {
		t.Fatalf("branch of the new version = %+v", got)
	}
	if got := b[q1.User.ID]; got.Count != 1 {
		t.Fatalf("the root has %d versions", got.Count)
	}

	// Back to the first version: its whole branch comes back.
	if _, err := store.SelectBranch(ctx, u.ID, q2.User.ID); err != nil {
		t.Fatal(err)
	}
	path, _, _ = store.ActivePath(ctx, u.ID, th, 50)
	if got := contents(path); !equal(got, []string{"q1", "a1", "q2", "a2"}) {
		t.Fatalf("active path after switching back = %v", got)
	}
	if _, err := store.EditMessage(ctx, u.ID, q1.Assistant.ID, "x", db.Fixed(db.RouteChat)); !errors.Is(err, db.ErrNotEditable) {
		t.Fatalf("editing an answer: %v", err)
	}
}

func TestRegenerateAddsSiblingAnswersInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "regen@example.com")
	q := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q", Model: "tiny"})
	finish(t, store, q, "first")
	second, err := store.RetryAnswer(ctx, u.ID, q.Assistant.ID, db.Fixed(db.RouteChat), "other-model")
	if err != nil {
		t.Fatal(err)
	}
	if second.Run.Model != "other-model" {
		t.Fatalf("regenerate with a model ran %q", second.Run.Model)
	}
	finish(t, store, second, "second")
	third, err := store.RetryAnswer(ctx, u.ID, q.Assistant.ID, db.Fixed(db.RouteChat), "")
	if err != nil {
		t.Fatal(err)
	}
	if third.Run.Model != "tiny" {
		t.Fatalf("regenerate without a model ran %q, want the thread's", third.Run.Model)
	}
	path, _, _ := store.ActivePath(ctx, u.ID, q.Thread.ID, 10)
	b, _ := store.Branches(ctx, u.ID, q.Thread.ID, path)
	if got := b[third.Assistant.ID]; got.Pos != 3 || got.Count != 3 || got.Prev != second.Assistant.ID || got.Next != 0 {
		t.Fatalf("third answer's branch = %+v", got)
	}
	if _, err := store.RetryAnswer(ctx, u.ID, third.Assistant.ID, db.Fixed(db.RouteChat), ""); !errors.Is(err, db.ErrNotRetryable) {
		t.Fatalf("regenerating an answer still being written: %v", err)
	}
}

func TestContinueOnlyAppliesToAStoppedAnswerAtTheEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "cont@example.com")
	q := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q"})
	if _, err := store.ContinueAnswer(ctx, u.ID, q.Assistant.ID, "chat"); !errors.Is(err, db.ErrNotContinuable) {
		t.Fatalf("continuing a streaming answer: %v", err)
	}
	if _, err := store.FinishRun(ctx, q.Run.ID, q.Assistant.ID, db.Finish{RunStatus: db.RunCancelled, MsgStatus: db.MsgCancelled, Content: "half"}); err != nil {
		t.Fatal(err)
	}
	c, err := store.ContinueAnswer(ctx, u.ID, q.Assistant.ID, "chat")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Run.Continues || *c.Run.AssistantMessageID != q.Assistant.ID || c.Assistant.Status != db.MsgStreaming || c.Assistant.Content != "half" {
		t.Fatalf("continue = run %+v, message %+v", c.Run, c.Assistant)
	}
}

func TestForkCopiesThePathIntoANewThread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "fork@example.com")
	q1 := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q1", Title: "Original"})
	finish(t, store, q1, "a1")
	q2 := send(t, store, u.ID, db.Send{ThreadID: q1.Thread.ID, Content: "q2"})
	finish(t, store, q2, "a2")

	fork, err := store.ForkThread(ctx, u.ID, q1.Assistant.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fork.ID == q1.Thread.ID || fork.WorkspaceID != ws.ID || fork.Title != "Fork of Original" {
		t.Fatalf("fork = %+v", fork)
	}
	path, _, _ := store.ActivePath(ctx, u.ID, fork.ID, 10)
	if got := contents(path); !equal(got, []string{"q1", "a1"}) {
		t.Fatalf("forked path = %v", got)
	}
	orig, _, _ := store.ActivePath(ctx, u.ID, q1.Thread.ID, 10)
	if len(orig) != 4 {
		t.Fatalf("the original thread changed: %v", contents(orig))
	}
	other, _ := newUser(t, store, "thief@example.com")
	if _, err := store.ForkThread(ctx, other.ID, q1.Assistant.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("forking someone else's message: %v", err)
	}
}

func TestDeletingAMessageRemovesItsSubtreeAndMovesTheVisibleBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "del@example.com")
	q1 := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q1"})
	finish(t, store, q1, "a1")
	q2 := send(t, store, u.ID, db.Send{ThreadID: q1.Thread.ID, Content: "q2"})
	finish(t, store, q2, "a2")
	q3 := send(t, store, u.ID, db.Send{ThreadID: q1.Thread.ID, Content: "q3"}) // still queued
	alt, err := store.EditMessage(ctx, u.ID, q2.User.ID, "q2 alt", db.Fixed(db.RouteChat))
	if err != nil {
		t.Fatal(err)
	}
	finish(t, store, alt, "a2 alt")
	if _, err := store.SelectBranch(ctx, u.ID, q2.User.ID); err != nil {
		t.Fatal(err)
	}
	mustExec(t, store, `INSERT INTO attachments (owner_id, message_id, sha256) VALUES ($1, $2, 'blob')`, u.ID, q3.User.ID)

	del, err := store.DeleteMessage(ctx, u.ID, q2.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	if del.Messages != 4 || len(del.ActiveRuns) != 1 || del.ActiveRuns[0] != q3.Run.ID || len(del.Released) != 1 {
		t.Fatalf("deleted %+v", del)
	}
	path, _, _ := store.ActivePath(ctx, u.ID, q1.Thread.ID, 10)
	if got := contents(path); !equal(got, []string{"q1", "a1", "q2 alt", "a2 alt"}) {
		t.Fatalf("visible branch after delete = %v", got)
	}
	if _, err := store.Run(ctx, u.ID, q3.Run.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a run inside the deleted subtree is still there: %v", err)
	}
	var runsLeft int
	if err := store.Pool.QueryRow(ctx, "SELECT count(*) FROM runs WHERE thread_id = $1", q1.Thread.ID).Scan(&runsLeft); err != nil || runsLeft != 2 {
		t.Fatalf("runs left = %d (%v), want the first turn's and the alternative's", runsLeft, err)
	}
	// Deleting the root empties the thread but keeps it.
	if _, err := store.DeleteMessage(ctx, u.ID, q1.User.ID); err != nil {
		t.Fatal(err)
	}
	if path, _, _ := store.ActivePath(ctx, u.ID, q1.Thread.ID, 10); len(path) != 0 {
		t.Fatalf("path after deleting the root = %v", contents(path))
	}
}

// The branch shown after a deletion is chosen before the rows go (the
// thread's row is written once, run_locks.go): deleting the newest of two
// versions shows the older one, deleting a newest root the older root.
func TestDeletingTheNewestVisibleBranchShowsTheOlderOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "newest@example.com")
	q1 := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q1"})
	finish(t, store, q1, "a1")
	q2 := send(t, store, u.ID, db.Send{ThreadID: q1.Thread.ID, Content: "q2"})
	finish(t, store, q2, "a2")
	alt, err := store.EditMessage(ctx, u.ID, q2.User.ID, "q2 alt", db.Fixed(db.RouteChat))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.DeleteMessage(ctx, u.ID, alt.User.ID); err != nil {
		t.Fatal(err)
	}
	path, _, _ := store.ActivePath(ctx, u.ID, q1.Thread.ID, 10)
	if got := contents(path); !equal(got, []string{"q1", "a1", "q2", "a2"}) {
		t.Fatalf("visible branch after deleting the newest version = %v", got)
	}
	root2, err := store.EditMessage(ctx, u.ID, q1.User.ID, "q1 alt", db.Fixed(db.RouteChat))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.DeleteMessage(ctx, u.ID, root2.User.ID); err != nil {
		t.Fatal(err)
	}
	path, _, _ = store.ActivePath(ctx, u.ID, q1.Thread.ID, 10)
	if got := contents(path); !equal(got, []string{"q1", "a1", "q2", "a2"}) {
		t.Fatalf("visible branch after deleting the newest root = %v", got)
	}
}

func TestThreadsMoveBetweenWorkspacesAndArchiveAndUnarchive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "move@example.com")
	other, err := store.CreateWorkspace(ctx, u.ID, "Other")
	if err != nil {
		t.Fatal(err)
	}
	th := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q"}).Thread
	if err := store.MoveThread(ctx, u.ID, th.ID, other.ID); err != nil {
		t.Fatal(err)
	}
	if page, _, _ := store.SidebarThreads(ctx, u.ID, other.ID, nil, 10); len(page) != 1 {
		t.Fatal("the moved thread is not in its new workspace")
	}
	stranger, sws := newUser(t, store, "stranger@example.com")
	if err := store.MoveThread(ctx, u.ID, th.ID, sws.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("moving into someone else's workspace: %v", err)
	}
	if err := store.MoveThread(ctx, stranger.ID, th.ID, sws.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("moving someone else's thread: %v", err)
	}
	if err := store.SetThreadArchived(ctx, u.ID, th.ID, true); err != nil {
		t.Fatal(err)
	}
	arch, err := store.ArchivedThreads(ctx, u.ID, other.ID, 10)
	if err != nil || len(arch) != 1 || arch[0].ID != th.ID {
		t.Fatalf("archived = %v, %v", arch, err)
	}
	if page, _, _ := store.SidebarThreads(ctx, u.ID, other.ID, nil, 10); len(page) != 0 {
		t.Fatal("an archived thread is still in the sidebar")
	}
}

func TestSearchFindsWordsAndSubstringsInAnyScriptOnlyInTheUsersWorkspace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "search@example.com")
	for _, c := range []struct{ q, a string }{
		{"How do lighthouses work?", "A lighthouse uses a Fresnel lens."},
		{"Что такое ткацкий станок?", "Ткацкий станок — это устройство для ткачества."},
		{"織物について教えて", "織物は経糸と緯糸で作られます。"},
	} {
		s := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: c.q, Title: c.q})
		finish(t, store, s, c.a)
	}
	intruder, iws := newUser(t, store, "intruder@example.com")
	s := send(t, store, intruder.ID, db.Send{WorkspaceID: iws.ID, Content: "Fresnel secrets"})
	finish(t, store, s, "Fresnel")

	for _, tc := range []struct {
		q    string
		want string
	}{
		{"fresnel", "A lighthouse uses a Fresnel lens."},
		{"СТАНОК", "Ткацкий станок — это устройство для ткачества."},
		{"経糸", "織物は経糸と緯糸で作られます。"},
		{"lighthous", "How do lighthouses work?"},
	} {
		hits, err := store.Search(ctx, u.ID, ws.ID, tc.q, 10)
		if err != nil {
			t.Fatalf("search %q: %v", tc.q, err)
		}
		found := false
		for _, h := range hits {
			if h.Text == tc.want {
				found = true
			}
			if h.ThreadID == s.Thread.ID {
				t.Fatalf("search %q found another user's thread", tc.q)
			}
		}
		if !found {
			t.Errorf("search %q: %d hits, none is %q", tc.q, len(hits), tc.want)
		}
	}
	if hits, _ := store.Search(ctx, u.ID, ws.ID, "100%_", 10); len(hits) != 0 {
		t.Fatalf("LIKE wildcards in the query matched %d rows", len(hits))
	}
}
