package db

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// WorkspaceHook is an HTTP hook a workspace's owner added: the lifecycle
// events of the workspace's agent runs are POSTed to URL, signed with
// Secret.
type WorkspaceHook struct {
	ID          int64     `db:"id"`
	WorkspaceID int64     `db:"workspace_id"`
	Event       string    `db:"event"` // a lifecycle event or "*"
	URL         string    `db:"url"`
	Secret      string    `db:"secret"`
	TimeoutMS   int       `db:"timeout_ms"`
	CreatedAt   time.Time `db:"created_at"`
}

const workspaceHookCols = "id, workspace_id, event, url, secret, timeout_ms, created_at"

// WorkspaceHooks lists the hooks of one of the user's workspaces.
func (d *DB) WorkspaceHooks(ctx context.Context, user, workspace int64) ([]WorkspaceHook, error) {
	rows, err := d.q().Query(ctx, "SELECT "+prefixed("h.", workspaceHookCols)+` FROM workspace_hooks h
		JOIN workspaces w ON w.id = h.workspace_id WHERE h.workspace_id = $1 AND w.owner_id = $2 ORDER BY h.id`, workspace, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[WorkspaceHook])
}

// MaxWorkspaceHooks is how many hooks a workspace may have: each is
// delivered every event it takes (a POST to wherever its owner chose, a
// row in the outbox), and a policy hook is waited for before each call.
const MaxWorkspaceHooks = 10

// ErrHookLimit is a hook added to a workspace that has MaxWorkspaceHooks.
var ErrHookLimit = errors.New("db: the workspace has as many hooks as it may")

// AddWorkspaceHook adds a hook to one of the user's workspaces (ErrNotFound
// when it is not theirs, ErrHookLimit when it has MaxWorkspaceHooks).
func (d *DB) AddWorkspaceHook(ctx context.Context, user int64, h WorkspaceHook) (WorkspaceHook, error) {
	var out WorkspaceHook
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		// The workspace's row is locked, so two adds at once cannot both
		// take the last place.
		var n int
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM workspace_hooks WHERE workspace_id = w.id)
			FROM workspaces w WHERE w.id = $1 AND w.owner_id = $2 FOR UPDATE OF w`, h.WorkspaceID, user).Scan(&n); err != nil {
			return mapErr(err)
		}
		if n >= MaxWorkspaceHooks {
			return ErrHookLimit
		}
		var err error
		out, err = oneRow[WorkspaceHook](ctx, tx, `INSERT INTO workspace_hooks (workspace_id, event, url, secret, timeout_ms)
			VALUES ($1, $2, $3, $4, $5) RETURNING `+workspaceHookCols, h.WorkspaceID, h.Event, h.URL, h.Secret, h.TimeoutMS)
		return err
	})
	return out, err
}

// DeleteWorkspaceHook deletes one of the user's hooks (ErrNotFound when it
// is not theirs); its deliveries not yet made go with it.
func (d *DB) DeleteWorkspaceHook(ctx context.Context, user, id int64) (WorkspaceHook, error) {
	return oneRow[WorkspaceHook](ctx, d.q(), `DELETE FROM workspace_hooks h USING workspaces w
		WHERE h.id = $1 AND w.id = h.workspace_id AND w.owner_id = $2 RETURNING `+prefixed("h.", workspaceHookCols), id, user)
}

// WorkspaceHookByID returns a hook for the delivery job (which acts for no
// user: the delivery row names the hook).
func (d *DB) WorkspaceHookByID(ctx context.Context, id int64) (WorkspaceHook, error) {
	return oneRow[WorkspaceHook](ctx, d.q(), "SELECT "+workspaceHookCols+" FROM workspace_hooks WHERE id = $1", id)
}

// HookDelivery is one event for one hook in the outbox.
type HookDelivery struct {
	ID              int64      `db:"id"`
	EventID         string     `db:"event_id"`
	Event           string     `db:"event"`
	RunID           *int64     `db:"run_id"`
	HookKey         string     `db:"hook_key"`
	WorkspaceHookID *int64     `db:"workspace_hook_id"`
	Body            string     `db:"body"`
	Attempts        int        `db:"attempts"`
	LastError       string     `db:"last_error"`
	StepID          *int64     `db:"step_id"`
	CreatedAt       time.Time  `db:"created_at"`
	DeliveredAt     *time.Time `db:"delivered_at"`
	GivenUpAt       *time.Time `db:"given_up_at"`
}

const hookDeliveryCols = "id, event_id, event, run_id, hook_key, workspace_hook_id, body, attempts, last_error, step_id, created_at, delivered_at, given_up_at"

// WithDeliveries is a checkpoint (for AddStep and UpdateStep) saved with
// deliveries put in the outbox in the same transaction, as
// AddHookDeliveries puts them: a step's outcome and the events that
// report it are recorded together, or neither (a crash between the two
// lost the events).
type WithDeliveries struct {
	Checkpoint any
	Deliveries []HookDelivery
	Enqueue    func(tx pgx.Tx, d HookDelivery) error
}

// outboxed adds a WithDeliveries' deliveries in tx and returns its
// checkpoint (any other checkpoint as it is).
func outboxed(ctx context.Context, tx pgx.Tx, checkpoint any) (any, error) {
	w, ok := checkpoint.(WithDeliveries)
	if !ok {
		return checkpoint, nil
	}
	return w.Checkpoint, addHookDeliveries(ctx, tx, w.Deliveries, w.Enqueue)
}

// AddHookDeliveries puts deliveries in the outbox and, in the same
// transaction, calls enqueue for each (the job that makes it): a delivery
// exists if and only if its job does. A delivery already there (the same
// event for the same hook) is kept as it is.
func (d *DB) AddHookDeliveries(ctx context.Context, ds []HookDelivery, enqueue func(tx pgx.Tx, d HookDelivery) error) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error { return addHookDeliveries(ctx, tx, ds, enqueue) }))
}

func addHookDeliveries(ctx context.Context, tx pgx.Tx, ds []HookDelivery, enqueue func(tx pgx.Tx, d HookDelivery) error) error {
	for _, h := range ds {
		rows, err := tx.Query(ctx, `INSERT INTO hook_deliveries (event_id, event, run_id, hook_key, workspace_hook_id, body, attempts, last_error, step_id)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (event_id, hook_key) DO NOTHING RETURNING `+hookDeliveryCols,
			h.EventID, h.Event, h.RunID, h.HookKey, h.WorkspaceHookID, h.Body, h.Attempts, h.LastError, h.StepID)
		if err != nil {
			return err
		}
		added, err := pgx.CollectRows(rows, pgx.RowToStructByName[HookDelivery])
		if err != nil {
			return err
		}
		for _, a := range added {
			if err := enqueue(tx, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// HookDeliveryByID returns a delivery of the outbox.
func (d *DB) HookDeliveryByID(ctx context.Context, id int64) (HookDelivery, error) {
	return oneRow[HookDelivery](ctx, d.q(), "SELECT "+hookDeliveryCols+" FROM hook_deliveries WHERE id = $1", id)
}

// HookDeliveries lists a run's deliveries in the order they were made.
func (d *DB) HookDeliveries(ctx context.Context, run int64) ([]HookDelivery, error) {
	rows, err := d.q().Query(ctx, "SELECT "+hookDeliveryCols+" FROM hook_deliveries WHERE run_id = $1 ORDER BY id", run)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[HookDelivery])
}

// HookAttempted records an attempt at a delivery: delivered, or failed
// with errText (given up: no attempt follows); step is the trace step that
// shows it (0: none).
func (d *DB) HookAttempted(ctx context.Context, id int64, delivered, givenUp bool, errText string, step int64) (HookDelivery, error) {
	return oneRow[HookDelivery](ctx, d.q(), `UPDATE hook_deliveries SET attempts = attempts + 1,
			last_error = CASE WHEN $2 THEN last_error ELSE $4 END,
			delivered_at = CASE WHEN $2 THEN now() ELSE delivered_at END,
			given_up_at = CASE WHEN $3 THEN now() ELSE given_up_at END,
			step_id = COALESCE(NULLIF($5, 0), step_id)
		WHERE id = $1 RETURNING `+hookDeliveryCols, id, delivered, givenUp, errText, step)
}

// UnreportedHookFailures lists a run's deliveries that failed and are not
// yet shown in its trace, but for those of the events in quiet.
func (d *DB) UnreportedHookFailures(ctx context.Context, run int64, quiet []string) ([]HookDelivery, error) {
	rows, err := d.q().Query(ctx, "SELECT "+hookDeliveryCols+` FROM hook_deliveries
		WHERE run_id = $1 AND attempts > 0 AND delivered_at IS NULL AND step_id IS NULL
			AND NOT (event = ANY($2::text[])) ORDER BY id`, run, append([]string{}, quiet...))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[HookDelivery])
}

// SetHookDeliveryStep records the trace step that shows a delivery.
func (d *DB) SetHookDeliveryStep(ctx context.Context, id, step int64) error {
	_, err := d.q().Exec(ctx, "UPDATE hook_deliveries SET step_id = $2 WHERE id = $1", id, step)
	return err
}

// RunEnded reports whether a run is no longer queued, running or waiting
// (a deleted run counts as ended).
func (d *DB) RunEnded(ctx context.Context, run int64) (bool, error) {
	var active bool
	err := d.q().QueryRow(ctx, "SELECT status IN ('queued', 'running', 'waiting') FROM runs WHERE id = $1", run).Scan(&active)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	return !active, mapErr(err)
}

// PruneHookDeliveries deletes the deliveries made or given up before
// before, and those neither made nor given up but created a week before
// that (their job ended without recording an outcome: its last attempt
// was interrupted by a shutdown or timed out, or discarded by the queue's
// rescuer), and returns how many.
func (d *DB) PruneHookDeliveries(ctx context.Context, before time.Time) (int64, error) {
	tag, err := d.q().Exec(ctx, `DELETE FROM hook_deliveries WHERE delivered_at < $1 OR given_up_at < $1
		OR created_at < $1 - interval '7 days'`, before)
	return tag.RowsAffected(), err
}
