package db_test

import (
	"context"
	"testing"

	"weft/db"
)

// newUser creates an account (and its default workspace) for a test.
func newUser(t *testing.T, store *db.DB, email string) (db.User, db.Workspace) {
	t.Helper()
	u, ws, err := store.CreateUser(context.Background(), email, "", "x")
	if err != nil {
		t.Fatalf("create user %s: %v", email, err)
	}
	return u, ws
}
