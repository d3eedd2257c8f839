package db

import (
	"context"
	"time"
)

// RenderedBodies returns the stored renderings (sanitized HTML) of those of
// the user's messages among ids that were made by renderer version.
func (d *DB) RenderedBodies(ctx context.Context, user int64, ids []int64, version int) (map[int64]string, error) {
	out := map[int64]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := d.q().Query(ctx, `SELECT r.message_id, r.html FROM message_renderings r
		JOIN messages m ON m.id = r.message_id
		JOIN threads t ON t.id = m.thread_id
		WHERE r.message_id = ANY($1) AND t.owner_id = $2 AND r.version = $3`,
		ids, user, version)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var html string
		if err := rows.Scan(&id, &html); err != nil {
			return nil, err
		}
		out[id] = html
	}
	return out, rows.Err()
}

// StoreRenderedBody keeps the rendering of one of the user's final
// messages, made by renderer version from the message as it was at
// updatedAt; a message changed since (or streaming again) keeps none.
// html must come from the renderer: pages insert it as it is. The message
// row is locked (FOR SHARE) until the rendering is stored, so a change to
// its text either committed before (and the updatedAt check fails) or
// waits, and then forgets this rendering (migration 035's trigger). The
// message row gets no new version (the lock only marks it), so its
// indexes are not written again: see migration 035.
func (d *DB) StoreRenderedBody(ctx context.Context, user, id int64, updatedAt time.Time, version int, html string) error {
	_, err := d.q().Exec(ctx, `INSERT INTO message_renderings (message_id, version, html)
		SELECT m.id, $4, $5 FROM messages m
			JOIN threads t ON t.id = m.thread_id
		WHERE m.id = $1 AND t.owner_id = $2 AND m.updated_at = $3 AND m.status <> 'streaming'
		FOR SHARE OF m
		ON CONFLICT (message_id) DO UPDATE SET version = EXCLUDED.version, html = EXCLUDED.html`,
		id, user, updatedAt, version, html)
	return err
}
