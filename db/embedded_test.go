package db_test

import (
	"context"
	"path/filepath"
	"testing"

	"weft/db"
)

func TestThePrivateClusterIsCreatedOnceThenReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data", "postgres")

	first, err := db.StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	t.Cleanup(func() { _ = first.Stop(context.Background()) })
	store, err := db.Open(ctx, first.URL)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if _, _, err := store.CreateUser(ctx, "kept@example.com", "", "x"); err != nil {
		t.Fatal(err)
	}

	// A second process finding the cluster running reuses it and leaves it
	// running when it stops.
	second, err := db.StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatalf("start while running: %v", err)
	}
	if second.URL != first.URL {
		t.Fatalf("second start uses %q, want the same cluster %q", second.URL, first.URL)
	}
	if err := second.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Ping(ctx); err != nil {
		t.Fatalf("the cluster stopped when a process that did not start it stopped: %v", err)
	}
	store.Close()

	// After a full stop, the next start reuses the data.
	if err := first.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	again, err := db.StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(func() { _ = again.Stop(context.Background()) })
	store, err = db.Open(ctx, again.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if applied, err := store.Migrate(ctx); err != nil || len(applied) != 0 {
		t.Fatalf("migrate after restart applied %v (%v), want nothing", applied, err)
	}
	if _, err := store.UserByEmail(ctx, "kept@example.com"); err != nil {
		t.Fatalf("data did not survive the restart: %v", err)
	}
}
