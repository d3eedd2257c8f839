package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// User is an account.
type User struct {
	ID           int64     `db:"id"`
	Email        string    `db:"email"`
	DisplayName  string    `db:"display_name"`
	PasswordHash string    `db:"password_hash"`
	Role         string    `db:"role"`
	Disabled     bool      `db:"disabled"`
	CreatedAt    time.Time `db:"created_at"`
	// HasPassword is false for an account made by single sign-on until a
	// password is set for it: its hash is of a secret nobody knows, so it
	// cannot prove it is someone's by a password (handlers/oidc_link.go).
	HasPassword bool `db:"has_password"`
}

// IsAdmin reports whether the user administers the instance.
func (u User) IsAdmin() bool { return u.Role == "admin" }

const userCols = "id, email, display_name, password_hash, role, disabled, created_at, has_password"

// Signup modes stored under the signup_mode setting.
const (
	SignupOpen   = "open"
	SignupInvite = "invite" // only with an invite link an administrator made
	SignupClosed = "closed"
)

// ErrSignupClosed is returned by CreateUser when an account already exists
// and the admin has closed sign-up.
var ErrSignupClosed = fmt.Errorf("db: sign-up is closed")

// CreateUser creates an account and its default workspace in one
// transaction. The first account ever becomes the admin; later ones are
// members, and only while sign-up is open. The users table is locked for the
// decision so that two simultaneous first registrations cannot both become
// admin.
func (d *DB) CreateUser(ctx context.Context, email, displayName, passwordHash string) (User, Workspace, error) {
	return d.CreateUserWithToken(ctx, email, displayName, passwordHash, "")
}

// CreateUserWithToken is CreateUser for a sign-up form that may carry a
// first-administrator setup token: when setup tokens were issued (Weft
// listens beyond loopback) the first account is made only with one of them
// (ErrSetupToken otherwise), and consumes them all.
func (d *DB) CreateUserWithToken(ctx context.Context, email, displayName, passwordHash, setupToken string) (User, Workspace, error) {
	return d.CreateAccount(ctx, NewAccount{Email: email, DisplayName: displayName, PasswordHash: passwordHash, SetupToken: setupToken})
}

// NewAccount is what a sign-up gives: the account, and the first
// administrator's setup token or an invite token when it has one.
type NewAccount struct {
	Email, DisplayName, PasswordHash string
	SetupToken                       string
	Invite                           string // an invite link's token (invite-only sign-up)
}

// CreateAccount creates an account and its default workspace in one
// transaction, deciding under a lock of the users table: the first account
// (with the setup token when one was issued) becomes the admin; later ones
// are members, while sign-up is open, or invite-only with a usable invite
// (checkInvite's errors), which this transaction uses up.
func (d *DB) CreateAccount(ctx context.Context, a NewAccount) (User, Workspace, error) {
	return d.newAccount(ctx, a, true, false, nil)
}

// newAccount is the one transaction that makes an account (CreateAccount,
// CreateUserWithIdentity): the users table locked, the role and the
// sign-up rules decided (ignoreMode admits a later account whatever the
// sign-up mode), the row inserted, then withAccount (nil: nothing) in the
// same transaction, the invite used up and the default workspace made.
func (d *DB) newAccount(ctx context.Context, a NewAccount, hasPassword, ignoreMode bool,
	withAccount func(tx pgx.Tx, u User) error) (User, Workspace, error) {
	var u User
	var ws Workspace
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE"); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM users").Scan(&n); err != nil {
			return err
		}
		role := "member"
		var invite int64
		if n == 0 {
			role = "admin"
			if err := consumeSetupToken(ctx, tx, a.SetupToken); err != nil {
				return err
			}
		} else if !ignoreMode {
			mode, err := getSetting(ctx, tx, "signup_mode", SignupOpen)
			if err != nil {
				return err
			}
			if invite, err = signupAllowed(ctx, tx, mode, a.Invite, a.Email); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `INSERT INTO users (email, display_name, password_hash, role, has_password)
			VALUES ($1, $2, $3, $4, $5) RETURNING `+userCols, a.Email, a.DisplayName, a.PasswordHash, role, hasPassword)
		if err != nil {
			return err
		}
		if u, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User]); err != nil {
			return mapErr(err)
		}
		if withAccount != nil {
			if err := withAccount(tx, u); err != nil {
				return err
			}
		}
		if invite != 0 {
			if _, err := tx.Exec(ctx, "UPDATE invites SET used_at = now(), used_by = $2 WHERE id = $1", invite, u.ID); err != nil {
				return err
			}
		}
		ws, err = insertWorkspace(ctx, tx, u.ID, "Personal", true)
		return err
	})
	return u, ws, mapErr(err)
}

// UserByEmail finds an account by email, case-insensitively.
func (d *DB) UserByEmail(ctx context.Context, email string) (User, error) {
	rows, err := d.q().Query(ctx, "SELECT "+userCols+" FROM users WHERE lower(email) = lower($1)", email)
	if err != nil {
		return User{}, err
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User])
	return u, mapErr(err)
}

// UserByID finds an account by id (used to load the signed-in user).
func (d *DB) UserByID(ctx context.Context, id int64) (User, error) {
	rows, err := d.q().Query(ctx, "SELECT "+userCols+" FROM users WHERE id = $1", id)
	if err != nil {
		return User{}, err
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User])
	return u, mapErr(err)
}

// CountUsers returns how many accounts exist.
func (d *DB) CountUsers(ctx context.Context) (int, error) {
	var n int
	err := d.q().QueryRow(ctx, "SELECT count(*) FROM users").Scan(&n)
	return n, err
}

// RecordLoginFailure remembers one failed login for each key.
func (d *DB) RecordLoginFailure(ctx context.Context, keys ...string) error {
	_, err := d.q().Exec(ctx, "INSERT INTO login_failures (key) SELECT unnest($1::text[])", keys)
	return err
}

// LoginFailures counts the failures of key since the given time.
func (d *DB) LoginFailures(ctx context.Context, key string, since time.Time) (int, error) {
	var n int
	err := d.q().QueryRow(ctx, "SELECT count(*) FROM login_failures WHERE key = $1 AND failed_at > $2", key, since).Scan(&n)
	return n, err
}

// ClearLoginFailures forgets the failures of key (after a successful login)
// and prunes every failure older than before.
func (d *DB) ClearLoginFailures(ctx context.Context, key string, before time.Time) error {
	_, err := d.q().Exec(ctx, "DELETE FROM login_failures WHERE key = $1 OR failed_at < $2", key, before)
	return err
}
