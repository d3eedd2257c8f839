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
			if m.version > lz4Version {
				if _, err := tx.Exec(ctx, lz4NewColumns); err != nil {
					return fmt.Errorf("lz4 for its new columns: %w", err)
				}
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

// lz4Version is the migration that moved large columns to lz4.
const lz4Version = 17

// lz4NewColumns gives the large columns a later migration created (those
// whose catalog row this transaction wrote) lz4 compression, as migration
// 017 gave every column before it, so that no migration has to repeat it.
// A server without lz4 keeps pglz.
const lz4NewColumns = `DO $$
DECLARE
    c record;
BEGIN
    BEGIN
        PERFORM set_config('default_toast_compression', 'lz4', true);
    EXCEPTION WHEN invalid_parameter_value THEN
        RETURN;
    END;
    FOR c IN
        SELECT cl.relname, a.attname
        FROM pg_attribute a
        JOIN pg_class cl ON cl.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = cl.relnamespace
        WHERE n.nspname = current_schema() AND cl.relkind = 'r'
          AND a.attnum > 0 AND NOT a.attisdropped AND a.attstorage IN ('x', 'm')
          AND a.attcompression <> 'l'
          AND a.xmin = (pg_current_xact_id()::text::bigint % 4294967296)::text::xid
    LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION lz4', c.relname, c.attname);
    END LOOP;
END $$`
