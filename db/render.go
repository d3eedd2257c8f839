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
	rows, err := d.q().Query(ctx, `SELECT m.id, m.body_html FROM messages m
		JOIN threads t ON t.id = m.thread_id
		WHERE m.id = ANY($1) AND t.owner_id = $2 AND m.body_html_version = $3 AND m.body_html IS NOT NULL`,
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
// html must come from the renderer: pages insert it as it is.
func (d *DB) StoreRenderedBody(ctx context.Context, user, id int64, updatedAt time.Time, version int, html string) error {
	_, err := d.q().Exec(ctx, `UPDATE messages m SET body_html = $4, body_html_version = $5
		FROM threads t
		WHERE m.id = $1 AND t.id = m.thread_id AND t.owner_id = $2 AND m.updated_at = $3 AND m.status <> 'streaming'`,
		id, user, updatedAt, html, version)
	return err
}
