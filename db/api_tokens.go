package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/internal/usererr"
)

// API tokens (issue 19): personal tokens for the OpenAI-compatible API.
// The owner's queries take the acting user like every other; the API side
// starts from the token's hash alone (UseAPIToken) and then acts as the
// token's user.

// Token scopes.
const (
	ScopeRead = "read" // GET routes only (the model list)
	ScopeChat = "chat" // completions and embeddings (and what read allows)
	ScopeKB   = "kb"   // the knowledge-base extension of completions
)

// MaxAPITokens caps the tokens of one user.
const MaxAPITokens = 50

// ErrTooManyTokens refuses a token past MaxAPITokens.
var ErrTooManyTokens = usererr.New(fmt.Sprintf("you can keep at most %d API tokens; revoke some first", MaxAPITokens))

// ErrTokenRefused is UseAPIToken's answer for a token that is unknown,
// expired, or whose user is disabled: the same for all three, so the
// answer tells a guesser nothing.
var ErrTokenRefused = errors.New("db: token refused")

// APIToken is one token, without its secret (only its hash is stored).
type APIToken struct {
	ID         int64      `db:"id"`
	UserID     int64      `db:"user_id"`
	Name       string     `db:"name"`
	TokenHint  string     `db:"token_hint"`
	Scopes     []string   `db:"scopes"`
	ExpiresAt  *time.Time `db:"expires_at"`
	LastUsedAt *time.Time `db:"last_used_at"`
	CreatedAt  time.Time  `db:"created_at"`
}

// Has reports whether the token carries scope (chat includes read).
func (t APIToken) Has(scope string) bool {
	for _, s := range t.Scopes {
		if s == scope || (scope == ScopeRead && s == ScopeChat) {
			return true
		}
	}
	return false
}

// Expired reports whether the token no longer works at now.
func (t APIToken) Expired(now time.Time) bool { return t.ExpiresAt != nil && !t.ExpiresAt.After(now) }

const apiTokenCols = "id, user_id, name, token_hint, scopes, expires_at, last_used_at, created_at"

// NewAPIToken is a token to create.
type NewAPIToken struct {
	Name        string
	TokenSHA256 []byte
	TokenHint   string
	Scopes      []string
	ExpiresAt   *time.Time
}

// CreateAPIToken stores a token of the user (at most MaxAPITokens; the
// user row is locked so two creations cannot both pass the count).
func (d *DB) CreateAPIToken(ctx context.Context, user int64, in NewAPIToken) (APIToken, error) {
	var t APIToken
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM api_tokens WHERE user_id = u.id)
			FROM users u WHERE u.id = $1 FOR UPDATE`, user).Scan(&n); err != nil {
			return mapErr(err)
		}
		if n >= MaxAPITokens {
			return ErrTooManyTokens
		}
		var err error
		t, err = oneRow[APIToken](ctx, tx, `INSERT INTO api_tokens (user_id, name, token_sha256, token_hint, scopes, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+apiTokenCols,
			user, in.Name, in.TokenSHA256, in.TokenHint, in.Scopes, in.ExpiresAt)
		return err
	})
	return t, err
}

// APITokens lists the user's tokens, newest first.
func (d *DB) APITokens(ctx context.Context, user int64) ([]APIToken, error) {
	rows, err := d.q().Query(ctx, "SELECT "+apiTokenCols+" FROM api_tokens WHERE user_id = $1 ORDER BY id DESC", user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[APIToken])
}

// RevokeAPIToken deletes one of the user's tokens: the next request with
// it is refused, on every instance.
func (d *DB) RevokeAPIToken(ctx context.Context, user, id int64) error {
	return execOne(ctx, d.q(), "DELETE FROM api_tokens WHERE id = $1 AND user_id = $2", id, user)
}

// TokenUse is what a request with a valid token learns: the token, its
// user, and how many requests the token made in the current one-minute
// window (this one included) and when that window ends.
type TokenUse struct {
	Token       APIToken
	User        User
	WindowCount int
	WindowEnd   time.Time
}

// UseAPIToken finds the token with this hash and counts one request on it,
// in one statement: the token must exist, not be expired at now, and
// belong to a user who is not disabled (so disabling a user stops their
// tokens at once); otherwise ErrTokenRefused. The request counts in the
// token's one-minute window (a new window starts when the last is over),
// under the row's lock, so parallel requests on several instances count
// exactly; last_used_at moves at most once a minute.
func (d *DB) UseAPIToken(ctx context.Context, sha []byte, now time.Time) (TokenUse, error) {
	var u TokenUse
	rows, err := d.q().Query(ctx, `UPDATE api_tokens t SET
			window_start = CASE WHEN t.window_start > $2 - interval '1 minute' THEN t.window_start ELSE $2 END,
			window_count = CASE WHEN t.window_start > $2 - interval '1 minute' THEN t.window_count + 1 ELSE 1 END,
			last_used_at = CASE WHEN t.last_used_at IS NULL OR t.last_used_at <= $2 - interval '1 minute' THEN $2 ELSE t.last_used_at END
		FROM users u
		WHERE t.token_sha256 = $1 AND u.id = t.user_id AND NOT u.disabled AND (t.expires_at IS NULL OR t.expires_at > $2)
		RETURNING t.id, t.user_id, t.name, t.token_hint, t.scopes, t.expires_at, t.last_used_at, t.created_at,
			t.window_count, t.window_start + interval '1 minute' AS window_end,
			u.id AS u_id, u.email, u.display_name, u.role, u.disabled, u.created_at AS u_created_at`, sha, now)
	if err != nil {
		return u, err
	}
	type row struct {
		APIToken
		WindowCount int       `db:"window_count"`
		WindowEnd   time.Time `db:"window_end"`
		UID         int64     `db:"u_id"`
		Email       string    `db:"email"`
		DisplayName string    `db:"display_name"`
		Role        string    `db:"role"`
		Disabled    bool      `db:"disabled"`
		UCreated    time.Time `db:"u_created_at"`
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[row])
	if errors.Is(err, pgx.ErrNoRows) {
		return u, ErrTokenRefused
	}
	if err != nil {
		return u, err
	}
	u.Token, u.WindowCount, u.WindowEnd = r.APIToken, r.WindowCount, r.WindowEnd
	u.User = User{ID: r.UID, Email: r.Email, DisplayName: r.DisplayName, Role: r.Role, Disabled: r.Disabled, CreatedAt: r.UCreated}
	return u, nil
}

// ActiveRunCount is how many of the user's runs are running or waiting
// (what WEFT_MAX_RUNS_PER_USER caps), for the API's own answers, which
// respect the same cap.
func (d *DB) ActiveRunCount(ctx context.Context, user int64) (int, error) {
	var n int
	err := d.q().QueryRow(ctx, "SELECT count(*) FROM runs WHERE owner_id = $1 AND status IN ('running', 'waiting')", user).Scan(&n)
	return n, err
}

// UserContextSources are the parts of context assembly that belong to the
// user rather than to a thread (the instance's system prompt, the user's
// custom instructions), for API answers, which have no thread.
func (d *DB) UserContextSources(ctx context.Context, user int64) (ContextSources, error) {
	var cs ContextSources
	err := d.q().QueryRow(ctx, `SELECT u.instructions,
			COALESCE((SELECT value FROM settings WHERE key = $2), '')
		FROM users u WHERE u.id = $1`, user, SettingSystemPrompt).Scan(&cs.Instructions, &cs.SystemPrompt)
	return cs, mapErr(err)
}
