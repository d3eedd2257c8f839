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
