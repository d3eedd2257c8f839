package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

// branched is a thread q1 → a1 → q2 → a2 where q2 was edited: the active
// branch is q1 → a1 → q2' → a2', the other one still holds q2 → a2.
type branched struct {
	thread         int64
	q1, a1, q2, a2 int64
	q2e, a2e       int64
}

func newBranched(t *testing.T, store *db.DB, user, ws int64) branched {
	t.Helper()
	q1 := send(t, store, user, db.Send{WorkspaceID: ws, Content: "q1"})
	finish(t, store, q1, "a1")
	q2 := send(t, store, user, db.Send{ThreadID: q1.Thread.ID, Content: "q2"})
	finish(t, store, q2, "a2")
	ed, err := store.EditMessage(context.Background(), user, q2.User.ID, "q2 edited", db.Fixed(db.RouteChat))
	if err != nil {
		t.Fatal(err)
	}
	finish(t, store, ed, "a2 edited")
	return branched{thread: q1.Thread.ID, q1: q1.User.ID, a1: q1.Assistant.ID, q2: q2.User.ID, a2: q2.Assistant.ID,
		q2e: ed.User.ID, a2e: ed.Assistant.ID}
}

func activeLeaf(t *testing.T, store *db.DB, user, thread int64) int64 {
	t.Helper()
	th, err := store.Thread(context.Background(), user, thread)
	if err != nil || th.ActiveLeafID == nil {
		t.Fatalf("thread %d: %v %v", thread, th.ActiveLeafID, err)
	}
	return *th.ActiveLeafID
}

func TestALabelIsAddedRenamedListedAndRemovedOnAnyBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "labels@example.com")
	b := newBranched(t, store, u.ID, ws.ID)

	// A label on the hidden branch's answer and one on the shared question.
	hidden, err := store.AddLabel(ctx, u.ID, b.a2, "  the   first try ")
	if err != nil {
		t.Fatal(err)
	}
	if hidden.Name != "the first try" || hidden.MessageID != b.a2 || hidden.ThreadID != b.thread || hidden.Role != db.RoleAssistant || hidden.Snippet != "a2" {
		t.Fatalf("added label = %+v", hidden)
	}
	shared, err := store.AddLabel(ctx, u.ID, b.q1, "start")
	if err != nil {
		t.Fatal(err)
	}
	all, err := store.ThreadLabels(ctx, u.ID, b.thread)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != shared.ID || all[1].ID != hidden.ID {
		t.Fatalf("thread labels = %+v, want start (q1) then the first try (a2), in message order", all)
	}
	by, err := store.MessageLabels(ctx, u.ID, b.thread, []int64{b.q1, b.a1, b.q2e})
	if err != nil {
		t.Fatal(err)
	}
	if len(by) != 1 || len(by[b.q1]) != 1 || by[b.q1][0].Name != "start" {
		t.Fatalf("labels of the visible messages = %+v", by)
	}

	renamed, err := store.RenameLabel(ctx, u.ID, hidden.ID, "draft one")
	if err != nil || renamed.Name != "draft one" {
		t.Fatalf("rename = %+v, %v", renamed, err)
	}
	if _, err := store.DeleteLabel(ctx, u.ID, shared.ID); err != nil {
		t.Fatal(err)
	}
	all, _ = store.ThreadLabels(ctx, u.ID, b.thread)
	if len(all) != 1 || all[0].Name != "draft one" {
		t.Fatalf("after rename and delete = %+v", all)
	}
	// Deleting the message takes its labels with it.
	if _, err := store.DeleteMessage(ctx, u.ID, b.q2); err != nil {
		t.Fatal(err)
	}
	if all, _ = store.ThreadLabels(ctx, u.ID, b.thread); len(all) != 0 {
		t.Fatalf("labels of a deleted message remain: %+v", all)
	}
}

func TestALabelNeedsANameOfAtMost80Characters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "names@example.com")
	s := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q"})
	for _, tc := range []struct {
		name string
		want error
	}{
		{"", db.ErrLabelEmpty},
		{" \t\n ", db.ErrLabelEmpty},
		{strings.Repeat("é", 81), db.ErrLabelTooLong},
	} {
		if _, err := store.AddLabel(ctx, u.ID, s.User.ID, tc.name); !errors.Is(err, tc.want) {
			t.Errorf("AddLabel(%q) = %v, want %v", tc.name, err, tc.want)
		}
	}
	ok, err := store.AddLabel(ctx, u.ID, s.User.ID, strings.Repeat("é", 80))
	if err != nil {
		t.Fatalf("an 80-character label: %v", err)
	}
	if _, err := store.RenameLabel(ctx, u.ID, ok.ID, ""); !errors.Is(err, db.ErrLabelEmpty) {
		t.Errorf("renaming to nothing = %v", err)
	}
}

func TestAnotherUserCannotLabelSeeRenameJumpOrRemoveLabels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "owner@example.com")
	other, _ := newUser(t, store, "other@example.com")
	b := newBranched(t, store, u.ID, ws.ID)
	l, err := store.AddLabel(ctx, u.ID, b.a2, "mine")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddLabel(ctx, other.ID, b.a2, "theirs"); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("labelling another user's message = %v, want not found", err)
	}
	if _, err := store.Label(ctx, other.ID, l.ID); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("reading another user's label = %v", err)
	}
	if _, err := store.RenameLabel(ctx, other.ID, l.ID, "x"); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("renaming another user's label = %v", err)
	}
	if _, err := store.JumpToLabel(ctx, other.ID, l.ID); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("jumping to another user's label = %v", err)
	}
	if _, err := store.DeleteLabel(ctx, other.ID, l.ID); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("removing another user's label = %v", err)
	}
	if ls, err := store.ThreadLabels(ctx, other.ID, b.thread); err != nil || len(ls) != 0 {
		t.Errorf("another user lists %+v, %v", ls, err)
	}
	if m, err := store.MessageLabels(ctx, other.ID, b.thread, []int64{b.a2}); err != nil || len(m) != 0 {
		t.Errorf("another user sees %+v, %v", m, err)
	}
	if activeLeaf(t, store, u.ID, b.thread) != b.a2e {
		t.Error("another user's jump moved the owner's branch")
	}
	if got, err := store.Label(ctx, u.ID, l.ID); err != nil || got.Name != "mine" {
		t.Errorf("the owner's label after the other's attempts = %+v, %v", got, err)
	}
}

func TestJumpingToALabelShowsABranchThroughItsMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "jump@example.com")
	b := newBranched(t, store, u.ID, ws.ID)
	onHidden, _ := store.AddLabel(ctx, u.ID, b.q2, "old question")
	onShared, _ := store.AddLabel(ctx, u.ID, b.q1, "start")

	if _, err := store.JumpToLabel(ctx, u.ID, onHidden.ID); err != nil {
		t.Fatal(err)
	}
	if got := activeLeaf(t, store, u.ID, b.thread); got != b.a2 {
		t.Fatalf("after the jump the active leaf is %d, want the hidden branch's %d", got, b.a2)
	}
	// A label on the path shown already changes nothing.
	if _, err := store.JumpToLabel(ctx, u.ID, onShared.ID); err != nil {
		t.Fatal(err)
	}
	if got := activeLeaf(t, store, u.ID, b.thread); got != b.a2 {
		t.Fatalf("jumping to a label on the shown path moved the leaf to %d", got)
	}
}

func TestLeavingABranchKeepsAPendingSummaryOnlyWhenSwitchedOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "leave@example.com")
	other, _ := newUser(t, store, "other@example.com")
	b := newBranched(t, store, u.ID, ws.ID)

	// Off (the default): the switch happens, no summary.
	sw, err := store.LeaveBranch(ctx, u.ID, b.q2)
	if err != nil || sw.Summary != nil || sw.Thread != b.thread {
		t.Fatalf("leave with summaries off = %+v, %v", sw, err)
	}
	if activeLeaf(t, store, u.ID, b.thread) != b.a2 {
		t.Fatal("LeaveBranch did not switch the branch")
	}
	if err := store.SetSummarizeBranches(ctx, other.ID, b.thread, true); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("another user switched summaries on: %v", err)
	}
	if err := store.SetSummarizeBranches(ctx, u.ID, b.thread, true); err != nil {
		t.Fatal(err)
	}
	if on, _ := store.SummarizeBranches(ctx, u.ID, b.thread); !on {
		t.Fatal("summaries are not on")
	}
	if _, err := store.LeaveBranch(ctx, other.ID, b.q2e); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("another user switched the branch: %v", err)
	}

	// Leaving q2 → a2 for the edited version: a pending summary of q2 → a2,
	// under q2, forking at a1.
	sw, err = store.LeaveBranch(ctx, u.ID, b.q2e)
	if err != nil || sw.Summary == nil {
		t.Fatalf("leave with summaries on = %+v, %v", sw, err)
	}
	s := *sw.Summary
	if s.BranchMessageID != b.q2 || s.ForkID == nil || *s.ForkID != b.a1 || *s.LeafMessageID != b.a2 || s.Status != db.SummaryPending {
		t.Fatalf("summary = %+v, want the branch q2 (%d) forking at a1 (%d) up to a2 (%d), pending", s, b.q2, b.a1, b.a2)
	}
	work, err := store.BranchSummaryWork(ctx, u.ID, s.ID, s.Attempt)
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(work.Turns); !equal(got, []string{"q2", "a2"}) {
		t.Fatalf("the turns to summarize = %v, want only the branch left", got)
	}
	if _, err := store.BranchSummaryWork(ctx, other.ID, s.ID, s.Attempt); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("another user read the work: %v", err)
	}
	if err := store.FinishBranchSummary(ctx, other.ID, s.ID, s.Attempt, "m", "stolen", ""); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("another user finished the summary: %v", err)
	}
	if err := store.FinishBranchSummary(ctx, u.ID, s.ID, s.Attempt, "m", "They asked q2.", ""); err != nil {
		t.Fatal(err)
	}

	// Shown beside the edited version (the visible sibling), not beside q2.
	path, _, _ := store.ActivePath(ctx, u.ID, b.thread, 50)
	beside, err := store.BranchSummariesBeside(ctx, u.ID, b.thread, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(beside) != 1 || len(beside[b.q2e]) != 1 || beside[b.q2e][0].Summary != "They asked q2." {
		t.Fatalf("summaries beside the path = %+v, want the summary beside q2 edited", beside)
	}
	if m, err := store.BranchSummariesBeside(ctx, other.ID, b.thread, path); err != nil || len(m) != 0 {
		t.Errorf("another user sees summaries %+v, %v", m, err)
	}

	// Going back to q2 and leaving it again unchanged keeps the summary.
	if _, err := store.LeaveBranch(ctx, u.ID, b.q2); err != nil {
		t.Fatal(err)
	}
	sw, err = store.LeaveBranch(ctx, u.ID, b.q2e)
	if err != nil || sw.Summary != nil {
		t.Fatalf("leaving an unchanged branch again = %+v, %v, want the kept summary", sw.Summary, err)
	}
	// A failed summary can be retried, by its owner only.
	if _, err := store.RetryBranchSummary(ctx, other.ID, s.ID); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("another user retried: %v", err)
	}
	if th, err := store.DeleteBranchSummary(ctx, other.ID, s.ID); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("another user deleted the summary of thread %d: %v", th, err)
	}
	if th, err := store.DeleteBranchSummary(ctx, u.ID, s.ID); err != nil || th != b.thread {
		t.Fatalf("delete = %d, %v", th, err)
	}
}

func TestAnOlderSummaryAttemptNeverOverwritesANewerOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "attempts@example.com")
	b := newBranched(t, store, u.ID, ws.ID)
	if err := store.SetSummarizeBranches(ctx, u.ID, b.thread, true); err != nil {
		t.Fatal(err)
	}
	if _, err := store.LeaveBranch(ctx, u.ID, b.q2); err != nil { // leaves the edited branch
		t.Fatal(err)
	}
	sw, err := store.LeaveBranch(ctx, u.ID, b.q2e)
	if err != nil || sw.Summary == nil {
		t.Fatalf("leave = %+v, %v", sw, err)
	}
	first := *sw.Summary
	if err := store.FinishBranchSummary(ctx, u.ID, first.ID, first.Attempt, "m", "", "the model server is down"); err != nil {
		t.Fatal(err)
	}
	again, err := store.RetryBranchSummary(ctx, u.ID, first.ID)
	if err != nil || again.Attempt != first.Attempt+1 || again.Status != db.SummaryPending {
		t.Fatalf("retry = %+v, %v", again, err)
	}
	if err := store.FinishBranchSummary(ctx, u.ID, first.ID, first.Attempt, "m", "stale", ""); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("the older attempt's outcome was kept: %v", err)
	}
	if _, err := store.BranchSummaryWork(ctx, u.ID, first.ID, first.Attempt); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("the older attempt still gets work: %v", err)
	}
	if err := store.FinishBranchSummary(ctx, u.ID, first.ID, again.Attempt, "m", "fresh", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.BranchSummary(ctx, u.ID, first.ID); got.Summary != "fresh" || got.Status != db.SummaryComplete {
		t.Errorf("summary = %+v", got)
	}
}
