package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/db"
)

func (e *env) startPostgres(ctx context.Context, url string) error {
	if url != "" {
		e.dbURL = url
		return nil
	}
	pg, err := db.StartEmbedded(ctx, filepath.Join(e.tmp, "postgres"))
	if err != nil {
		return err
	}
	e.pg = pg
	e.addCleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := pg.Stop(sctx); err != nil {
			fmt.Fprintln(os.Stderr, "bench: stop postgres:", err)
		}
	})
	e.dbURL = pg.URL
	return nil
}

// tunePostgres applies settings (name=value, reloadable ones) to the
// throwaway cluster: for experiments such as synchronous_commit=off.
func (e *env) tunePostgres(ctx context.Context, settings []string) error {
	if len(settings) == 0 {
		return nil
	}
	if e.pg == nil {
		return errors.New("-pg-set only changes the throwaway cluster, not a -database-url")
	}
	conn, err := pgx.Connect(ctx, e.pg.AdminURL) // ALTER SYSTEM is the superuser's
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, kv := range settings {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("-pg-set %q: want name=value", kv)
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = %s", pgx.Identifier{k}.Sanitize(), quoteLiteral(v))); err != nil {
			return fmt.Errorf("-pg-set %s: %w", kv, err)
		}
	}
	_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	return err
}

// execSQL runs statements on the throwaway cluster's database (after weft
// migrated it): for experiments such as dropping an index.
func (e *env) execSQL(ctx context.Context, stmts []string) error {
	if len(stmts) == 0 {
		return nil
	}
	if e.pg == nil {
		return errors.New("-sql only changes the throwaway cluster, not a -database-url")
	}
	conn, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("-sql %q: %w", q, err)
		}
	}
	return nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// pgActivity summarises what the database's sessions are doing now.
func (e *env) pgActivity(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		return err.Error()
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT coalesce(state, '?') || coalesce(' ' || wait_event, ''), count(*)
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1 ORDER BY 2 DESC`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var what string
		var n int
		if rows.Scan(&what, &n) == nil {
			parts = append(parts, fmt.Sprintf("%s %d", what, n))
		}
	}
	return strings.Join(parts, ", ")
}

// walBytes reads the cluster's WAL position counter (0 when unavailable).
func (e *env) walBytes(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		return 0
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&n); err != nil {
		return 0
	}
	return n
}

// postgresCPU is the CPU time of the embedded cluster: the postmaster, its
// reaped children and its live children.
func (e *env) postgresCPU() float64 {
	if e.pg == nil {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(e.pg.Dir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0
	}
	total := 0.0
	if f, err := statFields(pm); err == nil {
		total += ticks(f, 11) + ticks(f, 12) + ticks(f, 13) + ticks(f, 14)
	}
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == pm {
			continue
		}
		f, err := statFields(pid)
		if err != nil || len(f) < 13 || f[1] != strconv.Itoa(pm) {
			continue
		}
		total += ticks(f, 11) + ticks(f, 12)
	}
	return total
}
