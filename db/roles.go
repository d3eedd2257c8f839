package db

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// RoleParams are a role's generation parameters, stored as JSON under
// Ollama's option names. A nil field is not sent (the model's default
// applies).
type RoleParams struct {
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"top_p,omitempty"`
	TopK          *int     `json:"top_k,omitempty"`
	RepeatPenalty *float64 `json:"repeat_penalty,omitempty"`
	Seed          *int     `json:"seed,omitempty"`
	NumCtx        *int     `json:"num_ctx,omitempty"`
	NumPredict    *int     `json:"num_predict,omitempty"`
	Stop          []string `json:"stop,omitempty"`
}

// Role is a persona: a prompt and generation parameters, applied the same
// way on every route.
type Role struct {
	ID        int64      `db:"id"`
	OwnerID   int64      `db:"owner_id"`
	Name      string     `db:"name"`
	Prompt    string     `db:"prompt"`
	Params    RoleParams `db:"params"`
	CreatedAt time.Time  `db:"created_at"`
	UpdatedAt time.Time  `db:"updated_at"`
}

const roleCols = "id, owner_id, name, prompt, params, created_at, updated_at"

// RoleInput is what a user writes into a role.
type RoleInput struct {
	Name   string
	Prompt string
	Params RoleParams
}

// Roles lists the user's roles by name.
func (d *DB) Roles(ctx context.Context, user int64) ([]Role, error) {
	rows, err := d.q().Query(ctx, "SELECT "+roleCols+" FROM roles WHERE owner_id = $1 ORDER BY lower(name), id", user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Role])
}

// Role returns one of the user's roles.
func (d *DB) Role(ctx context.Context, user, id int64) (Role, error) {
	return d.oneRole(ctx, "SELECT "+roleCols+" FROM roles WHERE id = $1 AND owner_id = $2", id, user)
}

// RoleByName finds one of the user's roles by its name, ignoring case.
func (d *DB) RoleByName(ctx context.Context, user int64, name string) (Role, error) {
	return d.oneRole(ctx, "SELECT "+roleCols+" FROM roles WHERE lower(name) = lower($1) AND owner_id = $2",
		strings.TrimSpace(name), user)
}

// CreateRole adds a role; a name the user already uses is ErrConflict.
func (d *DB) CreateRole(ctx context.Context, user int64, in RoleInput) (Role, error) {
	return d.oneRole(ctx, `INSERT INTO roles (owner_id, name, prompt, params) VALUES ($1, $2, $3, $4)
		RETURNING `+roleCols, user, in.Name, in.Prompt, in.Params)
}

// UpdateRole rewrites one of the user's roles.
func (d *DB) UpdateRole(ctx context.Context, user, id int64, in RoleInput) (Role, error) {
	return d.oneRole(ctx, `UPDATE roles SET name = $3, prompt = $4, params = $5, updated_at = now()
		WHERE id = $1 AND owner_id = $2 RETURNING `+roleCols, id, user, in.Name, in.Prompt, in.Params)
}

// DeleteRole removes one of the user's roles; threads that used it go on
// without a role. It returns how many threads that was.
func (d *DB) DeleteRole(ctx context.Context, user, id int64) (threads int, err error) {
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM threads WHERE role_id = $1 AND owner_id = $2", id, user).Scan(&threads); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, "DELETE FROM roles WHERE id = $1 AND owner_id = $2", id, user)
		if err == nil && tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return err
	})
	return threads, mapErr(err)
}

// RoleUsage counts the user's threads that use a role.
func (d *DB) RoleUsage(ctx context.Context, user, id int64) (int, error) {
	var n int
	err := d.q().QueryRow(ctx, "SELECT count(*) FROM threads WHERE role_id = $1 AND owner_id = $2", id, user).Scan(&n)
	return n, err
}

func (d *DB) oneRole(ctx context.Context, sql string, args ...any) (Role, error) {
	rows, err := d.q().Query(ctx, sql, args...)
	if err != nil {
		return Role{}, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Role])
	return r, mapErr(err)
}
