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

// send stores a message (kind chat) and fails the test on error.
func send(t *testing.T, store *db.DB, user int64, s db.Send) db.Sent {
	t.Helper()
	if s.Kind == "" {
		s.Kind = "chat"
	}
	sent, err := store.SendMessage(context.Background(), user, s)
	if err != nil {
		t.Fatalf("send %q: %v", s.Content, err)
	}
	return sent
}

// oldUser makes an account and its default workspace with the columns of
// migration 001 only, for tests that migrate an old schema: db.CreateUser
// reads the columns later migrations add.
func oldUser(t *testing.T, store *db.DB, email string) (db.User, db.Workspace) {
	t.Helper()
	ctx := context.Background()
	var u db.User
	var ws db.Workspace
	if err := store.Pool.QueryRow(ctx, `INSERT INTO users (email, password_hash, role) VALUES ($1, 'x', 'admin') RETURNING id`, email).Scan(&u.ID); err != nil {
		t.Fatalf("create user %s: %v", email, err)
	}
	if err := store.Pool.QueryRow(ctx, `INSERT INTO workspaces (owner_id, name, is_default) VALUES ($1, 'Default', true) RETURNING id`, u.ID).Scan(&ws.ID); err != nil {
		t.Fatalf("create workspace of %s: %v", email, err)
	}
	u.Email = email
	return u, ws
}
