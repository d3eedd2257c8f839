package db_test

import (
	"context"
	"slices"
	"testing"

	"github.com/pgvector/pgvector-go"

	"weft/internal/testenv"
)

func TestMigrationsApplyToAnEmptyDatabaseAndAreANoOpOnRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.EmptyDB(t)

	applied, err := store.Migrate(ctx)
	if err != nil {
		t.Fatalf("first migrate: %v", err)
	}
	if len(applied) == 0 || applied[0] != 1 || !slices.IsSorted(applied) {
		t.Fatalf("first migrate applied %v, want every migration from 1 in order", applied)
	}
	var ext string
	if err := store.Pool.QueryRow(ctx, "SELECT extname FROM pg_extension WHERE extname = 'vector'").Scan(&ext); err != nil {
		t.Fatalf("pgvector extension not installed by the first migration: %v", err)
	}

	again, err := store.Migrate(ctx)
	if err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if len(again) != 0 {
		t.Fatalf("second migrate applied %v, want nothing", again)
	}
	var n int
	if err := store.Pool.QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(applied) {
		t.Fatalf("schema_migrations has %d rows, want %d", n, len(applied))
	}
}

func TestPooledConnectionsKnowTheVectorType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	// Scanning a vector into pgvector-go's type needs the type registered on
	// the connection (AfterConnect).
	var vec pgvector.Vector
	if err := store.Pool.QueryRow(ctx, "SELECT '[1,2,3]'::vector").Scan(&vec); err != nil {
		t.Fatalf("scan vector: %v", err)
	}
	if got := vec.Slice(); !slices.Equal(got, []float32{1, 2, 3}) {
		t.Fatalf("vector = %v", got)
	}
}
