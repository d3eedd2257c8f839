package db

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Why a sign-up with an invite (or without one) is refused.
var (
	ErrInviteNeeded  = errors.New("db: sign-up needs an invite")
	ErrInviteUnknown = errors.New("db: no such invite")
	ErrInviteUsed    = errors.New("db: invite already used")
	ErrInviteExpired = errors.New("db: invite expired")
	ErrInviteEmail   = errors.New("db: invite is for another address")
)

// tokenHash is how one-time tokens (invites, password resets) are kept:
// they are random and long, so SHA-256 suffices.
func tokenHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// Invite is an invite link as the administrator sees it (its token was
// shown once, when it was made).
type Invite struct {
	ID        int64      `db:"id"`
	Email     string     `db:"email"` // '' = any address
	CreatedAt time.Time  `db:"created_at"`
	ExpiresAt time.Time  `db:"expires_at"`
	UsedAt    *time.Time `db:"used_at"`
	UsedBy    *string    `db:"used_by_email"` // nil: unused, or its account was deleted
	CreatedBy *string    `db:"created_by_email"`
}

// Expired reports whether the invite can no longer be used for its age.
func (i Invite) Expired(now time.Time) bool { return i.UsedAt == nil && !now.Before(i.ExpiresAt) }

// CreateInvite stores an invite link's token (hashed), usable once until
// expires, by anyone or only by email.
func (d *DB) CreateInvite(ctx context.Context, actor int64, token, email string, expires time.Time) (Invite, error) {
	return oneRow[Invite](ctx, d.q(), `WITH i AS (
			INSERT INTO invites (token_hash, email, created_by, expires_at) VALUES ($1, $2, $3, $4) RETURNING *)
		SELECT i.id, i.email, i.created_at, i.expires_at, i.used_at, NULL::text AS used_by_email, u.email AS created_by_email
		FROM i LEFT JOIN users u ON u.id = i.created_by`, tokenHash(token), strings.TrimSpace(email), actor, expires)
}

// Invites lists the newest invites (at most limit), used or not.
func (d *DB) Invites(ctx context.Context, limit int) ([]Invite, error) {
	rows, err := d.q().Query(ctx, `SELECT i.id, i.email, i.created_at, i.expires_at, i.used_at,
			u.email AS used_by_email, c.email AS created_by_email
		FROM invites i LEFT JOIN users u ON u.id = i.used_by LEFT JOIN users c ON c.id = i.created_by
		ORDER BY i.created_at DESC, i.id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Invite])
}

// RevokeInvite deletes an invite: its link no longer works.
func (d *DB) RevokeInvite(ctx context.Context, id int64) error {
	return execOne(ctx, d.q(), "DELETE FROM invites WHERE id = $1", id)
}

// CheckInvite says whether an invite link can be used (by email, when it
// is not ""): nil, or one of the ErrInvite… reasons. It only reads; the
// sign-up's transaction decides again and uses the invite up.
func (d *DB) CheckInvite(ctx context.Context, token, email string) (Invite, error) {
	inv, _, err := readInvite(ctx, d.q(), token, email, false)
	return inv, err
}

// readInvite reads an invite by token (locking its row when lock is set)
// and says why it cannot be used, if it cannot.
func readInvite(ctx context.Context, q querier, token, email string, lock bool) (Invite, int64, error) {
	sql := `SELECT i.id, i.email, i.created_at, i.expires_at, i.used_at, NULL::text AS used_by_email, NULL::text AS created_by_email
		FROM invites i WHERE i.token_hash = $1`
	if lock {
		sql += " FOR UPDATE"
	}
	inv, err := oneRow[Invite](ctx, q, sql, tokenHash(token))
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && token == ""):
		return Invite{}, 0, ErrInviteUnknown
	case err != nil:
		return Invite{}, 0, err
	case inv.UsedAt != nil:
		return inv, 0, ErrInviteUsed
	case !time.Now().Before(inv.ExpiresAt):
		return inv, 0, ErrInviteExpired
	case email != "" && inv.Email != "" && !strings.EqualFold(inv.Email, email):
		return inv, 0, ErrInviteEmail
	}
	return inv, inv.ID, nil
}

// signupAllowed decides, inside CreateAccount's transaction, whether a
// later account may be made under the sign-up mode: open (an invite given
// is used up when it is usable), invite-only (a usable invite is needed;
// its row stays locked until the commit, so two sign-ups with one invite
// cannot both pass) or closed. It returns the invite to use up (0: none).
func signupAllowed(ctx context.Context, tx pgx.Tx, mode, token, email string) (int64, error) {
	switch mode {
	case SignupOpen:
		if token == "" {
			return 0, nil
		}
		_, id, err := readInvite(ctx, tx, token, email, true)
		if err != nil && !isInviteRefusal(err) {
			return 0, err
		}
		return id, nil
	case SignupInvite:
		if token == "" {
			return 0, ErrInviteNeeded
		}
		_, id, err := readInvite(ctx, tx, token, email, true)
		return id, err
	default:
		return 0, ErrSignupClosed
	}
}

func isInviteRefusal(err error) bool {
	return errors.Is(err, ErrInviteUnknown) || errors.Is(err, ErrInviteUsed) ||
		errors.Is(err, ErrInviteExpired) || errors.Is(err, ErrInviteEmail) || errors.Is(err, ErrInviteNeeded)
}

// SignupMode is the instance's sign-up mode: SignupOpen, SignupInvite or
// SignupClosed.
func (d *DB) SignupMode(ctx context.Context) (string, error) {
	return getSetting(ctx, d.q(), "signup_mode", SignupOpen)
}

// CreatePasswordReset stores a one-time password-reset link's token
// (hashed) for the account target, replacing any older link of it. It is
// ErrNotFound when the account does not exist.
func (d *DB) CreatePasswordReset(ctx context.Context, actor, target int64, token string, expires time.Time) error {
	var id int64
	err := d.q().QueryRow(ctx, `INSERT INTO password_resets (user_id, token_hash, created_by, expires_at)
			SELECT id, $2, $3, $4 FROM users WHERE id = $1
		ON CONFLICT (user_id) DO UPDATE SET token_hash = EXCLUDED.token_hash, created_by = EXCLUDED.created_by,
			created_at = now(), expires_at = EXCLUDED.expires_at
		RETURNING user_id`, target, tokenHash(token), actor, expires).Scan(&id)
	return mapErr(err)
}

// PasswordResetUser returns the account a password-reset link is for,
// while the link is usable (ErrNotFound: unknown, used, replaced by a newer
// link, expired, or its account is disabled).
func (d *DB) PasswordResetUser(ctx context.Context, token string) (User, error) {
	return oneRow[User](ctx, d.q(), "SELECT "+prefixCols("u.", userCols)+` FROM password_resets r
		JOIN users u ON u.id = r.user_id WHERE r.token_hash = $1 AND r.expires_at > now() AND NOT u.disabled`, tokenHash(token))
}

// ResetPassword uses a password-reset link (not while its account is
// disabled: ErrNotFound): in one transaction the link is used up, the account's password becomes hash and every session of the
// account ends (their tokens are returned, to end their event streams).
func (d *DB) ResetPassword(ctx context.Context, token, hash string) (user int64, ended []string, err error) {
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `DELETE FROM password_resets r USING users u
			WHERE r.token_hash = $1 AND r.expires_at > now() AND u.id = r.user_id AND NOT u.disabled
			RETURNING r.user_id`, tokenHash(token)).Scan(&user)
		if err != nil {
			return mapErr(err)
		}
		if err := execOne(ctx, tx, "UPDATE users SET password_hash = $2, has_password = true WHERE id = $1", user, hash); err != nil {
			return err
		}
		ended, err = endSessions(ctx, tx, user, "")
		return err
	})
	return user, ended, err
}
