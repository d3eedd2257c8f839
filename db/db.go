// Package db owns every SQL statement of Weft: the connection pool, the embedded
// numbered migrations, the optional private Postgres cluster, and one file of
// queries per aggregate. Every query that takes an object id also takes the
// acting user, so authorization lives inside the query: a foreign id behaves
// exactly like a missing one (ErrNotFound). Nothing outside this package
// writes SQL.
package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
)

// ErrNotFound is returned when a row does not exist or is not the acting
// user's to see. Callers render it as a 404.
var ErrNotFound = errors.New("db: not found")

// errReadSnapshot refuses a transaction inside ReadSnapshot.
var errReadSnapshot = errors.New("db: a read snapshot cannot write")

// ErrConflict is returned when a unique constraint refuses a write (for
// example a second account with the same email).
var ErrConflict = errors.New("db: conflict")

// ErrBusy is returned when a write would wait too long for a lock another
// long transaction holds (a knowledge base being indexed again for its new
// language). Callers ask the user to try again later.
var ErrBusy = errors.New("db: busy")

// DB is the store: a pgx pool plus the queries in this package. A DB made
// by ReadSnapshot runs its queries in that snapshot's transaction instead.
type DB struct {
	Pool *pgxpool.Pool
	tx   pgx.Tx // set inside ReadSnapshot
}

// q is where this DB's queries run: the snapshot's transaction, or the pool.
func (d *DB) q() querier {
	if d.tx != nil {
		return d.tx
	}
	return d.Pool
}

// ReadSnapshot runs fn with a DB whose queries all read one consistent
// snapshot (a REPEATABLE READ, READ ONLY transaction): a page built from
// many reads never sees a run end between two of them. Writes through it
// fail.
func (d *DB) ReadSnapshot(ctx context.Context, fn func(s *DB) error) error {
	tx, err := d.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(&DB{Pool: d.Pool, tx: tx}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("end snapshot: %w", err)
	}
	return nil
}

// Open connects to url, registers the pgvector types on every pooled
// connection and pings the server. It does not migrate; call Migrate.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgxpool's default (max(4, CPUs)) is far too few for a server that
		// flushes every live answer each second while serving pages.
		cfg.MaxConns = 32
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		// The vector type exists only after the first migration; a connection
		// opened before it (the migrator's own) simply skips registration.
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_type WHERE typname = 'vector')").Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return nil
		}
		return pgxvec.RegisterTypes(ctx, conn)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return &DB{Pool: pool}, nil
}

// Close releases the pool.
func (d *DB) Close() { d.Pool.Close() }

// Ping reports whether the database answers (used by /readyz).
func (d *DB) Ping(ctx context.Context) error { return d.Pool.Ping(ctx) }

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// InTx runs fn in a transaction, committing when fn returns nil. The
// rollback uses a context that survives the caller's cancellation, so a
// cancelled request never leaves a transaction open on its connection.
func (d *DB) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if d.tx != nil {
		return fmt.Errorf("begin: %w", errReadSnapshot)
	}
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	nt := &noteTx{Tx: tx}
	if err := fn(nt); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	d.sendNotes(ctx, nt.notes)
	return nil
}

// noteTx is InTx's transaction. The notes its writes send on RunChannel
// (NoteThreadChanged, notifyRuns) wait for its commit and then go in one
// statement of their own, instead of being sent in it: PostgreSQL holds
// one lock for the whole cluster from a notifying transaction's pre-commit
// to its end, so every notifying commit waited for the disk in turn (the
// sends and claims of 1,000 streams started over 5 s queued on it: the
// most frequent wait in pg_stat_activity). A transaction that only
// notifies writes no WAL before its commit record and so commits without
// waiting for the disk. A listener still never hears of data it cannot
// read; a note is lost only if weft stops between the two, which costs
// its listeners a safety poll, never data. A rolled-back transaction sends
// nothing.
type noteTx struct {
	pgx.Tx
	notes []string
}

// sendNotes sends payloads on RunChannel in order, after a commit, best
// effort (also when ctx was cancelled meanwhile: the commit happened).
func (d *DB) sendNotes(ctx context.Context, payloads []string) {
	if len(payloads) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := d.Pool.Exec(ctx, `SELECT pg_notify($1, n) FROM unnest($2::text[]) WITH ORDINALITY AS u(n, i) ORDER BY i`, RunChannel, payloads); err != nil {
		slog.Warn("notify after a commit", "notes", len(payloads), "err", err)
	}
}

// mapErr turns pgx's "no rows" and unique violations into this package's
// sentinels, once, so callers never import pgx to recognise them.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: %s", ErrConflict, pgErr.ConstraintName)
	}
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: lock_timeout
		return fmt.Errorf("%w: %s", ErrBusy, pgErr.Message)
	}
	return err
}

// splitCols splits a column list such as messageCols into names.
func splitCols(cols string) []string {
	var out []string
	for _, c := range strings.Split(cols, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}
