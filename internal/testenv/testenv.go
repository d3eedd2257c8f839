// Package testenv gives tests the real things they run against: a
// PostgreSQL cluster with pgvector (one per test binary, a fresh database
// per test cloned from a migrated template), a running Weft server, and a
// headless Chromium. Nothing here is faked; the only fake in Weft's tests is
// the model server, at its HTTP boundary.
package testenv

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/db"
	"weft/extract"
	"weft/internal/mcptest"
	"weft/sandbox"
)

var (
	adminURL string // a database on the cluster where CREATE DATABASE works
	dbSeq    atomic.Int64
)

const templateDB = "weft_template"

// Main runs a package's tests against a throwaway cluster: the one named
// by WEFT_TEST_DATABASE_URL, or else a private cluster started for this test
// binary and removed afterwards. Use it from TestMain. A test binary
// started as a jailed document reader (see extract.ChildMain) or as a
// stdio MCP server (mcptest.ChildMain) is that child and nothing else.
func Main(m *testing.M) {
	extract.ChildMain()
	mcptest.ChildMain()
	sandbox.ChildMain()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	adminURL = os.Getenv("WEFT_TEST_DATABASE_URL")
	if adminURL == "" {
		dir, err := os.MkdirTemp("", "weft-test-pg-")
		if err != nil {
			log.Printf("testenv: %v", err)
			return 1
		}
		defer os.RemoveAll(dir)
		pg, err := db.StartEmbedded(ctx, filepath.Join(dir, "postgres"))
		if err != nil {
			log.Printf("testenv: %v", err)
			return 1
		}
		defer func() { _ = pg.Stop(context.Background()) }()
		adminURL = pg.AdminURL // creates databases and extensions
	}
	if err := makeTemplate(ctx); err != nil {
		log.Printf("testenv: %v", err)
		return 1
	}
	return m.Run()
}

// makeTemplate creates a migrated database that each test's database is
// cloned from, so a test gets a fresh schema in milliseconds.
func makeTemplate(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	// Several test binaries may share one cluster: each uses its own template.
	name := fmt.Sprintf("%s_%d", templateDB, os.Getpid())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return err
	}
	store, err := db.Open(ctx, withDatabase(adminURL, name))
	if err != nil {
		return err
	}
	_, err = store.Migrate(ctx)
	store.Close()
	if err != nil {
		return err
	}
	templateName = name
	return nil
}

var templateName string

// NewDB returns a migrated database of its own for one test, dropped when
// the test ends.
func NewDB(t testing.TB) *db.DB {
	t.Helper()
	return openFresh(t, templateName)
}

// EmptyDB returns a database with no schema at all (for migration tests).
func EmptyDB(t testing.TB) *db.DB {
	t.Helper()
	return openFresh(t, "template0")
}

func openFresh(t testing.TB, template string) *db.DB {
	ctx := context.Background()
	name := fmt.Sprintf("weft_t%d_%d", os.Getpid(), dbSeq.Add(1))
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, template)); err != nil {
		t.Fatalf("create database: %v", err)
	}
	store, err := db.Open(ctx, withDatabase(adminURL, name))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		store.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("connect for drop: %v", err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	return store
}

// URLFor returns the connection string of the database behind store (for a
// test that starts the weft binary against it).
func URLFor(t testing.TB, store *db.DB) string {
	t.Helper()
	return withDatabase(adminURL, store.Pool.Config().ConnConfig.Database)
}

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}
