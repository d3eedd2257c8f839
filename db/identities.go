package db

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrOtherIdentity is returned by LinkIdentity when the account is already
// linked to another subject of the same issuer: one provider account per
// Weft account, so a second provider account cannot take it over.
var ErrOtherIdentity = errors.New("db: the account is linked to another identity of this provider")

// Identity is a single sign-on identity: what an OpenID Connect provider
// (the issuer) calls one of its users (the subject), linked to an account.
type Identity struct {
	UserID  int64  `db:"user_id"`
	Issuer  string `db:"issuer"`
	Subject string `db:"subject"`
	Email   string `db:"email"`
}

// TouchIdentity finds the account linked to (issuer, subject) and records
// the sign-in and the email the provider gave this time. ErrNotFound when
// the identity is not linked yet.
func (d *DB) TouchIdentity(ctx context.Context, issuer, subject, email string) (User, error) {
	rows, err := d.q().Query(ctx, `WITH i AS (
			UPDATE user_identities SET last_login = now(), email = $3
			WHERE issuer = $1 AND subject = $2 RETURNING user_id)
		SELECT `+prefixCols("u.", userCols)+` FROM users u JOIN i ON i.user_id = u.id`, issuer, subject, email)
	if err != nil {
		return User{}, err
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User])
	return u, mapErr(err)
}

// LinkIdentity links (issuer, subject) to an existing account and, in the
// same transaction, ends every session of the account: whoever was signed
// in to it before the link (someone who made the account under another's
// address, say) is signed out. It returns the tokens it ended.
// ErrConflict when the identity is already linked (to any account),
// ErrOtherIdentity when the account already has another identity of this
// issuer; nothing is linked or ended then.
func (d *DB) LinkIdentity(ctx context.Context, user int64, id Identity) ([]string, error) {
	var ended []string
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO user_identities (user_id, issuer, subject, email) VALUES ($1, $2, $3, $4)`,
			user, id.Issuer, id.Subject, id.Email); err != nil {
			return identityErr(err)
		}
		var err error
		ended, err = endSessions(ctx, tx, user, "")
		return err
	})
	return ended, err
}

// Identities lists the identities linked to an account.
func (d *DB) Identities(ctx context.Context, user int64) ([]Identity, error) {
	rows, err := d.q().Query(ctx, `SELECT user_id, issuer, subject, email FROM user_identities
		WHERE user_id = $1 ORDER BY id`, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Identity])
}

// NewIdentityUser is an account made by a single sign-on.
type NewIdentityUser struct {
	Identity
	DisplayName string
	// PasswordHash is a hash of a secret nobody knows: the account signs in
	// through its provider until someone gives it a password.
	PasswordHash string
	// SetupToken is the first administrator's setup token, when the first
	// account is made this way (see consumeSetupToken).
	SetupToken string
	// Invite is an invite link's token, which invite-only sign-up needs
	// (and open sign-up uses up when it is usable), as for CreateAccount.
	Invite string
	// IgnoreSignupMode admits the account although sign-up is not open:
	// the administrator allowed its email domain explicitly.
	IgnoreSignupMode bool
}

// CreateUserWithIdentity makes an account, its default workspace and its
// identity in one transaction, under the same rules and lock as
// CreateAccount: the first account is the admin and needs a setup token
// when one was issued (ErrSetupToken); later ones are members, while
// sign-up is open, or invite-only with a usable invite (ErrInvite…), which
// this transaction uses up — unless IgnoreSignupMode (ErrSignupClosed
// otherwise). ErrConflict when the email or the identity is taken.
func (d *DB) CreateUserWithIdentity(ctx context.Context, n NewIdentityUser) (User, Workspace, error) {
	a := NewAccount{Email: n.Email, DisplayName: n.DisplayName, PasswordHash: n.PasswordHash, SetupToken: n.SetupToken, Invite: n.Invite}
	return d.newAccount(ctx, a, false, n.IgnoreSignupMode, func(tx pgx.Tx, u User) error {
		if _, err := tx.Exec(ctx, `INSERT INTO user_identities (user_id, issuer, subject, email) VALUES ($1, $2, $3, $4)`,
			u.ID, n.Issuer, n.Subject, n.Email); err != nil {
			return identityErr(err)
		}
		return nil
	})
}

func identityErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.ConstraintName == "user_identities_issuer_user_id_key" {
		return ErrOtherIdentity
	}
	return mapErr(err)
}

// prefixCols qualifies each column of a list such as userCols.
func prefixCols(prefix, cols string) string {
	parts := splitCols(cols)
	for i, c := range parts {
		parts[i] = prefix + c
	}
	return strings.Join(parts, ", ")
}
