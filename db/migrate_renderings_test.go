package db_test

import (
	"context"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

// Migration 035 keeps the renderings that were stored on the messages (of
// a renderer version; none for a message that had none), and from then on
// a change of a message's text forgets its rendering.
func TestTheRenderingsMigrationKeepsStoredRenderingsAndForgetsThemOnAChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.EmptyDB(t)
	if _, err := db.MigrateUpTo(ctx, store, 34); err != nil {
		t.Fatal(err)
	}
	u, ws := oldUser(t, store, "renderings@example.com")
	var thread int64
	if err := store.Pool.QueryRow(ctx, `INSERT INTO threads (workspace_id, owner_id, title) VALUES ($1, $2, 'old')
		RETURNING id`, ws.ID, u.ID).Scan(&thread); err != nil {
		t.Fatal(err)
	}
	var rendered, plain int64
	for _, id := range []*int64{&rendered, &plain} {
		if err := store.Pool.QueryRow(ctx, `INSERT INTO messages (thread_id, role, content, status)
			VALUES ($1, 'assistant', '**an** answer', 'complete') RETURNING id`, thread).Scan(id); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, store, `UPDATE messages SET body_html = '<p><strong>an</strong> answer</p>', body_html_version = 7 WHERE id = $1`, rendered)
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	got, err := store.RenderedBodies(ctx, u.ID, []int64{rendered, plain}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[rendered] != "<p><strong>an</strong> answer</p>" {
		t.Fatalf("renderings after the migration = %v, want only message %d's", got, rendered)
	}
	mustExec(t, store, `UPDATE messages SET content = 'another answer' WHERE id = $1`, rendered)
	if got, _ := store.RenderedBodies(ctx, u.ID, []int64{rendered}, 7); len(got) != 0 {
		t.Errorf("a change of the text after the migration kept the rendering: %v", got)
	}
}
