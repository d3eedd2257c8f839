package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Workspace scopes threads, knowledge bases, tool policy and the default model.
type Workspace struct {
	ID           int64  `db:"id"`
	OwnerID      int64  `db:"owner_id"`
	Name         string `db:"name"`
	RootPath     string `db:"root_path"`
	Status       string `db:"status"`
	IsDefault    bool   `db:"is_default"`
	DefaultModel string `db:"default_model"`
	// AgentMaxSteps caps the tool rounds of one agent run.
	AgentMaxSteps int       `db:"agent_max_steps"`
	CreatedAt     time.Time `db:"created_at"`
	UpdatedAt     time.Time `db:"updated_at"`
}

// Archived reports whether the workspace is archived.
func (w Workspace) Archived() bool { return w.Status == "archived" }

const workspaceCols = "id, owner_id, name, root_path, status, is_default, default_model, agent_max_steps, created_at, updated_at"

func insertWorkspace(ctx context.Context, q querier, owner int64, name string, isDefault bool) (Workspace, error) {
	rows, err := q.Query(ctx, `INSERT INTO workspaces (owner_id, name, is_default) VALUES ($1, $2, $3)
		RETURNING `+workspaceCols, owner, name, isDefault)
	if err != nil {
		return Workspace{}, err
	}
	w, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Workspace])
	return w, mapErr(err)
}

// CreateWorkspace adds a workspace for the user.
func (d *DB) CreateWorkspace(ctx context.Context, user int64, name string) (Workspace, error) {
	return insertWorkspace(ctx, d.q(), user, name, false)
}

// Workspace returns one of the user's workspaces.
func (d *DB) Workspace(ctx context.Context, user, id int64) (Workspace, error) {
	rows, err := d.q().Query(ctx, "SELECT "+workspaceCols+" FROM workspaces WHERE id = $1 AND owner_id = $2", id, user)
	if err != nil {
		return Workspace{}, err
	}
	w, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Workspace])
	return w, mapErr(err)
}

// DefaultWorkspace returns the user's default workspace.
func (d *DB) DefaultWorkspace(ctx context.Context, user int64) (Workspace, error) {
	rows, err := d.q().Query(ctx, "SELECT "+workspaceCols+" FROM workspaces WHERE owner_id = $1 AND is_default", user)
	if err != nil {
		return Workspace{}, err
	}
	w, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Workspace])
	return w, mapErr(err)
}

// Workspaces lists the user's workspaces: active ones first, by name.
func (d *DB) Workspaces(ctx context.Context, user int64) ([]Workspace, error) {
	rows, err := d.q().Query(ctx, "SELECT "+workspaceCols+` FROM workspaces WHERE owner_id = $1
		ORDER BY status, is_default DESC, lower(name), id`, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Workspace])
}

// RenameWorkspace renames one of the user's workspaces.
func (d *DB) RenameWorkspace(ctx context.Context, user, id int64, name string) error {
	return execOne(ctx, d.q(), "UPDATE workspaces SET name = $3, updated_at = now() WHERE id = $1 AND owner_id = $2", id, user, name)
}

// SetWorkspaceArchived archives or restores one of the user's workspaces.
// The default workspace cannot be archived: it is where the user lands.
func (d *DB) SetWorkspaceArchived(ctx context.Context, user, id int64, archived bool) error {
	status := "active"
	if archived {
		status = "archived"
	}
	return execOne(ctx, d.q(), `UPDATE workspaces SET status = $3, updated_at = now()
		WHERE id = $1 AND owner_id = $2 AND NOT (is_default AND $3 = 'archived')`, id, user, status)
}

// SetWorkspaceModel sets the model new threads of one of the user's
// workspaces start with ("" : the instance's default).
func (d *DB) SetWorkspaceModel(ctx context.Context, user, id int64, model string) error {
	return execOne(ctx, d.q(), "UPDATE workspaces SET default_model = $3, updated_at = now() WHERE id = $1 AND owner_id = $2",
		id, user, model)
}

// execOne runs a statement that must touch exactly one row; zero rows means
// the object is missing or not the user's (ErrNotFound).
func execOne(ctx context.Context, q querier, sql string, args ...any) error {
	tag, err := q.Exec(ctx, sql, args...)
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
