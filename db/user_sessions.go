package db

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// UserSession is one signed-in session of an account, as /settings lists
// it (never its token).
type UserSession struct {
	ID        int64     `db:"id"`
	UserAgent string    `db:"user_agent"`
	CreatedAt time.Time `db:"created_at"`
	LastSeen  time.Time `db:"last_seen"`
	Current   bool      `db:"current"` // the session asking
}

// ErrPasswordChanged: the account's password changed (a reset, a change on
// /settings) between a sign-in's password check and its session.
var ErrPasswordChanged = errors.New("db: the password changed during the sign-in")

// RecordSession maps a session token to its account at sign-in (scs stores
// the session itself, gob-encoded, at the end of the request). previous is
// the token the sign-in replaced, whose mapping goes; rows of the account
// whose session is gone, and rows older than any session can live, are
// pruned on the way. checked is the password hash a password sign-in was
// checked against ("" for other sign-ins): when the account's hash is no
// longer it, nothing is recorded (ErrPasswordChanged). The account's row
// is locked first, as ResetPassword and SetPassword lock it before they
// end the sessions: either they see this session and end it, or this sees
// their new password.
func (d *DB) RecordSession(ctx context.Context, token, previous string, user int64, userAgent, checked string) error {
	return d.InTx(ctx, func(tx pgx.Tx) error {
		var hash string
		err := tx.QueryRow(ctx, "UPDATE users SET last_seen_at = now() WHERE id = $1 RETURNING password_hash", user).Scan(&hash)
		if err != nil {
			return mapErr(err)
		}
		if checked != "" && hash != checked {
			return ErrPasswordChanged
		}
		if _, err := tx.Exec(ctx, `DELETE FROM user_sessions us WHERE us.token = $1
			OR us.created_at < now() - interval '31 days'
			OR (us.user_id = $2 AND us.created_at < now() - interval '1 hour'
				AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.token = us.token AND s.expiry > now()))`,
			previous, user); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO user_sessions (token, user_id, user_agent) VALUES ($1, $2, $3)
			ON CONFLICT (token) DO UPDATE SET user_id = EXCLUDED.user_id, user_agent = EXCLUDED.user_agent,
				created_at = now(), last_seen = now()`, token, user, clip(userAgent, 300))
		return err
	})
}

// TouchSession records that a session of user was just used: its last
// seen time and its account's. Callers throttle it (one write every few
// minutes per session, not one per request). It never makes a mapping: a
// session without one is not valid (SessionUser).
func (d *DB) TouchSession(ctx context.Context, token string, user int64) error {
	_, err := d.q().Exec(ctx, `WITH s AS (UPDATE user_sessions SET last_seen = now() WHERE token = $1 AND user_id = $2)
		UPDATE users SET last_seen_at = now() WHERE id = $2`, token, user)
	return err
}

// SessionUser loads the account a session names, and whether the session
// is still one of the account's (its user_sessions row exists). A session
// ended while one of its requests was in flight may be saved again by that
// request (scs writes a changed session at the end of the request); without
// its row it stays ended.
func (d *DB) SessionUser(ctx context.Context, user int64, token string) (User, bool, error) {
	type row struct {
		User
		Mapped bool `db:"mapped"`
	}
	r, err := oneRow[row](ctx, d.q(), "SELECT "+userCols+`,
		EXISTS (SELECT 1 FROM user_sessions WHERE token = $2 AND user_id = $1) AS mapped FROM users WHERE id = $1`, user, token)
	return r.User, r.Mapped, err
}

// DeleteExpiredSessions deletes the sessions past their expiry (their
// mappings go at their user's next sign-in).
func (d *DB) DeleteExpiredSessions(ctx context.Context) error {
	_, err := d.q().Exec(ctx, "DELETE FROM sessions WHERE expiry < now()")
	return err
}

// ForgetSession removes a session's mapping (logout: scs deletes the
// session itself).
func (d *DB) ForgetSession(ctx context.Context, token string) error {
	_, err := d.q().Exec(ctx, "DELETE FROM user_sessions WHERE token = $1", token)
	return err
}

// UserSessions lists the account's live sessions, the most recently used
// first; current is the asking session's token.
func (d *DB) UserSessions(ctx context.Context, user int64, current string) ([]UserSession, error) {
	rows, err := d.q().Query(ctx, `SELECT us.id, us.user_agent, us.created_at, us.last_seen, us.token = $2 AS current
		FROM user_sessions us JOIN sessions s ON s.token = us.token AND s.expiry > now()
		WHERE us.user_id = $1 ORDER BY us.token = $2 DESC, us.last_seen DESC, us.id DESC`, user, current)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[UserSession])
}

// EndUserSessions ends every session of the account but keep (a token;
// "" ends them all) and returns the tokens it ended, so that their event
// streams on this instance end now (other instances end theirs at their
// next sweep of the sessions table, LiveSessions).
func (d *DB) EndUserSessions(ctx context.Context, user int64, keep string) ([]string, error) {
	return endSessions(ctx, d.q(), user, keep)
}

// EndUserSession ends one of the account's sessions by its id (ErrNotFound:
// not one of the account's) and returns its token.
func (d *DB) EndUserSession(ctx context.Context, user, id int64) (string, error) {
	var token string
	err := d.q().QueryRow(ctx, `WITH gone AS (DELETE FROM user_sessions WHERE id = $1 AND user_id = $2 RETURNING token),
			s AS (DELETE FROM sessions WHERE token IN (SELECT token FROM gone))
		SELECT token FROM gone`, id, user).Scan(&token)
	return token, mapErr(err)
}

func endSessions(ctx context.Context, q querier, user int64, keep string) ([]string, error) {
	rows, err := q.Query(ctx, `WITH gone AS (DELETE FROM user_sessions WHERE user_id = $1 AND token <> $2 RETURNING token),
			s AS (DELETE FROM sessions WHERE token IN (SELECT token FROM gone))
		SELECT token FROM gone`, user, keep)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// SetPassword changes the account's password (hash) and ends its other
// sessions (all but keep), in one transaction; a pending password-reset
// link of the account goes too. It returns the tokens it ended.
func (d *DB) SetPassword(ctx context.Context, user int64, hash, keep string) ([]string, error) {
	var ended []string
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if err := execOne(ctx, tx, "UPDATE users SET password_hash = $2, has_password = true WHERE id = $1", user, hash); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM password_resets WHERE user_id = $1", user); err != nil {
			return err
		}
		var err error
		ended, err = endSessions(ctx, tx, user, keep)
		return err
	})
	return ended, err
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
