package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// oneRow runs a query that returns exactly one row and reads it into a T by
// column name; no row is ErrNotFound. The query's own error is returned as
// it is.
func oneRow[T any](ctx context.Context, q querier, sql string, args ...any) (T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[T])
	return v, mapErr(err)
}
