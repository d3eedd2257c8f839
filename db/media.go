package db

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Attachment kinds.
const (
	AttachImage    = "image"
	AttachDocument = "document"
	AttachAudio    = "audio"
)

// Media kinds and statuses.
const (
	MediaAudio   = "audio"
	MediaImage   = "image"
	MediaPending = "pending"
	MediaReady   = "ready"
	MediaFailed  = "failed"
)

// Attachment is a file a user sent with a message.
type Attachment struct {
	ID            int64     `db:"id"`
	OwnerID       int64     `db:"owner_id"`
	MessageID     *int64    `db:"message_id"`
	SHA256        string    `db:"sha256"`
	Name          string    `db:"name"`
	MIME          string    `db:"mime"`
	Size          int64     `db:"size"`
	Kind          string    `db:"kind"`
	Format        string    `db:"format"`
	Text          string    `db:"text"`
	TextTruncated bool      `db:"text_truncated"`
	ThumbSHA      string    `db:"thumb_sha"`
	Width         int       `db:"width"`
	Height        int       `db:"height"`
	MediaID       *int64    `db:"media_id"`
	CreatedAt     time.Time `db:"created_at"`
}

const attachmentCols = `id, owner_id, message_id, sha256, name, mime, size, kind, format, text, text_truncated,
	thumb_sha, width, height, media_id, created_at`

// NewAttachment is a stored, sniffed file to attach to a message.
type NewAttachment struct {
	SHA256, Name, MIME, Kind, Format string
	Size                             int64
	Text                             string
	TextTruncated                    bool
	ThumbSHA                         string
	Width, Height                    int
}

// Media is generated audio or an image bound to a message.
type Media struct {
	ID        int64     `db:"id"`
	MessageID int64     `db:"message_id"`
	Kind      string    `db:"kind"`
	SHA256    string    `db:"sha256"`
	MIME      string    `db:"mime"`
	Status    string    `db:"status"`
	Error     string    `db:"error"`
	ThumbSHA  string    `db:"thumb_sha"`
	Prompt    string    `db:"prompt"`
	Engine    string    `db:"engine"`
	Size      int64     `db:"size"`
	CreatedAt time.Time `db:"created_at"`
	UpdatedAt time.Time `db:"updated_at"`
}

const mediaCols = "id, message_id, kind, sha256, mime, status, error, thumb_sha, prompt, engine, size, created_at, updated_at"

// insertAttachments attaches files and generated media (by id, the user's
// own ready images) to a new user message.
func insertAttachments(ctx context.Context, tx pgx.Tx, user, msg int64, files []NewAttachment, media []int64) error {
	for _, a := range files {
		if _, err := tx.Exec(ctx, `INSERT INTO attachments (owner_id, message_id, sha256, name, mime, size, kind, format,
				text, text_truncated, thumb_sha, width, height) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			user, msg, a.SHA256, a.Name, a.MIME, a.Size, a.Kind, a.Format, a.Text, a.TextTruncated, a.ThumbSHA, a.Width, a.Height); err != nil {
			return err
		}
	}
	if len(media) == 0 {
		return nil
	}
	tag, err := tx.Exec(ctx, `INSERT INTO attachments (owner_id, message_id, sha256, name, mime, size, kind, thumb_sha, media_id)
		SELECT $1, $2, md.sha256, 'generated-' || md.id || CASE WHEN md.kind = 'audio' THEN '.audio' ELSE '.image' END,
			md.mime, md.size, md.kind, md.thumb_sha, md.id
		FROM media md JOIN messages m ON m.id = md.message_id JOIN threads t ON t.id = m.thread_id
		WHERE md.id = ANY($3) AND t.owner_id = $1 AND md.status = 'ready'`, user, msg, media)
	if err != nil {
		return err
	}
	if int(tag.RowsAffected()) != len(uniqueIDs(media)) {
		return ErrNotFound
	}
	return nil
}

func uniqueIDs(ids []int64) map[int64]bool {
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// copyAttachments gives an edited message the files of the one it replaces.
func copyAttachments(ctx context.Context, tx pgx.Tx, from, to int64) error {
	_, err := tx.Exec(ctx, `INSERT INTO attachments (owner_id, message_id, sha256, name, mime, size, kind, format, text,
			text_truncated, thumb_sha, width, height, media_id)
		SELECT owner_id, $2, sha256, name, mime, size, kind, format, text, text_truncated, thumb_sha, width, height, media_id
		FROM attachments WHERE message_id = $1 ORDER BY id`, from, to)
	return err
}

// Attachments returns the files of the given messages of the user, per
// message, in the order they were sent.
func (d *DB) Attachments(ctx context.Context, user int64, msgs []int64) (map[int64][]Attachment, error) {
	out := map[int64][]Attachment{}
	if len(msgs) == 0 {
		return out, nil
	}
	rows, err := d.q().Query(ctx, "SELECT "+attachmentCols+` FROM attachments
		WHERE message_id = ANY($1) AND owner_id = $2 ORDER BY id`, msgs, user)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[Attachment])
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		out[*a.MessageID] = append(out[*a.MessageID], a)
	}
	return out, nil
}

// AttachmentByID returns one of the user's attachments.
func (d *DB) AttachmentByID(ctx context.Context, user, id int64) (Attachment, error) {
	rows, err := d.q().Query(ctx, "SELECT "+attachmentCols+" FROM attachments WHERE id = $1 AND owner_id = $2", id, user)
	if err != nil {
		return Attachment{}, err
	}
	a, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Attachment])
	return a, mapErr(err)
}

// ErrMediaLimit is returned when the user already has as many media
// generations pending as allowed.
var ErrMediaLimit = errors.New("db: too many pending media")

// reserveMedia locks the user's row and refuses when the user already has
// maxPending media pending (0: no limit). Counted in the database, under
// the lock, so that the limit holds across instances and concurrent
// requests.
func reserveMedia(ctx context.Context, tx pgx.Tx, user int64, maxPending int) error {
	if maxPending <= 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE", user); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM media md JOIN messages m ON m.id = md.message_id
		JOIN threads t ON t.id = m.thread_id WHERE t.owner_id = $1 AND md.status = 'pending'`, user).Scan(&n); err != nil {
		return err
	}
	if n >= maxPending {
		return ErrMediaLimit
	}
	return nil
}

// AddMedia adds pending media to one of the user's assistant messages (an
// image request's answer, or an answer read aloud), unless the user already
// has maxPending media pending (ErrMediaLimit; 0: no limit).
func (d *DB) AddMedia(ctx context.Context, user, msg int64, kind, prompt, engine string, maxPending int) (Media, error) {
	var m Media
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if err := reserveMedia(ctx, tx, user, maxPending); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `INSERT INTO media (message_id, kind, prompt, engine)
			SELECT m.id, $3, $4, $5 FROM messages m JOIN threads t ON t.id = m.thread_id
			WHERE m.id = $1 AND t.owner_id = $2 AND m.role = 'assistant'
			RETURNING `+mediaCols, msg, user, kind, prompt, engine)
		if err != nil {
			return err
		}
		m, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Media])
		return err
	})
	return m, mapErr(err)
}

// MediaReadyInfo is what a finished generation stored.
type MediaReadyInfo struct {
	SHA256, MIME, ThumbSHA string
	Size                   int64
}

// FinishMedia records generated media as ready, or failed with a message
// for the user (the text answer is never touched).
func (d *DB) FinishMedia(ctx context.Context, id int64, ready *MediaReadyInfo, failure string) (Media, error) {
	var rows pgx.Rows
	var err error
	if ready != nil {
		rows, err = d.q().Query(ctx, `UPDATE media SET status = 'ready', sha256 = $2, mime = $3, thumb_sha = $4, size = $5,
			error = '', updated_at = now() WHERE id = $1 RETURNING `+mediaCols, id, ready.SHA256, ready.MIME, ready.ThumbSHA, ready.Size)
	} else {
		rows, err = d.q().Query(ctx, `UPDATE media SET status = 'failed', error = $2, updated_at = now()
			WHERE id = $1 RETURNING `+mediaCols, id, failure)
	}
	if err != nil {
		return Media{}, err
	}
	m, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Media])
	return m, mapErr(err)
}

// MediaJob is pending media with what generating it needs.
type MediaJob struct {
	Media   Media
	OwnerID int64
	Text    string // the message's text (read aloud)
}

// MediaForJob loads pending or failed media for its job (no user: jobs act
// for the owner recorded on the thread).
func (d *DB) MediaForJob(ctx context.Context, id int64) (MediaJob, error) {
	var j MediaJob
	rows, err := d.q().Query(ctx, "SELECT "+prefixed("md.", mediaCols)+` FROM media md WHERE md.id = $1`, id)
	if err != nil {
		return j, err
	}
	if j.Media, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Media]); err != nil {
		return j, mapErr(err)
	}
	err = d.q().QueryRow(ctx, `SELECT t.owner_id, m.content FROM messages m JOIN threads t ON t.id = m.thread_id
		WHERE m.id = $1`, j.Media.MessageID).Scan(&j.OwnerID, &j.Text)
	return j, mapErr(err)
}

// MediaOf returns the media of the given messages of the user, per message.
func (d *DB) MediaOf(ctx context.Context, user int64, msgs []int64) (map[int64][]Media, error) {
	out := map[int64][]Media{}
	if len(msgs) == 0 {
		return out, nil
	}
	rows, err := d.q().Query(ctx, "SELECT "+prefixed("md.", mediaCols)+` FROM media md
		JOIN messages m ON m.id = md.message_id JOIN threads t ON t.id = m.thread_id
		WHERE md.message_id = ANY($1) AND t.owner_id = $2 ORDER BY md.id`, msgs, user)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[Media])
	if err != nil {
		return nil, err
	}
	for _, m := range list {
		out[m.MessageID] = append(out[m.MessageID], m)
	}
	return out, nil
}

// MediaByID returns one of the user's media.
func (d *DB) MediaByID(ctx context.Context, user, id int64) (Media, error) {
	rows, err := d.q().Query(ctx, "SELECT "+prefixed("md.", mediaCols)+` FROM media md
		JOIN messages m ON m.id = md.message_id JOIN threads t ON t.id = m.thread_id
		WHERE md.id = $1 AND t.owner_id = $2`, id, user)
	if err != nil {
		return Media{}, err
	}
	m, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Media])
	return m, mapErr(err)
}

// ReferencedBlobs lists every content hash an attachment or a media item
// still uses (files, thumbnails).
func (d *DB) ReferencedBlobs(ctx context.Context) (map[string]bool, error) {
	rows, err := d.q().Query(ctx, `SELECT sha256 FROM attachments UNION SELECT thumb_sha FROM attachments WHERE thumb_sha <> ''
		UNION SELECT sha256 FROM media WHERE sha256 <> '' UNION SELECT thumb_sha FROM media WHERE thumb_sha <> ''`)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(list))
	for _, s := range list {
		out[s] = true
	}
	return out, nil
}

// StillReferenced returns which of the given content hashes an attachment
// or a media item still uses (each found through its index).
func (d *DB) StillReferenced(ctx context.Context, shas []string) (map[string]bool, error) {
	rows, err := d.q().Query(ctx, `SELECT s FROM unnest($1::text[]) s WHERE
		EXISTS (SELECT 1 FROM attachments WHERE sha256 = s) OR EXISTS (SELECT 1 FROM attachments WHERE thumb_sha = s AND thumb_sha <> '')
		OR EXISTS (SELECT 1 FROM media WHERE sha256 = s AND sha256 <> '') OR EXISTS (SELECT 1 FROM media WHERE thumb_sha = s AND thumb_sha <> '')`, shas)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(list))
	for _, s := range list {
		out[s] = true
	}
	return out, nil
}

// ExpireUnsentAttachments deletes attachments never bound to a message
// that are older than the given age, and returns how many.
func (d *DB) ExpireUnsentAttachments(ctx context.Context, olderThan time.Duration) (int64, error) {
	tag, err := d.q().Exec(ctx, `DELETE FROM attachments WHERE message_id IS NULL
		AND created_at < now() - make_interval(secs => $1)`, olderThan.Seconds())
	return tag.RowsAffected(), err
}

// ErrNoMessage is returned when an image request is made outside a thread.
var ErrNoMessage = errors.New("db: no such message")

// AddImageRequest stores an image request in one of the user's threads: a
// user message with the prompt and a complete assistant message that will
// hold the image (pending media), under the active leaf, in one
// transaction. No model run answers it.
func (d *DB) AddImageRequest(ctx context.Context, user, thread int64, prompt, answer, engine string, maxPending int) (Sent, Media, error) {
	var out Sent
	var md Media
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if err := reserveMedia(ctx, tx, user, maxPending); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT "+threadCols+" FROM threads WHERE id = $1 AND owner_id = $2 FOR UPDATE", thread, user)
		if err != nil {
			return err
		}
		if out.Thread, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Thread]); err != nil {
			return err
		}
		t := out.Thread
		if out.User, err = insertMessage(ctx, tx, t.ID, t.ActiveLeafID, RoleUser, prompt, MsgComplete,
			MessageMeta{Kind: KindImageRequest}); err != nil {
			return err
		}
		if out.Assistant, err = insertMessage(ctx, tx, t.ID, &out.User.ID, RoleAssistant, answer, MsgComplete,
			MessageMeta{Route: "image", Kind: KindImageAnswer}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `INSERT INTO media (message_id, kind, prompt, engine) VALUES ($1, 'image', $2, $3)
			RETURNING `+mediaCols, out.Assistant.ID, prompt, engine)
		if err != nil {
			return err
		}
		if md, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Media]); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE threads SET active_leaf_id = $2, last_activity_at = now(), updated_at = now()
			WHERE id = $1`, t.ID, out.Assistant.ID); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, t.ID)
	})
	return out, md, mapErr(err)
}

// SetThreadMedia switches a thread's automatic read-aloud and image options.
func (d *DB) SetThreadMedia(ctx context.Context, user, thread int64, tts, image bool) error {
	return execOne(ctx, d.q(), `UPDATE threads SET tts_enabled = $3, image_enabled = $4, updated_at = now()
		WHERE id = $1 AND owner_id = $2`, thread, user, tts, image)
}

// FailStaleMedia marks media still pending after the given age as failed
// with msg (its job was lost: a crash, a failed enqueue, a worker that
// panicked), and returns how many. A job that does run later still
// records its outcome.
func (d *DB) FailStaleMedia(ctx context.Context, olderThan time.Duration, msg string) (int64, error) {
	tag, err := d.q().Exec(ctx, `UPDATE media SET status = 'failed', error = $2, updated_at = now()
		WHERE status = 'pending' AND created_at < now() - make_interval(secs => $1)`, olderThan.Seconds(), msg)
	return tag.RowsAffected(), err
}
