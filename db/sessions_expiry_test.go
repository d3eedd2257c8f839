package db_test

import (
	"context"
	"testing"

	"weft/internal/testenv"
)

func TestDeletingExpiredSessionsKeepsTheLiveOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	if _, err := store.Pool.Exec(ctx, `INSERT INTO sessions (token, data, expiry) VALUES
		('old', '\x00', now() - interval '1 minute'), ('live', '\x00', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteExpiredSessions(ctx); err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, err := store.Pool.Query(ctx, "SELECT token FROM sessions ORDER BY token")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var tok string
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		left = append(left, tok)
	}
	if len(left) != 1 || left[0] != "live" {
		t.Fatalf("sessions left %v, want only the live one", left)
	}
}
