package handlers

import (
	"context"
	"crypto/rand"
	"fmt"

	"weft/db"
)

// IssueSetupToken makes the one-time token the first account needs when
// Weft listens beyond loopback (the caller prints it in the log, as Grafana
// and Jupyter do). It returns "" once any account exists. The token is
// stored hashed in Postgres, so every instance accepts it; creating the
// first account consumes it.
func IssueSetupToken(ctx context.Context, store *db.DB) (string, error) {
	n, err := store.CountUsers(ctx)
	if err != nil || n > 0 {
		return "", err
	}
	token := rand.Text() // 26 base32 characters, 130 bits
	if err := store.AddSetupToken(ctx, token); err != nil {
		return "", fmt.Errorf("setup token: %w", err)
	}
	return token, nil
}
