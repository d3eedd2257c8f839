package db_test

import (
	"context"
	"strings"
	"testing"

	"weft/internal/testenv"
)

// Migration 017: every large column of Weft's tables compresses new values
// with lz4, the generated search data included, and a long answer written
// afterwards is stored so.
func TestLargeColumnsCompressWithLz4(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	rows, err := store.Pool.Query(ctx, `SELECT cl.relname || '.' || a.attname, a.attcompression
		FROM pg_attribute a JOIN pg_class cl ON cl.oid = a.attrelid JOIN pg_namespace n ON n.oid = cl.relnamespace
		WHERE n.nspname = current_schema() AND cl.relkind = 'r' AND cl.relname NOT LIKE 'river%'
		  AND a.attnum > 0 AND NOT a.attisdropped AND a.attstorage IN ('x', 'm')`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var col, how string
		if err := rows.Scan(&col, &how); err != nil {
			t.Fatal(err)
		}
		seen[col] = true
		if how != "l" {
			t.Errorf("%s compresses with %q, want lz4 (l)", col, how)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"messages.content", "message_renderings.html", "messages.search", "kb_document_files.data", "message_progress.content"} {
		if !seen[col] {
			t.Errorf("%s is not among the large columns %v", col, seen)
		}
	}

	u, ws := oldUser(t, store, "lz4@example.com")
	var thread int64
	if err := store.Pool.QueryRow(ctx, `INSERT INTO threads (workspace_id, owner_id, title) VALUES ($1, $2, 'long') RETURNING id`,
		ws.ID, u.ID).Scan(&thread); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a long answer that compresses well ", 2000)
	var msg int64
	if err := store.Pool.QueryRow(ctx, `INSERT INTO messages (thread_id, role, content) VALUES ($1, 'assistant', $2)
		RETURNING id`, thread, long).Scan(&msg); err != nil {
		t.Fatal(err)
	}
	var how string
	if err := store.Pool.QueryRow(ctx, `SELECT pg_column_compression(content) FROM messages WHERE id = $1`, msg).Scan(&how); err != nil {
		t.Fatal(err)
	}
	if how != "lz4" {
		t.Fatalf("a %d-byte answer is stored with %q, want lz4", len(long), how)
	}
}
