package db_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/internal/testenv"
)

func TestTheFirstAccountIsAdminAndLaterOnesAreMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	first, ws := newUser(t, store, "first@example.com")
	second, _ := newUser(t, store, "second@example.com")
	if first.Role != "admin" || second.Role != "member" {
		t.Fatalf("roles = %q, %q; want admin, member", first.Role, second.Role)
	}
	if !ws.IsDefault || ws.OwnerID != first.ID {
		t.Fatalf("registration did not create the default workspace: %+v", ws)
	}
	if _, _, err := store.CreateUser(ctx, "FIRST@example.com", "", "x"); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("same email in other case: err = %v, want ErrConflict", err)
	}
	if err := store.SetSetting(ctx, "signup_mode", db.SignupClosed); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.CreateUser(ctx, "third@example.com", "", "x"); !errors.Is(err, db.ErrSignupClosed) {
		t.Fatalf("closed sign-up: err = %v, want ErrSignupClosed", err)
	}
}

func TestThreadsAreReachedOnlyThroughTheirOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	alice, aws := newUser(t, store, "alice@example.com")
	bob, bws := newUser(t, store, "bob@example.com")
	th := send(t, store, alice.ID, db.Send{WorkspaceID: aws.ID, Title: "a", Content: "hello"}).Thread
	// Bob cannot create a thread in Alice's workspace.
	if _, err := store.SendMessage(ctx, bob.ID, db.Send{WorkspaceID: aws.ID, Content: "x", Kind: "chat"}); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("thread in a foreign workspace: err = %v", err)
	}
	checks := map[string]error{
		"read":    func() error { _, err := store.Thread(ctx, bob.ID, th.ID); return err }(),
		"rename":  store.RenameThread(ctx, bob.ID, th.ID, "mine"),
		"pin":     store.SetThreadPinned(ctx, bob.ID, th.ID, true),
		"archive": store.SetThreadArchived(ctx, bob.ID, th.ID, true),
		"append": func() error {
			_, err := store.SendMessage(ctx, bob.ID, db.Send{ThreadID: th.ID, Content: "x", Kind: "chat"})
			return err
		}(),
		"delete": func() error { _, err := store.DeleteThread(ctx, bob.ID, th.ID); return err }(),
		"workspace": func() error {
			_, err := store.Workspace(ctx, bob.ID, aws.ID)
			return err
		}(),
		"rename workspace": store.RenameWorkspace(ctx, bob.ID, aws.ID, "mine"),
	}
	for what, err := range checks {
		if !errors.Is(err, db.ErrNotFound) {
			t.Errorf("bob %s alice's thread: err = %v, want ErrNotFound", what, err)
		}
	}
	got, err := store.Thread(ctx, alice.ID, th.ID)
	if err != nil || got.Title != "a" || got.Pinned || got.Archived {
		t.Fatalf("alice's thread changed by bob: %+v, %v", got, err)
	}
	page, _, err := store.SidebarThreads(ctx, bob.ID, bws.ID, nil, 10)
	if err != nil || len(page) != 0 {
		t.Fatalf("bob's sidebar = %v, %v", page, err)
	}
}

func TestMessagesFormATreeAndTheActivePathFollowsTheLeaf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "tree@example.com")
	one := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "one"})
	th := one.Thread
	two := send(t, store, u.ID, db.Send{ThreadID: th.ID, Content: "two"})
	three := send(t, store, u.ID, db.Send{ThreadID: th.ID, Content: "three"})
	if one.User.ParentID != nil || *one.Assistant.ParentID != one.User.ID ||
		*two.User.ParentID != one.Assistant.ID || *three.User.ParentID != two.Assistant.ID {
		t.Fatal("each message must hang under the previous answer")
	}
	if one.Assistant.Status != db.MsgStreaming || one.Run.Status != db.RunQueued || *one.Run.AssistantMessageID != one.Assistant.ID {
		t.Fatalf("a send must create a streaming answer and a queued run: %+v %+v", one.Assistant, one.Run)
	}
	path, more, err := store.ActivePath(ctx, u.ID, th.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if more || len(path) != 6 || path[0].Content != "one" || path[4].Content != "three" || path[5].ID != three.Assistant.ID {
		t.Fatalf("path = %+v more=%v", path, more)
	}
	tail, more, err := store.ActivePath(ctx, u.ID, th.ID, 2)
	if err != nil || !more || len(tail) != 2 || tail[0].Content != "three" {
		t.Fatalf("last 2 of the path = %+v more=%v err=%v", tail, more, err)
	}
	upTo, _, err := store.PathTo(ctx, u.ID, two.User.ID, 100)
	if err != nil || len(upTo) != 3 || upTo[2].Content != "two" {
		t.Fatalf("path to the second question = %+v, %v", upTo, err)
	}
}

func TestDeletingAThreadRemovesItsMessagesRunsAndFilesTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "del@example.com")
	sent := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "bye"})
	th, m := sent.Thread, sent.User
	keep := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "stay"}).Thread
	mustExec(t, store, `INSERT INTO attachments (owner_id, message_id, sha256, name) VALUES ($1, $2, 'abc', 'f.txt')`, u.ID, m.ID)
	mustExec(t, store, `INSERT INTO media (message_id, kind, sha256) VALUES ($1, 'audio', 'def')`, m.ID)

	released, err := store.DeleteThread(ctx, u.ID, th.ID)
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if len(released) != 2 {
		t.Fatalf("released blobs = %v, want the attachment's and the media's", released)
	}
	for _, table := range []string{"messages", "runs", "attachments", "media"} {
		var n int
		q := fmt.Sprintf("SELECT count(*) FROM %s", table)
		if table == "messages" || table == "runs" {
			q += fmt.Sprintf(" WHERE thread_id = %d", th.ID)
		}
		if err := store.Pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s left behind: %d rows", table, n)
		}
	}
	if _, err := store.Thread(ctx, u.ID, keep.ID); err != nil {
		t.Fatalf("the other thread was touched: %v", err)
	}
}

func TestSidebarPagesThroughTenThousandThreadsNewestFirstUsingItsIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "many@example.com")
	mustExec(t, store, `INSERT INTO threads (workspace_id, owner_id, title, last_activity_at)
		SELECT $1, $2, 'thread ' || g, now() - g * interval '1 second' FROM generate_series(1, 10000) g`, ws.ID, u.ID)
	mustExec(t, store, `UPDATE threads SET pinned = true WHERE title = 'thread 5000'`)
	mustExec(t, store, `ANALYZE threads`)

	seen := map[int64]bool{}
	var prev *db.ThreadSummary
	var after *db.ThreadCursor
	pages := 0
	for {
		page, next, err := store.SidebarThreads(ctx, u.ID, ws.ID, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for i := range page {
			th := page[i]
			if seen[th.ID] {
				t.Fatalf("thread %d listed twice", th.ID)
			}
			seen[th.ID] = true
			if prev == nil && th.Title != "thread 5000" {
				t.Fatalf("first entry %q, want the pinned thread first", th.Title)
			}
			if prev != nil && !prev.Pinned && th.LastActivityAt.After(prev.LastActivityAt) {
				t.Fatalf("%q (%v) after %q (%v): not newest first", th.Title, th.LastActivityAt, prev.Title, prev.LastActivityAt)
			}
			prev = &th
		}
		if next == nil {
			break
		}
		after = next
	}
	if len(seen) != 10000 || pages != 20 {
		t.Fatalf("saw %d threads in %d pages, want 10000 in 20", len(seen), pages)
	}

	var plan strings.Builder
	rows, err := store.Pool.Query(ctx, `EXPLAIN SELECT id, title, pinned, last_activity_at FROM threads
		WHERE workspace_id = $1 AND owner_id = $2 AND NOT archived
		AND (pinned, last_activity_at, id) < ($4, $5, $6)
		ORDER BY pinned DESC, last_activity_at DESC, id DESC LIMIT $3`, ws.ID, u.ID, 51, false, time.Now(), int64(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		plan.WriteString(line + "\n")
	}
	if !strings.Contains(plan.String(), "threads_sidebar_idx") || strings.Contains(plan.String(), "Sort") {
		t.Fatalf("sidebar query does not read threads_sidebar_idx in order:\n%s", plan.String())
	}
}

func mustExec(t *testing.T, store *db.DB, sql string, args ...any) {
	t.Helper()
	if _, err := store.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestAMessageWithoutTextInAThreadWithKnowledgeBasesIsAnsweredByChatWithANote(t *testing.T) {
	t.Parallel()
	d := testenv.NewDB(t)
	ctx := context.Background()
	u, ws, err := d.CreateUser(ctx, "files@example.com", "", "x")
	if err != nil {
		t.Fatal(err)
	}
	kb, err := d.CreateKB(ctx, u.ID, ws.ID, db.KBInput{Name: "Docs", EmbedModel: "embedder", Dims: 8})
	if err != nil {
		t.Fatal(err)
	}
	withText, err := d.SendMessage(ctx, u.ID, db.Send{WorkspaceID: ws.ID, Title: "t", Content: "What is in the docs?", SetKBs: true, KBs: []int64{kb.ID}, Route: chat.ChooseRoute})
	if err != nil {
		t.Fatal(err)
	}
	if withText.Run.Kind != db.RouteRAG {
		t.Errorf("a question with text in a thread with a knowledge base: route %s, want rag", withText.Run.Kind)
	}
	// Files only (attachments bring such messages): nothing to search for.
	filesOnly, err := d.SendMessage(ctx, u.ID, db.Send{ThreadID: withText.Thread.ID, Content: "", Route: chat.ChooseRoute})
	if err != nil {
		t.Fatal(err)
	}
	if filesOnly.Run.Kind != db.RouteChat || !strings.Contains(string(filesOnly.Assistant.Metadata.Raw), `"route_note": "no-text"`) {
		t.Errorf("files only: route %s, metadata %s; want chat with a note", filesOnly.Run.Kind, filesOnly.Assistant.Metadata.Raw)
	}
}

func TestTurnsToIsThePathWithoutItsMetadataAndOnlyForTheOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	u, ws := newUser(t, store, "turns@example.com")
	other, _ := newUser(t, store, "other-turns@example.com")
	one := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "one"})
	two := send(t, store, u.ID, db.Send{ThreadID: one.Thread.ID, Content: "two"})
	path, _, err := store.PathTo(ctx, u.ID, two.Assistant.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	if path[1].Metadata.Route == "" {
		t.Fatal("premise: an answer's metadata names its route")
	}
	turns, err := store.TurnsTo(ctx, u.ID, two.Assistant.ID, 100)
	if err != nil || len(turns) != len(path) {
		t.Fatalf("turns = %d, %v; want the %d messages of the path", len(turns), err, len(path))
	}
	for i := range turns {
		if turns[i].ID != path[i].ID || turns[i].Content != path[i].Content || turns[i].Role != path[i].Role {
			t.Errorf("turn %d = %+v, want the path's %+v", i, turns[i], path[i])
		}
		if turns[i].Metadata.Route != "" || string(turns[i].Metadata.Raw) != "{}" {
			t.Errorf("turn %d carries metadata %s, want none read", i, turns[i].Metadata.Raw)
		}
	}
	if foreign, err := store.TurnsTo(ctx, other.ID, two.Assistant.ID, 100); err != nil || len(foreign) != 0 {
		t.Errorf("another user's TurnsTo = %d messages, %v; want none", len(foreign), err)
	}
}
