package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
)

// Import statuses (imports.status).
const (
	ImportQueued  = "queued"
	ImportRunning = "running"
	ImportDone    = "done"
	ImportFailed  = "failed"
)

// ImportChunkBytes is the size of the stored pieces of an uploaded file.
const ImportChunkBytes = 1 << 20

// Import is an import of conversations from another app and its progress.
type Import struct {
	ID              int64      `db:"id"`
	OwnerID         int64      `db:"owner_id"`
	WorkspaceID     int64      `db:"workspace_id"`
	Format          string     `db:"format"`
	FileName        string     `db:"file_name"`
	SizeBytes       int64      `db:"size_bytes"`
	Status          string     `db:"status"`
	Total           *int       `db:"total"`
	NextIndex       int        `db:"next_index"`
	Imported        int        `db:"imported"`
	Skipped         int        `db:"skipped"`
	Messages        int        `db:"messages"`
	MessagesSkipped int        `db:"messages_skipped"`
	PartsSkipped    int        `db:"parts_skipped"`
	Error           string     `db:"error"`
	CreatedAt       time.Time  `db:"created_at"`
	UpdatedAt       time.Time  `db:"updated_at"`
	FinishedAt      *time.Time `db:"finished_at"`
}

// Finished reports whether the import's job has ended.
func (i Import) Finished() bool { return i.Status == ImportDone || i.Status == ImportFailed }

const importCols = `id, owner_id, workspace_id, format, file_name, size_bytes, status, total, next_index, imported,
	skipped, messages, messages_skipped, parts_skipped, error, created_at, updated_at, finished_at`

// ImportItem is one conversation of an import's report.
type ImportItem struct {
	Position int    `db:"position"`
	ThreadID *int64 `db:"thread_id"`
	Title    string `db:"title"`
	Imported bool   `db:"imported"`
	Messages int    `db:"messages"`
	Note     string `db:"note"`
}

// NewImport is an uploaded file to import.
type NewImport struct {
	Workspace int64
	Format    string
	FileName  string
	File      io.Reader // read to its end, in ImportChunkBytes pieces
	MaxBytes  int64     // more than this is refused with ErrTooLarge
	// MaxPending is how many unfinished imports a user may have (0: no
	// limit); one more is refused with ErrTooManyImports.
	MaxPending int
}

// ErrTooManyImports refuses an import while the user has MaxPending
// unfinished ones (their files wait in the database).
var ErrTooManyImports = errors.New("db: too many imports under way")

// ErrTooLarge refuses an upload over its cap.
var ErrTooLarge = errors.New("db: too large")

// CreateImport stores an uploaded file and its import row in one of the
// user's active workspaces, and calls enqueue in the same transaction (the
// job exists if and only if the import does).
func (d *DB) CreateImport(ctx context.Context, user int64, in NewImport, enqueue func(tx pgx.Tx, id int64) error) (Import, error) {
	var imp Import
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if in.MaxPending > 0 {
			// One user's uploads are counted one at a time.
			var pending int
			if err := tx.QueryRow(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('imports', $1)),
				(SELECT count(*) FROM imports WHERE owner_id = $1 AND status IN ('queued', 'running'))`, user).Scan(nil, &pending); err != nil {
				return err
			}
			if pending >= in.MaxPending {
				return ErrTooManyImports
			}
		}
		rows, err := tx.Query(ctx, `INSERT INTO imports (owner_id, workspace_id, format, file_name)
			SELECT owner_id, id, $3, $4 FROM workspaces WHERE id = $1 AND owner_id = $2 AND status = 'active'
			RETURNING `+importCols, in.Workspace, user, in.Format, in.FileName)
		if err != nil {
			return err
		}
		if imp, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Import]); err != nil {
			return err
		}
		buf := make([]byte, ImportChunkBytes)
		var size int64
		for seq := 0; ; seq++ {
			n, rerr := io.ReadFull(in.File, buf)
			if n > 0 {
				size += int64(n)
				if in.MaxBytes > 0 && size > in.MaxBytes {
					return ErrTooLarge
				}
				if _, err := tx.Exec(ctx, "INSERT INTO import_chunks (import_id, seq, data) VALUES ($1, $2, $3)",
					imp.ID, seq, buf[:n]); err != nil {
					return err
				}
			}
			if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
				break
			}
			if rerr != nil {
				return fmt.Errorf("read the upload: %w", rerr)
			}
		}
		imp.SizeBytes = size
		if _, err := tx.Exec(ctx, "UPDATE imports SET size_bytes = $2 WHERE id = $1", imp.ID, size); err != nil {
			return err
		}
		return enqueue(tx, imp.ID)
	})
	if errors.Is(err, ErrTooManyImports) || errors.Is(err, ErrTooLarge) {
		return Import{}, err
	}
	return imp, mapErr(err)
}

// UserImport returns one of the user's imports.
func (d *DB) UserImport(ctx context.Context, user, id int64) (Import, error) {
	return oneImport(ctx, d.q(), "WHERE id = $1 AND owner_id = $2", id, user)
}

// Imports lists the user's latest imports, newest first.
func (d *DB) Imports(ctx context.Context, user int64, limit int) ([]Import, error) {
	rows, err := d.q().Query(ctx, "SELECT "+importCols+" FROM imports WHERE owner_id = $1 ORDER BY id DESC LIMIT $2", user, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Import])
}

// ImportItems returns the report of one of the user's imports: skipped
// conversations first (at most limit of each kind), then imported ones,
// in file order.
func (d *DB) ImportItems(ctx context.Context, user, id int64, limit int) ([]ImportItem, error) {
	rows, err := d.q().Query(ctx, `(SELECT i.position, i.thread_id, i.title, i.imported, i.messages, i.note
			FROM import_items i JOIN imports p ON p.id = i.import_id
			WHERE i.import_id = $1 AND p.owner_id = $2 AND NOT i.imported ORDER BY i.position LIMIT $3)
		UNION ALL
		(SELECT i.position, i.thread_id, i.title, i.imported, i.messages, i.note
			FROM import_items i JOIN imports p ON p.id = i.import_id
			WHERE i.import_id = $1 AND p.owner_id = $2 AND i.imported ORDER BY i.position LIMIT $3)`, id, user, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[ImportItem])
}

// Job side: these take the import id alone; the job was queued by the
// import's owner.

// JobImport returns an import for its job.
func (d *DB) JobImport(ctx context.Context, id int64) (Import, error) {
	return oneImport(ctx, d.q(), "WHERE id = $1", id)
}

func oneImport(ctx context.Context, q querier, where string, args ...any) (Import, error) {
	rows, err := q.Query(ctx, "SELECT "+importCols+" FROM imports "+where, args...)
	if err != nil {
		return Import{}, err
	}
	imp, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Import])
	return imp, mapErr(err)
}

// ImportChunk returns the seq'th stored piece of an import's file
// (ErrNotFound past its end).
func (d *DB) ImportChunk(ctx context.Context, id int64, seq int) ([]byte, error) {
	var data []byte
	err := d.q().QueryRow(ctx, "SELECT data FROM import_chunks WHERE import_id = $1 AND seq = $2", id, seq).Scan(&data)
	return data, mapErr(err)
}

// StartImport marks an import running and records its total once counted
// (total < 0: not known yet).
func (d *DB) StartImport(ctx context.Context, id int64, total int) error {
	var t *int
	if total >= 0 {
		t = &total
	}
	_, err := d.q().Exec(ctx, `UPDATE imports SET status = 'running', total = COALESCE($2, total), updated_at = now()
		WHERE id = $1 AND status IN ('queued', 'running')`, id, t)
	return err
}

// ImportOutcome is what happened to one conversation of a file.
type ImportOutcome struct {
	Position int
	Title    string
	Thread   *ImportedThread // nil: skipped
	Note     string          // why skipped, or what was left out
	// MessagesSkipped and PartsSkipped count what was left out of it.
	MessagesSkipped, PartsSkipped int
}

// ErrImportMoved is returned when the conversation was handled already
// (another attempt got there first) or the import was stopped: the caller
// stops.
var ErrImportMoved = errors.New("db: import moved on")

// RecordImport stores one conversation's outcome — its thread, the report
// line and the counters — and advances the import past it, in one
// transaction; a conversation at another position than next_index is
// refused with ErrImportMoved, so nothing is imported twice.
func (d *DB) RecordImport(ctx context.Context, id int64, o ImportOutcome) error {
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var owner, ws int64
		var next int
		var status string
		if err := tx.QueryRow(ctx, "SELECT owner_id, workspace_id, next_index, status FROM imports WHERE id = $1 FOR UPDATE",
			id).Scan(&owner, &ws, &next, &status); err != nil {
			return err
		}
		if next != o.Position || (status != ImportQueued && status != ImportRunning) {
			return ErrImportMoved // another attempt got there first, or the owner stopped it
		}
		var thread *int64
		msgs := 0
		if o.Thread != nil {
			t, err := importThreadTx(ctx, tx, owner, ws, *o.Thread)
			if err != nil {
				return err
			}
			thread, msgs = &t.ID, len(o.Thread.Messages)
		}
		imported := 0
		if thread != nil {
			imported = 1
		}
		if _, err := tx.Exec(ctx, `INSERT INTO import_items (import_id, position, thread_id, title, imported, messages, note)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, id, o.Position, thread, o.Title, thread != nil, msgs, o.Note); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE imports SET next_index = next_index + 1, imported = imported + $2,
			skipped = skipped + $3, messages = messages + $4, messages_skipped = messages_skipped + $5,
			parts_skipped = parts_skipped + $6, updated_at = now() WHERE id = $1`,
			id, imported, 1-imported, msgs, o.MessagesSkipped, o.PartsSkipped)
		return err
	})
	if errors.Is(err, ErrImportMoved) {
		return err
	}
	return mapErr(err)
}

// FinishImport ends an import (errMsg "" : done, else failed with that
// message for its owner) and drops its stored file.
func (d *DB) FinishImport(ctx context.Context, id int64, errMsg string) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		status := ImportDone
		if errMsg != "" {
			status = ImportFailed
		}
		if _, err := tx.Exec(ctx, `UPDATE imports SET status = $2, error = $3, total = COALESCE(total, next_index),
			finished_at = now(), updated_at = now() WHERE id = $1 AND status IN ('queued', 'running')`, id, status, errMsg); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM import_chunks WHERE import_id = $1", id)
		return err
	}))
}

// StopImport stops one of the user's imports: the conversations imported
// so far stay, its file goes, and its job stops before the next
// conversation. Stopping an import that has ended does nothing.
func (d *DB) StopImport(ctx context.Context, user, id int64) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		var status string
		if err := tx.QueryRow(ctx, "SELECT status FROM imports WHERE id = $1 AND owner_id = $2 FOR UPDATE", id, user).Scan(&status); err != nil {
			return err
		}
		if status != ImportQueued && status != ImportRunning {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE imports SET status = 'failed', error = 'Stopped. The conversations listed were imported.',
			total = COALESCE(total, next_index), finished_at = now(), updated_at = now() WHERE id = $1`, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM import_chunks WHERE import_id = $1", id)
		return err
	}))
}
