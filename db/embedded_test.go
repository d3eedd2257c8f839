package db_test

import (
	"context"
	"os"
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

// appRoleIsNotSuperuser connects with url and reports whether its role is a
// superuser.
func appRoleIsSuperuser(t *testing.T, url string) bool {
	t.Helper()
	store, err := db.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer store.Close()
	var super bool
	if err := store.Pool.QueryRow(context.Background(), "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
		t.Fatal(err)
	}
	return super
}

func TestTheApplicationRoleOfANewClusterIsNotASuperuser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg, err := db.StartEmbedded(ctx, filepath.Join(t.TempDir(), "data", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	if appRoleIsSuperuser(t, pg.URL) {
		t.Fatal("Weft connects to its private cluster as a superuser")
	}
	store, err := db.Open(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatalf("migrations as the application role: %v", err)
	}
	if _, err := store.Pool.Exec(ctx, "COPY (SELECT 1) TO PROGRAM 'true'"); err == nil {
		t.Error("the application role can run programs on the server")
	}
}

// A cluster made by an older Weft (which connected as the bootstrap
// superuser and owns everything as it) is converted at start-up: Weft then
// connects as the application role, and the data keeps working.
func TestAClusterOfAnOlderWeftIsHandedToTheApplicationRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data", "postgres")
	pg, err := db.StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	// What the old code path left: the database and its objects owned by
	// the superuser "weft", its password in <dir>.password, migrated and
	// holding data, and no application role.
	old, err := db.Open(ctx, pg.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"ALTER DATABASE weft OWNER TO weft", "REASSIGN OWNED BY weft_app TO weft"} {
		if _, err := old.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := old.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := old.CreateUser(ctx, "old@example.com", "", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Pool.Exec(ctx, "DROP OWNED BY weft_app; DROP ROLE weft_app"); err != nil {
		t.Fatal(err)
	}
	old.Close()
	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir + ".app-password"); err != nil {
		t.Fatal(err)
	}

	again, err := db.StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatalf("start on the older cluster: %v", err)
	}
	t.Cleanup(func() { _ = again.Stop(context.Background()) })
	if appRoleIsSuperuser(t, again.URL) {
		t.Fatal("the converted cluster is still used as a superuser")
	}
	store, err := db.Open(ctx, again.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if applied, err := store.Migrate(ctx); err != nil || len(applied) != 0 {
		t.Fatalf("migrate after the conversion applied %v (%v), want nothing", applied, err)
	}
	u, err := store.UserByEmail(ctx, "old@example.com")
	if err != nil {
		t.Fatalf("the old data is not readable: %v", err)
	}
	if _, _, err := store.CreateUser(ctx, "new@example.com", "", "x"); err != nil {
		t.Fatalf("the old tables are not writable: %v", err)
	}
	ws, err := store.DefaultWorkspace(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.SendMessage(ctx, u.ID, db.Send{WorkspaceID: ws.ID, Content: "still works", Kind: "chat", Model: "tiny"}); err != nil {
		t.Fatalf("a message on the converted cluster: %v", err)
	}
}

// After a crash (the owner gone without stopping the server), the next
// start adopts the running server and stops it on its own shutdown; while
// the owner lives, a second start uses the server without taking it.
func TestARestartAfterACrashAdoptsTheRunningServerAndStopsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data", "postgres")
	first, err := db.StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Stop(context.Background()) })
	pidFile := filepath.Join(dir, "postmaster.pid")
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("the server is not running: %v", err)
	}
	first.Crash()

	second, err := db.StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatalf("start after the crash: %v", err)
	}
	t.Cleanup(func() { _ = second.Stop(context.Background()) })
	// A third process while the second (now the owner) lives: it uses the
	// server and its stop leaves it running.
	third, err := db.StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := third.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("a process that does not own the server stopped it: %v", err)
	}
	if err := second.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Fatalf("the adopted server still runs after its new owner stopped (postmaster.pid: %v)", err)
	}
}
