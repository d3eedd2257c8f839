package db

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered SQL file.
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %q: name must start with a number and '_'", e.Name())
		}
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("two migrations numbered %d", out[i].version)
		}
	}
	return out, nil
}

// Migrate applies every embedded migration not yet recorded in
// schema_migrations, each in its own transaction, under an advisory lock so
// that several instances starting together migrate once. It returns the
// versions it applied (none on a restart).
func (d *DB) Migrate(ctx context.Context) ([]int, error) {
	return d.migrate(ctx, math.MaxInt)
}

// migrate applies the migrations not yet applied up to version last (a
// test of a migration over data starts below it).
func (d *DB) migrate(ctx context.Context, last int) ([]int, error) {
	migs, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	conn, err := d.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire: %w", err)
	}
	defer conn.Release()
	const lockKey = 0x77656674 // "weft"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey) }()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY,
		name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	rows, err := conn.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, err
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, err
	}
	have := map[int]bool{}
	for _, v := range done {
		have[v] = true
	}
	var applied []int
	for _, m := range migs {
		if have[m.version] || m.version > last {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.name, err)
		}
		applied = append(applied, m.version)
	}
	// The job queue's own tables (River), migrated by River's migrator under
	// the same lock.
	migrator, err := rivermigrate.New(riverpgxv5.New(d.Pool), &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		return applied, fmt.Errorf("job queue migrations: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return applied, fmt.Errorf("job queue migrations: %w", err)
	}
	if len(applied) > 0 {
		// Types created by a migration (vector) must be known to connections
		// opened before it: start the pool afresh.
		d.Pool.Reset()
	}
	return applied, nil
}

// quietLogger keeps River's migrator from logging every step at INFO.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
