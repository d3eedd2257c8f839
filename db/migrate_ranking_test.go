package db_test

import (
	"context"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

func TestTheRankingMigrationIndexesExistingChunksWithTitlesStemsAndCountsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.EmptyDB(t)
	if _, err := db.MigrateUpTo(ctx, store, 11); err != nil {
		t.Fatal(err)
	}
	u, ws := oldUser(t, store, "old@example.com")
	var kb, doc int64
	if err := store.Pool.QueryRow(ctx, `INSERT INTO knowledge_bases (workspace_id, owner_id, name, embed_model, dims)
		VALUES ($1, $2, 'Old', 'embedder', 3) RETURNING id`, ws.ID, u.ID).Scan(&kb); err != nil {
		t.Fatal(err)
	}
	if err := store.Pool.QueryRow(ctx, `INSERT INTO kb_documents (kb_id, owner_id, name, sha256, size, status)
		VALUES ($1, $2, 'zebra-care.md', 'x', 1, 'ready') RETURNING id`, kb, u.ID).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"Running the feeders daily.", "Brushes and running water."} {
		if _, err := store.Pool.Exec(ctx, `INSERT INTO kb_chunks (kb_id, document_id, owner_id, generation, position, text, dims, embedding)
			VALUES ($1, $2, $3, 1, $4, $5, 3, '[1,0,0]')`, kb, doc, u.ID, i, text); err != nil {
			t.Fatal(err)
		}
	}
	// Counted as 'simple' lexemes, as the old schema did.
	if _, err := store.Pool.Exec(ctx, `INSERT INTO kb_lexemes (kb_id, word, chunks) SELECT $1, word, ndoc
		FROM ts_stat('SELECT tsv FROM kb_chunks')`, kb); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	var title, language string
	var topK int
	if err := store.Pool.QueryRow(ctx, `SELECT c.title, k.language, k.top_k FROM kb_chunks c JOIN knowledge_bases k ON k.id = c.kb_id
		WHERE c.position = 0`).Scan(&title, &language, &topK); err != nil {
		t.Fatal(err)
	}
	if title != "zebra-care" || language != "english" || topK != 16 {
		t.Errorf("after the migration: title %q, language %q, top k %d", title, language, topK)
	}
	counts := map[string]int{}
	rows, err := store.Pool.Query(ctx, "SELECT word, chunks FROM kb_lexemes WHERE kb_id = $1", kb)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var w string
		var n int
		if err := rows.Scan(&w, &n); err != nil {
			t.Fatal(err)
		}
		counts[w] = n
	}
	// Stemmed, with the title in every chunk; the old lexemes are gone.
	if counts["run"] != 2 || counts["zebra"] != 2 || counts["care"] != 2 || counts["running"] != 0 || counts["the"] != 0 {
		t.Errorf("the word counts after the migration: %v", counts)
	}
	kbRow, err := store.KB(ctx, u.ID, kb)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := store.TextSearch(ctx, u.ID, kbRow, db.TextQuery{Text: "zebra feeder"}, 5)
	if err != nil || len(hits) != 2 || hits[0].Position != 0 {
		t.Errorf("a search after the migration: %v, %+v", err, hits)
	}
}
