package db_test

import (
	"context"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
)

// finalAnswer is a complete assistant message of a new user's thread.
func finalAnswer(t *testing.T, store *db.DB, email string) (user int64, m db.Message) {
	t.Helper()
	u, ws := newUser(t, store, email)
	sent := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q"})
	mustExec(t, store, `UPDATE messages SET content = '**the** answer', status = 'complete', updated_at = now() WHERE id = $1`, sent.Assistant.ID)
	return u.ID, mustMessage(t, store, u.ID, sent.Assistant.ID)
}

func rendering(t *testing.T, store *db.DB, user, msg int64) (string, bool) {
	t.Helper()
	got, err := store.RenderedBodies(context.Background(), user, []int64{msg}, 7)
	if err != nil {
		t.Fatal(err)
	}
	html, ok := got[msg]
	return html, ok
}

// Storing a rendering leaves the message row as it is (no new version of
// the row, so its search indexes are not written again), and a change of
// its text or cited sources forgets the rendering, other changes do not.
func TestARenderingIsStoredBesideTheMessageAndForgottenWhenItsTextChanges(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	user, m := finalAnswer(t, store, "render@example.com")
	var before, after string
	if err := store.Pool.QueryRow(ctx, "SELECT ctid::text FROM messages WHERE id = $1", m.ID).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if err := store.StoreRenderedBody(ctx, user, m.ID, m.UpdatedAt, 7, "<p><strong>the</strong> answer</p>"); err != nil {
		t.Fatal(err)
	}
	if err := store.Pool.QueryRow(ctx, "SELECT ctid::text FROM messages WHERE id = $1", m.ID).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Errorf("storing a rendering wrote a new version of the message row (%s → %s)", before, after)
	}
	if html, ok := rendering(t, store, user, m.ID); !ok || html != "<p><strong>the</strong> answer</p>" {
		t.Fatalf("stored rendering = %q, %v", html, ok)
	}
	if got, _ := store.RenderedBodies(ctx, user, []int64{m.ID}, 8); len(got) != 0 {
		t.Errorf("another renderer version's rendering was returned: %v", got)
	}
	other, _ := newUser(t, store, "other@example.com")
	if got, _ := store.RenderedBodies(ctx, other.ID, []int64{m.ID}, 7); len(got) != 0 {
		t.Errorf("another user read the rendering: %v", got)
	}
	if err := store.StoreRenderedBody(ctx, other.ID, m.ID, m.UpdatedAt, 7, "<p>theirs</p>"); err != nil {
		t.Fatal(err)
	}
	if html, _ := rendering(t, store, user, m.ID); html != "<p><strong>the</strong> answer</p>" {
		t.Errorf("another user replaced the rendering: %q", html)
	}

	// A change of metadata other than the sources keeps it.
	mustExec(t, store, `UPDATE messages SET metadata = metadata || '{"usage_note": 1}' WHERE id = $1`, m.ID)
	if _, ok := rendering(t, store, user, m.ID); !ok {
		t.Error("a change of metadata other than sources forgot the rendering")
	}
	// The sources, then the text: each forgets it, whichever query does so.
	mustExec(t, store, `UPDATE messages SET metadata = metadata || '{"sources": [1]}' WHERE id = $1`, m.ID)
	if _, ok := rendering(t, store, user, m.ID); ok {
		t.Error("a change of the cited sources kept the rendering")
	}
	m = mustMessage(t, store, user, m.ID)
	if err := store.StoreRenderedBody(ctx, user, m.ID, m.UpdatedAt, 7, "<p>again</p>"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, store, `UPDATE messages SET content = 'new' WHERE id = $1`, m.ID)
	if _, ok := rendering(t, store, user, m.ID); ok {
		t.Error("a change of the text kept the rendering")
	}
	// A rendering made from an older version of the message is not kept.
	if err := store.StoreRenderedBody(ctx, user, m.ID, m.UpdatedAt.Add(-time.Second), 7, "<p>old</p>"); err != nil {
		t.Fatal(err)
	}
	if _, ok := rendering(t, store, user, m.ID); ok {
		t.Error("a rendering of an older version of the message was stored")
	}
}

// A change of the text committing while a rendering of the old text is
// being stored: the rendering waits for it and is then not stored.
func TestARenderingOfTextChangedMeanwhileIsNotStored(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	user, m := finalAnswer(t, store, "race@example.com")
	tx, err := store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE messages SET content = 'changed', updated_at = now() WHERE id = $1`, m.ID); err != nil {
		t.Fatal(err)
	}
	stored := make(chan error, 1)
	go func() { stored <- store.StoreRenderedBody(ctx, user, m.ID, m.UpdatedAt, 7, "<p>stale</p>") }()
	testwait.For(t, "the rendering to wait for the change's lock", 0, func() bool {
		var waiting bool
		_ = store.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND $1 = ANY(pg_blocking_pids(pid)))`, pid).Scan(&waiting)
		return waiting
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testwait.Recv(t, "the rendering's store", 0, stored); err != nil {
		t.Fatal(err)
	}
	if html, ok := rendering(t, store, user, m.ID); ok {
		t.Errorf("the rendering of the old text was stored: %q", html)
	}
}
