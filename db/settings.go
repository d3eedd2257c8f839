package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Setting returns an instance setting, or def when it was never set.
func (d *DB) Setting(ctx context.Context, key, def string) (string, error) {
	return getSetting(ctx, d.q(), key, def)
}

// SetSetting stores an instance setting. Only admins reach it (handlers).
func (d *DB) SetSetting(ctx context.Context, key, value string) error {
	_, err := d.q().Exec(ctx, `INSERT INTO settings (key, value) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`, key, value)
	return err
}

func getSetting(ctx context.Context, q querier, key, def string) (string, error) {
	var v string
	err := q.QueryRow(ctx, "SELECT value FROM settings WHERE key = $1", key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return def, nil
	}
	return v, err
}
