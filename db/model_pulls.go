package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Model pulls (migration 026): a model being pulled onto a model server,
// started by an administrator. The instance that runs a pull writes its
// progress (at most once a second) and its end; any instance reads it and
// asks it to stop. Every query an administrator's request makes takes the
// acting user and answers only when that user is an active administrator.

// Pull statuses.
const (
	PullRunning     = "running"
	PullCompleted   = "completed"
	PullFailed      = "failed"
	PullCancelled   = "cancelled"
	PullInterrupted = "interrupted"
)

// Notes on RunChannel about pulls (the id is the pull's).
const (
	NotePull     = 'm' // pull: its progress was saved
	NotePullEnd  = 'n' // pull: it ended (the model may have arrived)
	NotePullStop = 'x' // pull: Cancel was asked for
)

// ModelPull is one pull of a model onto a server.
type ModelPull struct {
	ID              int64      `db:"id"`
	Model           string     `db:"model"`
	Server          string     `db:"server"` // the server's label; "" with one server
	RequestedBy     *int64     `db:"requested_by"`
	InstanceID      string     `db:"instance_id"`
	Status          string     `db:"status"`
	StatusText      string     `db:"status_text"`
	Digest          string     `db:"digest"`
	Layers          int        `db:"layers"`
	Completed       int64      `db:"completed"`
	Total           int64      `db:"total"`
	BytesPerSec     int64      `db:"bytes_per_sec"`
	Error           string     `db:"error"`
	CancelRequested bool       `db:"cancel_requested"`
	CreatedAt       time.Time  `db:"created_at"`
	UpdatedAt       time.Time  `db:"updated_at"`
	FinishedAt      *time.Time `db:"finished_at"`
}

// Running reports whether the pull is still under way.
func (p ModelPull) Running() bool { return p.Status == PullRunning }

// PullProgress is what a running pull reports.
type PullProgress struct {
	StatusText  string
	Digest      string
	Layers      int
	Completed   int64
	Total       int64
	BytesPerSec int64
}

const modelPullCols = `id, model, server, requested_by, instance_id, status, status_text, digest, layers,
	completed, total, bytes_per_sec, error, cancel_requested, created_at, updated_at, finished_at`

// adminIs is true when the parameter names an active administrator.
const adminIs = `EXISTS (SELECT 1 FROM users WHERE id = $1 AND role = 'admin' AND NOT disabled)`

// StartModelPull records a running pull of model onto server by admin,
// run by instance. ErrConflict: that model is already being pulled onto
// that server; ErrNotFound: admin is not an administrator.
func (d *DB) StartModelPull(ctx context.Context, admin int64, model, server, instance string) (ModelPull, error) {
	rows, err := d.q().Query(ctx, `INSERT INTO model_pulls (model, server, requested_by, instance_id)
		SELECT $2, $3, $1, $4 WHERE `+adminIs+` RETURNING `+modelPullCols, admin, model, server, instance)
	if err != nil {
		return ModelPull{}, mapErr(err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ModelPull])
	return p, mapErr(err)
}

// ModelPulls lists the pulls an administrator sees: every running one and
// the most recent others of the last day, newest first, at most limit.
func (d *DB) ModelPulls(ctx context.Context, admin int64, limit int) ([]ModelPull, error) {
	rows, err := d.q().Query(ctx, `SELECT `+modelPullCols+` FROM model_pulls
		WHERE `+adminIs+` AND (status = 'running' OR created_at > now() - interval '1 day')
		ORDER BY status = 'running' DESC, id DESC LIMIT $2`, admin, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[ModelPull])
}

// ModelPull returns one pull, for an administrator.
func (d *DB) ModelPull(ctx context.Context, admin, id int64) (ModelPull, error) {
	rows, err := d.q().Query(ctx, `SELECT `+modelPullCols+` FROM model_pulls WHERE id = $2 AND `+adminIs, admin, id)
	if err != nil {
		return ModelPull{}, err
	}
	p, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ModelPull])
	return p, mapErr(err)
}

// RunningModelPull reports whether model (any case) is being pulled onto
// server ("" with one server; "*": onto any).
func (d *DB) RunningModelPull(ctx context.Context, admin int64, model, server string) (bool, error) {
	var found bool
	err := d.q().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM model_pulls WHERE status = 'running'
		AND lower(model) = lower($2) AND ($3 = '*' OR server = $3)) AND `+adminIs, admin, model, server).Scan(&found)
	return found, err
}

// CancelModelPull asks a running pull to stop, wherever it runs (the note
// reaches its instance at once; its next progress write reads the flag
// too). A pull already ended is returned as it is.
func (d *DB) CancelModelPull(ctx context.Context, admin, id int64) (ModelPull, error) {
	var p ModelPull
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE model_pulls SET cancel_requested = true, updated_at = now()
			WHERE id = $2 AND `+adminIs+` RETURNING `+modelPullCols, admin, id)
		if err != nil {
			return err
		}
		if p, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ModelPull]); err != nil {
			return mapErr(err)
		}
		if !p.Running() {
			return nil
		}
		return notifyRuns(ctx, tx, NotePullStop, []int64{id})
	})
	return p, err
}

// SaveModelPull writes a running pull's progress (by the instance that
// runs it) and tells every instance; cancel reports whether Cancel was
// asked for. A pull no longer running is left alone (cancel true: stop).
func (d *DB) SaveModelPull(ctx context.Context, id int64, pr PullProgress) (cancel bool, err error) {
	err = d.q().QueryRow(ctx, `WITH u AS (
			UPDATE model_pulls SET status_text = $2, digest = $3, layers = $4, completed = $5, total = $6,
				bytes_per_sec = $7, updated_at = now()
			WHERE id = $1 AND status = 'running' RETURNING cancel_requested)
		SELECT COALESCE((SELECT cancel_requested FROM u), true), pg_notify($8, $9)`,
		id, pr.StatusText, pr.Digest, pr.Layers, pr.Completed, pr.Total, pr.BytesPerSec,
		RunChannel, notePayload(NotePull, id)).Scan(&cancel, nil)
	return cancel, err
}

// FinishModelPull ends a running pull with status, its last progress and
// error (shown on its row), then tells every instance.
func (d *DB) FinishModelPull(ctx context.Context, id int64, status string, pr PullProgress, errText string) error {
	_, err := d.q().Exec(ctx, `UPDATE model_pulls SET status = $2, status_text = $3, digest = $4, layers = $5,
			completed = $6, total = $7, bytes_per_sec = $8, error = $9, updated_at = now(), finished_at = now()
		WHERE id = $1 AND status = 'running'`,
		id, status, pr.StatusText, pr.Digest, pr.Layers, pr.Completed, pr.Total, pr.BytesPerSec, errText)
	if err == nil {
		d.notifyAfter(ctx, NotePullEnd, []int64{id})
	}
	return err
}

// InterruptOrphanedPulls marks interrupted the running pulls of a
// restarting instance (self, at start-up) or of instances silent for
// staleAfter, and returns their ids.
func (d *DB) InterruptOrphanedPulls(ctx context.Context, self string, staleAfter time.Duration) ([]int64, error) {
	rows, err := d.q().Query(ctx, `UPDATE model_pulls SET status = 'interrupted', finished_at = now(), updated_at = now(),
			error = 'The server stopped while this model was being pulled. Pull it again to resume: what was downloaded is kept.'
		WHERE status = 'running' AND (instance_id = $1 OR NOT EXISTS (
			SELECT 1 FROM instances i WHERE i.id = model_pulls.instance_id AND i.heartbeat_at > now() - make_interval(secs => $2)))
		RETURNING id`, self, staleAfter.Seconds())
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err == nil {
		d.notifyAfter(ctx, NotePullEnd, ids)
	}
	return ids, err
}

// InterruptStalledPulls marks interrupted the running pulls of instance
// that it no longer runs (their ids are not in live) and that were not
// written for staleAfter: their end could not be saved (the database did
// not answer then). Left running, they would refuse that model's next
// pull and its deletion until a restart. It returns their ids.
func (d *DB) InterruptStalledPulls(ctx context.Context, instance string, live []int64, staleAfter time.Duration) ([]int64, error) {
	rows, err := d.q().Query(ctx, `UPDATE model_pulls SET status = 'interrupted', finished_at = now(), updated_at = now(),
			error = 'The end of this pull could not be saved. If the model is not in the list, pull it again: what was downloaded is kept.'
		WHERE status = 'running' AND instance_id = $1 AND NOT (id = ANY($2::bigint[]))
			AND updated_at < now() - make_interval(secs => $3)
		RETURNING id`, instance, live, staleAfter.Seconds())
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err == nil {
		d.notifyAfter(ctx, NotePullEnd, ids)
	}
	return ids, err
}
