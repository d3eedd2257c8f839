package db

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrRateLimited is returned when a key has used up its attempts.
var ErrRateLimited = errors.New("db: rate limited")

// ErrSetupToken is returned by CreateUserWithToken when the first account
// needs a setup token and the one given is missing or wrong.
var ErrSetupToken = errors.New("db: setup token required")

// RateKey is one counter of a limit: at most Max events of Key per window.
type RateKey struct {
	Key string
	Max int
}

// ReserveLoginAttempt counts a login attempt as a failure before the
// password is checked, under a transaction-scoped advisory lock per key, so
// that N parallel attempts can never pass a limit of M < N: each sees the
// reservations of those before it. It returns ErrRateLimited (reserving
// nothing) when a key is at its maximum since the given time, and otherwise
// the ids of the reserved rows, which ReleaseLoginAttempt removes when the
// password turns out right. Keys are locked in the order given; callers pass
// them in one fixed order (address, then account) so locks never cycle.
func (d *DB) ReserveLoginAttempt(ctx context.Context, since time.Time, keys ...RateKey) ([]int64, error) {
	var ids []int64
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		for _, k := range keys {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "login:"+k.Key); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM login_failures WHERE key = $1 AND failed_at > $2",
				k.Key, since).Scan(&n); err != nil {
				return err
			}
			if n >= k.Max {
				return ErrRateLimited
			}
		}
		for _, k := range keys {
			var id int64
			if err := tx.QueryRow(ctx, "INSERT INTO login_failures (key) VALUES ($1) RETURNING id", k.Key).Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	return ids, err
}

// ReleaseLoginAttempt removes reservations made by ReserveLoginAttempt: a
// successful login is not a failure.
func (d *DB) ReleaseLoginAttempt(ctx context.Context, ids []int64) error {
	_, err := d.q().Exec(ctx, "DELETE FROM login_failures WHERE id = ANY($1)", ids)
	return err
}

// ReserveSignup counts one sign-up attempt of a client address, refusing
// with ErrRateLimited when the address already made max since the given
// time. The count and the insert happen under one advisory lock, so
// parallel attempts cannot pass the limit; old rows are pruned on the way.
func (d *DB) ReserveSignup(ctx context.Context, client string, max int, since time.Time) error {
	return d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "signup:"+client); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM signup_attempts WHERE client = $1 AND created_at <= $2", client, since); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM signup_attempts WHERE client = $1", client).Scan(&n); err != nil {
			return err
		}
		if n >= max {
			return ErrRateLimited
		}
		_, err := tx.Exec(ctx, "INSERT INTO signup_attempts (client) VALUES ($1)", client)
		return err
	})
}

const setupTokenPrefix = "setup_token:"

func setupTokenKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return setupTokenPrefix + hex.EncodeToString(sum[:])
}

// AddSetupToken stores a first-administrator setup token, hashed (it is
// random and long, so SHA-256 suffices). Each instance that starts with no
// accounts adds its own, so a token printed by any instance works on all;
// creating the first account consumes every one of them.
func (d *DB) AddSetupToken(ctx context.Context, token string) error {
	_, err := d.q().Exec(ctx, "INSERT INTO settings (key, value) VALUES ($1, 'pending') ON CONFLICT (key) DO NOTHING",
		setupTokenKey(token))
	return err
}

// SetupToken reports whether the first account still needs a setup token
// (no account exists and a token was issued) and whether token is one of
// those issued. It only reads: CreateUserWithToken consumes.
func (d *DB) SetupToken(ctx context.Context, token string) (needed, valid bool, err error) {
	err = d.q().QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM users)
			AND EXISTS (SELECT 1 FROM settings WHERE starts_with(key, $1)),
		EXISTS (SELECT 1 FROM settings WHERE key = $2)`, setupTokenPrefix, setupTokenKey(token)).Scan(&needed, &valid)
	return needed, valid, err
}

// consumeSetupToken runs inside CreateUser's transaction when the first
// account is made: with no token issued the account is made as before
// (loopback installs); otherwise token must be one of them, and all are
// deleted, so each works once.
func consumeSetupToken(ctx context.Context, tx pgx.Tx, token string) error {
	rows, err := tx.Query(ctx, "DELETE FROM settings WHERE starts_with(key, $1) RETURNING key", setupTokenPrefix)
	if err != nil {
		return err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(keys) > 0 && (token == "" || !slices.Contains(keys, setupTokenKey(token))) {
		return ErrSetupToken
	}
	return nil
}

// LiveSessions returns which of the given session tokens still name an
// unexpired session (scs's table) that is still its account's
// (user_sessions): streams of the others are ended, which carries a logout,
// or an account's sessions ended, on one instance to the streams open on
// another.
func (d *DB) LiveSessions(ctx context.Context, tokens []string) ([]string, error) {
	rows, err := d.q().Query(ctx, `SELECT s.token FROM sessions s JOIN user_sessions us ON us.token = s.token
		WHERE s.token = ANY($1) AND s.expiry > now()`, tokens)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
