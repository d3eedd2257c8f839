package db_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"weft/db"
	"weft/internal/testenv"
)

// An install from before issue 14 has kb_chunks_hnsw_N over vector(N):
// migration 015 replaces it with the halfvec index the code creates, for
// every dimension in use, and the vector query uses it and finds the same
// chunks.
func TestTheVectorIndexMigrationMovesEveryDimensionToTheHalfvecIndexTheQueryUses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.EmptyDB(t)
	if _, err := db.MigrateUpTo(ctx, store, 14); err != nil {
		t.Fatal(err)
	}
	u, ws := oldUser(t, store, "vectors@example.com")
	var kb, moving, doc int64
	if err := store.Pool.QueryRow(ctx, `INSERT INTO knowledge_bases (workspace_id, owner_id, name, embed_model, dims)
		VALUES ($1, $2, 'Old', 'embedder', 3) RETURNING id`, ws.ID, u.ID).Scan(&kb); err != nil {
		t.Fatal(err)
	}
	// A knowledge base moving to another model, whose index for the new
	// dimension (4) is missing: the migration creates it too.
	if err := store.Pool.QueryRow(ctx, `INSERT INTO knowledge_bases (workspace_id, owner_id, name, embed_model, dims, pending_model, pending_dims)
		VALUES ($1, $2, 'Moving', 'embedder', 5, 'other', 4) RETURNING id`, ws.ID, u.ID).Scan(&moving); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 5} {
		mustExec(t, store, fmt.Sprintf(`CREATE INDEX kb_chunks_hnsw_%[1]d ON kb_chunks
			USING hnsw ((embedding::vector(%[1]d)) vector_cosine_ops) WHERE dims = %[1]d`, n))
	}
	if err := store.Pool.QueryRow(ctx, `INSERT INTO kb_documents (kb_id, owner_id, name, sha256, size, status)
		VALUES ($1, $2, 'points.md', 'x', 1, 'ready') RETURNING id`, kb, u.ID).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	// 3,000 chunks (enough for the planner to prefer the index) on a
	// quarter circle in the first two dimensions: the first three far
	// apart near angle 0, the others from 0.2 on.
	mustExec(t, store, `INSERT INTO kb_chunks (kb_id, document_id, owner_id, generation, position, text, dims, embedding)
		SELECT $1, $2, $3, 1, i, 'point ' || i, 3, format('[%s,%s,0]', cos(a), sin(a))::vector
		FROM generate_series(0, 2999) i, LATERAL (SELECT CASE WHEN i < 3 THEN i * 0.05 ELSE 0.2 + i * 0.0004 END AS a) x`, kb, doc, u.ID)
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// A knowledge base created now gets its index from the code.
	if _, err := store.CreateKB(ctx, u.ID, ws.ID, db.KBInput{Name: "New", EmbedModel: "embedder", Dims: 7}); err != nil {
		t.Fatal(err)
	}

	defs := map[string]string{}
	rows, err := store.Pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
		WHERE tablename = 'kb_chunks' AND indexdef LIKE '%USING hnsw%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		defs[name] = def
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(defs) != 4 {
		t.Errorf("HNSW indexes after the migration: %v", defs)
	}
	for _, n := range []int{3, 4, 5} {
		// The migration's index and the code's (made for 7) are the same
		// but for the dimension.
		want := strings.ReplaceAll(defs[db.VectorIndexName(7)], "7", fmt.Sprint(n))
		if got := defs[db.VectorIndexName(n)]; got == "" || got != want {
			t.Errorf("index for %d dimensions:\n got %s\nwant %s", n, got, want)
		}
	}
	if !strings.Contains(defs[db.VectorIndexName(7)], "halfvec_cosine_ops") || !strings.Contains(defs[db.VectorIndexName(7)], "ef_construction='40'") {
		t.Errorf("the code's index: %s", defs[db.VectorIndexName(7)])
	}

	q := []float32{1, 0, 0}
	tx, err := store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, set := range []string{"ANALYZE kb_chunks, kb_documents", "SET LOCAL hnsw.iterative_scan = strict_order"} {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := tx.Query(ctx, "EXPLAIN "+db.VectorSearchSQL(3), pgvector.NewVector(q), kb, u.ID, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(plan, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if joined := strings.Join(lines, "\n"); !strings.Contains(joined, "Index Scan using "+db.VectorIndexName(3)) {
		t.Errorf("the vector query does not use the migrated index:\n%s", joined)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	k, err := store.KB(ctx, u.ID, kb)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := store.VectorSearch(ctx, u.ID, k, q, 3)
	if err != nil {
		t.Fatal(err)
	}
	// Nearest to angle 0: points 0, 1 and 2, in that order.
	if len(hits) != 3 || hits[0].Position != 0 || hits[1].Position != 1 || hits[2].Position != 2 || hits[0].Score < 0.999 {
		t.Errorf("nearest chunks after the migration: %+v", hits)
	}
}
