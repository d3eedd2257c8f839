package db

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// What an administrator's change of an account may be refused for.
var (
	// ErrLastAdmin: the change would leave no enabled administrator.
	ErrLastAdmin = errors.New("db: the last administrator")
	// ErrNotAdmin: the acting account is no longer an enabled
	// administrator (another administrator changed it meanwhile).
	ErrNotAdmin = errors.New("db: not an administrator")
	// ErrConfirm: the typed confirmation does not match.
	ErrConfirm = errors.New("db: confirmation does not match")
)

// Roles of an account.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// UserRow is an account as the administrator's list shows it.
type UserRow struct {
	ID          int64      `db:"id"`
	Email       string     `db:"email"`
	DisplayName string     `db:"display_name"`
	Role        string     `db:"role"`
	Disabled    bool       `db:"disabled"`
	CreatedAt   time.Time  `db:"created_at"`
	LastSeenAt  *time.Time `db:"last_seen_at"`
}

// UserFilter narrows the list: Query is a part of the email or the name,
// Role "admin" | "member", State "active" | "disabled" ("" = any).
type UserFilter struct {
	Query, Role, State string
	Offset, Limit      int
}

const userRowCols = "id, email, display_name, role, disabled, created_at, last_seen_at"

// ListUsers returns a page of accounts (by email) and how many match.
func (d *DB) ListUsers(ctx context.Context, f UserFilter) ([]UserRow, int, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	rows, err := d.q().Query(ctx, "SELECT "+userRowCols+`, count(*) OVER () AS total FROM users
		WHERE ($1 = '' OR strpos(lower(email), lower($1)) > 0 OR strpos(lower(display_name), lower($1)) > 0)
			AND ($2 = '' OR role = $2)
			AND ($3 = '' OR disabled = ($3 = 'disabled'))
		ORDER BY lower(email), id LIMIT $4 OFFSET $5`, strings.TrimSpace(f.Query), f.Role, f.State, f.Limit, f.Offset)
	if err != nil {
		return nil, 0, err
	}
	type counted struct {
		UserRow
		Total int `db:"total"`
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByName[counted])
	if err != nil {
		return nil, 0, err
	}
	out := make([]UserRow, len(all))
	total := 0
	for i, c := range all {
		out[i], total = c.UserRow, c.Total
	}
	if len(all) == 0 && f.Offset > 0 {
		err = d.q().QueryRow(ctx, `SELECT count(*) FROM users
			WHERE ($1 = '' OR strpos(lower(email), lower($1)) > 0 OR strpos(lower(display_name), lower($1)) > 0)
				AND ($2 = '' OR role = $2) AND ($3 = '' OR disabled = ($3 = 'disabled'))`,
			strings.TrimSpace(f.Query), f.Role, f.State).Scan(&total)
	}
	return out, total, err
}

// AdminUser returns one account for the administrator (ErrNotFound).
func (d *DB) AdminUser(ctx context.Context, id int64) (UserRow, error) {
	return oneRow[UserRow](ctx, d.q(), "SELECT "+userRowCols+" FROM users WHERE id = $1", id)
}

// UserHoldings is what deleting an account removes, counted for the
// confirmation.
type UserHoldings struct {
	Workspaces     int `db:"workspaces"`
	Threads        int `db:"threads"`
	Messages       int `db:"messages"`
	KnowledgeBases int `db:"knowledge_bases"`
	Documents      int `db:"documents"`
	Memories       int `db:"memories"`
}

// Holdings counts an account's data.
func (d *DB) Holdings(ctx context.Context, user int64) (UserHoldings, error) {
	return oneRow[UserHoldings](ctx, d.q(), `SELECT
		(SELECT count(*) FROM workspaces WHERE owner_id = $1) AS workspaces,
		(SELECT count(*) FROM threads WHERE owner_id = $1) AS threads,
		(SELECT count(*) FROM messages m JOIN threads t ON t.id = m.thread_id WHERE t.owner_id = $1) AS messages,
		(SELECT count(*) FROM knowledge_bases WHERE owner_id = $1) AS knowledge_bases,
		(SELECT count(*) FROM kb_documents WHERE owner_id = $1) AS documents,
		(SELECT count(*) FROM memories WHERE user_id = $1) AS memories`, user)
}

// EnabledAdmins counts the enabled administrators (a cheap early answer;
// the changes themselves decide under the administrators' lock).
func (d *DB) EnabledAdmins(ctx context.Context) (int, error) {
	var n int
	err := d.q().QueryRow(ctx, "SELECT count(*) FROM users WHERE role = 'admin' AND NOT disabled").Scan(&n)
	return n, err
}

// adminTx runs fn in a transaction that holds the administrators' lock,
// after checking that actor is still an enabled administrator. Every
// change that could lower the number of enabled administrators goes
// through it, so two of them cannot each see the other as the remaining
// one (two admins revoking each other at once: one of them wins).
func (d *DB) adminTx(ctx context.Context, actor int64, fn func(tx pgx.Tx) error) error {
	return d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('weft:admins', 0))"); err != nil {
			return err
		}
		var ok bool
		err := tx.QueryRow(ctx, "SELECT role = 'admin' AND NOT disabled FROM users WHERE id = $1", actor).Scan(&ok)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !ok) {
			return ErrNotAdmin
		}
		if err != nil {
			return err
		}
		return fn(tx)
	})
}

// lockedTarget reads (and locks) the account an administrator changes.
func lockedTarget(ctx context.Context, tx pgx.Tx, id int64) (User, error) {
	return oneRow[User](ctx, tx, "SELECT "+userCols+" FROM users WHERE id = $1 FOR UPDATE", id)
}

// keepsAnAdmin refuses with ErrLastAdmin when u is an enabled
// administrator and no other enabled administrator exists.
func keepsAnAdmin(ctx context.Context, tx pgx.Tx, u User) error {
	if u.Role != RoleAdmin || u.Disabled {
		return nil
	}
	var others bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM users WHERE role = 'admin' AND NOT disabled AND id <> $1)",
		u.ID).Scan(&others); err != nil {
		return err
	}
	if !others {
		return ErrLastAdmin
	}
	return nil
}

// SetUserDisabled disables or enables an account. Disabling ends every
// session of it, and drops its password-reset link, in the same transaction (the tokens are returned, to end
// their event streams) and is refused for the last enabled administrator;
// the caller stops the account's runs (chat.Runtime.StopUserRuns).
func (d *DB) SetUserDisabled(ctx context.Context, actor, target int64, disabled bool) (ended []string, err error) {
	err = d.adminTx(ctx, actor, func(tx pgx.Tx) error {
		u, err := lockedTarget(ctx, tx, target)
		if err != nil {
			return err
		}
		if disabled {
			if err := keepsAnAdmin(ctx, tx, u); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "UPDATE users SET disabled = $2 WHERE id = $1", target, disabled); err != nil {
			return err
		}
		if !disabled {
			return nil
		}
		// A reset link handed out before goes too: its holder could
		// otherwise choose the password the account has once enabled.
		if _, err := tx.Exec(ctx, "DELETE FROM password_resets WHERE user_id = $1", target); err != nil {
			return err
		}
		ended, err = endSessions(ctx, tx, target, "")
		return err
	})
	return ended, err
}

// SetUserRole makes an account an administrator or a member; taking the
// role from the last enabled administrator is refused (ErrLastAdmin).
func (d *DB) SetUserRole(ctx context.Context, actor, target int64, role string) error {
	if role != RoleAdmin && role != RoleMember {
		return errors.New("db: unknown role " + role)
	}
	return d.adminTx(ctx, actor, func(tx pgx.Tx) error {
		u, err := lockedTarget(ctx, tx, target)
		if err != nil {
			return err
		}
		if role == RoleMember {
			if err := keepsAnAdmin(ctx, tx, u); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, "UPDATE users SET role = $2 WHERE id = $1", target, role)
		return err
	})
}

// DeletedUser is what deleting an account leaves for the caller to clean:
// the sessions it ended (their streams), its workspaces (their folders on
// disk) and the content hashes of files it released (the blob collector's).
type DeletedUser struct {
	Sessions   []string
	Workspaces []Workspace
	Released   []string
}

// DeleteUser deletes an account with everything it owns, in one
// transaction: its sessions, then the account, whose rows cascade to its
// workspaces, threads, messages, runs, steps, attachments, media, knowledge
// bases (documents, chunks), memories, roles, hooks and the rest. confirm
// must be the account's email (ErrConfirm); the last enabled administrator
// cannot be deleted (ErrLastAdmin). Its runs should be stopped first
// (chat.Runtime.StopUserRuns).
func (d *DB) DeleteUser(ctx context.Context, actor, target int64, confirm string) (DeletedUser, error) {
	var out DeletedUser
	err := d.adminTx(ctx, actor, func(tx pgx.Tx) error {
		u, err := lockedTarget(ctx, tx, target)
		if err != nil {
			return err
		}
		if !strings.EqualFold(strings.TrimSpace(confirm), u.Email) {
			return ErrConfirm
		}
		if err := keepsAnAdmin(ctx, tx, u); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT "+workspaceCols+" FROM workspaces WHERE owner_id = $1", target)
		if err != nil {
			return err
		}
		if out.Workspaces, err = pgx.CollectRows(rows, pgx.RowToStructByName[Workspace]); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT x FROM attachments a, LATERAL (VALUES (a.sha256), (a.thumb_sha)) v(x)
				WHERE a.owner_id = $1 AND x <> ''
			UNION SELECT x FROM media md JOIN messages m ON m.id = md.message_id JOIN threads t ON t.id = m.thread_id,
				LATERAL (VALUES (md.sha256), (md.thumb_sha)) v(x)
			WHERE t.owner_id = $1 AND x <> ''`, target)
		if err != nil {
			return err
		}
		if out.Released, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if out.Sessions, err = endSessions(ctx, tx, target, ""); err != nil {
			return err
		}
		// As DeleteThread: clear the leaf pointers first so the cascade
		// does not update the rows it is deleting.
		if _, err := tx.Exec(ctx, "UPDATE threads SET active_leaf_id = NULL WHERE owner_id = $1", target); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM login_failures WHERE key = $1", "email:"+strings.ToLower(u.Email)); err != nil {
			return err
		}
		return execOne(ctx, tx, "DELETE FROM users WHERE id = $1", target)
	})
	return out, err
}

// CancelUserRuns stops every run of an account as Stop does (disabling or
// deleting it), and the answers it asked for in other people's rooms
// (runs.asked_by: run as the room's owner, but nobody else may decide
// their approvals, and the account's access ended): queued runs are cancelled with their empty answers, running
// and waiting ones get cancel_requested and a stop note, which the
// instance running each hears at once (or reads at its next flush). It
// returns the ids of the runs that were running or waiting, for the
// runtime to stop the ones it holds.
func (d *DB) CancelUserRuns(ctx context.Context, user int64) ([]int64, error) {
	var active []int64
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		active, err = cancelUserRuns(ctx, tx, user)
		return err
	})
	return active, err
}

// cancelUserRuns is CancelUserRuns inside tx.
func cancelUserRuns(ctx context.Context, tx pgx.Tx, user int64) ([]int64, error) {
	rows, err := tx.Query(ctx, `UPDATE runs SET
			status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,
			finished_at = CASE WHEN status = 'queued' THEN now() ELSE finished_at END,
			cancel_requested = status IN ('running', 'waiting') OR cancel_requested
		WHERE (owner_id = $1 OR asked_by = $1) AND status IN ('queued', 'running', 'waiting')
		RETURNING id, status, assistant_message_id`, user)
	if err != nil {
		return nil, err
	}
	type cancelled struct {
		ID     int64
		Status string
		Msg    *int64
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[cancelled])
	if err != nil {
		return nil, err
	}
	var active, ended, msgs []int64
	for _, c := range all {
		if c.Status != RunCancelled {
			active = append(active, c.ID)
			continue
		}
		ended = append(ended, c.ID)
		if c.Msg != nil {
			msgs = append(msgs, *c.Msg)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE messages SET status = 'cancelled', updated_at = now()
		WHERE id = ANY($1) AND status = 'streaming'`, msgs); err != nil {
		return nil, err
	}
	if err := notifyRuns(ctx, tx, NoteStop, active); err != nil {
		return nil, err
	}
	return active, notifyRuns(ctx, tx, NoteEnd, ended)
}
