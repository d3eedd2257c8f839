package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"weft/internal/usererr"
)

// Share links (issue 18): a read-only link to the path of a thread from its
// root to the message that was its active leaf when the link was made.
// The owner's queries take the acting user like every other; the public
// side starts from the token alone (ShareByToken) and then reads only what
// lies on the shared path, as the link's owner.

// MaxSharesPerThread caps the links of one thread.
const MaxSharesPerThread = 50

// Refusals of a new share link, with the message the owner sees.
var (
	ErrNothingToShare = usererr.New("this thread has no messages to share yet")
	ErrSharesFull     = usererr.New(fmt.Sprintf("a thread keeps at most %d share links; revoke some first", MaxSharesPerThread))
)

// Share is one share link, without its token (only its hash is stored).
type Share struct {
	ID            int64      `db:"id"`
	ThreadID      int64      `db:"thread_id"`
	OwnerID       int64      `db:"owner_id"`
	LeafMessageID int64      `db:"leaf_message_id"`
	TokenHint     string     `db:"token_hint"`
	IncludeFiles  bool       `db:"include_files"`
	ExpiresAt     *time.Time `db:"expires_at"`
	CreatedAt     time.Time  `db:"created_at"`
	ThreadTitle   string     `db:"thread_title"`
}

// Expired reports whether the link no longer opens at now.
func (s Share) Expired(now time.Time) bool { return s.ExpiresAt != nil && !s.ExpiresAt.After(now) }

const shareCols = `s.id, s.thread_id, s.owner_id, s.leaf_message_id, s.token_hint, s.include_files, s.expires_at,
	s.created_at, t.title AS thread_title`

// shareFrom joins a link to its thread; the owner's queries filter on
// s.owner_id.
const shareFrom = ` FROM shares s JOIN threads t ON t.id = s.thread_id`

// NewShare is a link to create: the SHA-256 of its token, the token's
// first characters, what it includes and when it stops opening (nil:
// never).
type NewShare struct {
	TokenSHA256  []byte
	TokenHint    string
	IncludeFiles bool
	ExpiresAt    *time.Time
}

// CreateShare makes a link to one of the user's threads: the path from the
// root to the thread's active leaf, as it is now.
func (d *DB) CreateShare(ctx context.Context, user, thread int64, in NewShare) (Share, error) {
	var s Share
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var leaf *int64
		// The thread row is locked so that two creations cannot both pass the
		// cap. A room's thread is never shared (it is its members' only).
		if err := tx.QueryRow(ctx, "SELECT active_leaf_id FROM threads WHERE id = $1 AND owner_id = $2 AND NOT is_room FOR UPDATE",
			thread, user).Scan(&leaf); err != nil {
			return err
		}
		if leaf == nil {
			return ErrNothingToShare
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM shares WHERE thread_id = $1", thread).Scan(&n); err != nil {
			return err
		}
		if n >= MaxSharesPerThread {
			return ErrSharesFull
		}
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO shares (thread_id, owner_id, leaf_message_id, token_sha256, token_hint, include_files, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			thread, user, *leaf, in.TokenSHA256, in.TokenHint, in.IncludeFiles, in.ExpiresAt).Scan(&id); err != nil {
			return err
		}
		var err error
		s, err = oneRow[Share](ctx, tx, "SELECT "+shareCols+shareFrom+" WHERE s.id = $1", id)
		return err
	})
	return s, mapErr(err)
}

// ThreadShares lists the links of one of the user's threads, newest first.
func (d *DB) ThreadShares(ctx context.Context, user, thread int64) ([]Share, error) {
	return d.shares(ctx, "SELECT "+shareCols+shareFrom+" WHERE s.thread_id = $1 AND s.owner_id = $2 ORDER BY s.id DESC", thread, user)
}

// UserShares lists every link of the user, newest first.
func (d *DB) UserShares(ctx context.Context, user int64) ([]Share, error) {
	return d.shares(ctx, "SELECT "+shareCols+shareFrom+" WHERE s.owner_id = $1 ORDER BY s.id DESC", user)
}

func (d *DB) shares(ctx context.Context, sql string, args ...any) ([]Share, error) {
	rows, err := d.q().Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Share])
}

// RevokeShare deletes one of the user's links: from now on it opens
// nothing. It returns the link as it was.
func (d *DB) RevokeShare(ctx context.Context, user, id int64) (Share, error) {
	var s Share
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if s, err = oneRow[Share](ctx, tx, "SELECT "+shareCols+shareFrom+" WHERE s.id = $1 AND s.owner_id = $2 FOR UPDATE OF s", id, user); err != nil {
			return err
		}
		return execOne(ctx, tx, "DELETE FROM shares WHERE id = $1 AND owner_id = $2", id, user)
	})
	return s, mapErr(err)
}

// ShareByToken is the public lookup: the link whose token hashes to
// tokenSHA256, if it still opens at now (not revoked, not expired, its
// owner not disabled). Anything else is ErrNotFound.
func (d *DB) ShareByToken(ctx context.Context, tokenSHA256 []byte, now time.Time) (Share, error) {
	return oneRow[Share](ctx, d.q(), "SELECT "+shareCols+shareFrom+` JOIN users u ON u.id = s.owner_id
		WHERE s.token_sha256 = $1 AND (s.expires_at IS NULL OR s.expires_at > $2) AND NOT u.disabled`, tokenSHA256, now)
}

// sharedPathSQL walks up from a link's leaf ($1), a message of its thread
// ($3) owned by its owner ($2): the shared path.
const sharedPathSQL = `WITH RECURSIVE up AS (
		SELECT m.*, 0 AS depth FROM messages m JOIN threads t ON t.id = m.thread_id
		WHERE m.id = $1 AND t.owner_id = $2 AND m.thread_id = $3
		UNION ALL
		SELECT m.*, up.depth + 1 FROM messages m JOIN up ON m.id = up.parent_id
	)`

// SharedPath returns what a link shows of its path, oldest first: the
// user and assistant messages that are final (an answer still being
// written is left out), at most limit of them — the newest, or with
// before (a message of the path) the newest above it. more reports that
// older ones exist.
func (d *DB) SharedPath(ctx context.Context, s Share, before int64, limit int) (path []Message, more bool, err error) {
	rows, err := d.q().Query(ctx, sharedPathSQL+`, shown AS (
			SELECT * FROM up WHERE role IN ('user', 'assistant') AND status <> 'streaming'
			  AND depth > COALESCE((SELECT depth FROM up WHERE id = $4 AND $4 > 0), -1)
			  AND ($4 = 0 OR EXISTS (SELECT 1 FROM up WHERE id = $4))
		)
		SELECT `+liveCols("shown.")+` FROM shown ORDER BY depth LIMIT $5`,
		s.LeafMessageID, s.OwnerID, s.ThreadID, before, limit+1)
	if err != nil {
		return nil, false, err
	}
	path, err = pgx.CollectRows(rows, pgx.RowToStructByName[Message])
	if err != nil {
		return nil, false, err
	}
	if len(path) > limit {
		path, more = path[:limit], true
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path, more, nil
}

// SharedAttachment returns an attachment of a message on the link's path
// (ErrNotFound for any other, and for every one when the link does not
// include files).
func (d *DB) SharedAttachment(ctx context.Context, s Share, id int64) (Attachment, error) {
	if !s.IncludeFiles {
		return Attachment{}, ErrNotFound
	}
	return oneRow[Attachment](ctx, d.q(), sharedAttachmentSQL, s.LeafMessageID, s.OwnerID, s.ThreadID, id)
}

// SharedMedia returns ready generated media of a message on the link's
// path (ErrNotFound for any other, and for every one when the link does
// not include files).
func (d *DB) SharedMedia(ctx context.Context, s Share, id int64) (Media, error) {
	if !s.IncludeFiles {
		return Media{}, ErrNotFound
	}
	return oneRow[Media](ctx, d.q(), sharedMediaSQL, s.LeafMessageID, s.OwnerID, s.ThreadID, id)
}

// sharedFileSQL finds a file of a link's path: the row the query file
// selects (by $4) must belong to a final message met walking up from the
// link's leaf ($1, a message of its thread $3 owned by its owner $2). The
// walk carries no message text and stops at the file's message, so a file
// of the newest page — every thumbnail a page shows is a request — costs a
// few steps, not the whole path.
func sharedFileSQL(file string) string {
	return `WITH RECURSIVE file AS (` + file + `), up AS (
		SELECT m.id, m.parent_id, m.status FROM messages m JOIN threads t ON t.id = m.thread_id
		WHERE m.id = $1 AND t.owner_id = $2 AND m.thread_id = $3
		UNION ALL
		SELECT m.id, m.parent_id, m.status FROM messages m JOIN up ON m.id = up.parent_id
		WHERE up.id <> (SELECT message_id FROM file)
	)
	SELECT file.* FROM file JOIN up ON up.id = file.message_id WHERE up.status <> 'streaming'`
}

var (
	sharedAttachmentSQL = sharedFileSQL("SELECT " + attachmentCols + " FROM attachments WHERE id = $4 AND owner_id = $2")
	sharedMediaSQL      = sharedFileSQL("SELECT " + mediaCols + " FROM media WHERE id = $4 AND status = 'ready'")
)
