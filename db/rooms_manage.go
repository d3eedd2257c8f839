package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// CreateRoom makes a room in one of the user's active workspaces: the
// thread that backs it (is_room, titled with the room's name), the room and
// the owner's membership row, in one transaction. A workspace that is not
// the user's (or is archived) is ErrNotFound.
func (d *DB) CreateRoom(ctx context.Context, user, workspace int64, name string) (Room, error) {
	var out Room
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var thread int64
		err := tx.QueryRow(ctx, `INSERT INTO threads (workspace_id, owner_id, title, title_state, is_room)
			SELECT w.id, w.owner_id, $3, 'user', true FROM workspaces w
			WHERE w.id = $1 AND w.owner_id = $2 AND w.status = 'active'
			RETURNING id`, workspace, user, name).Scan(&thread)
		if err != nil {
			return mapErr(err)
		}
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO rooms (workspace_id, owner_id, thread_id, name)
			VALUES ($1, $2, $3, $4) RETURNING id`, workspace, user, thread, name).Scan(&id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO room_members (room_id, user_id, role) VALUES ($1, $2, 'owner')`, id, user); err != nil {
			return err
		}
		out, err = oneRow[Room](ctx, tx, "SELECT "+roomCols+roomFrom+" WHERE r.id = $2", user, id)
		return err
	})
	return out, mapErr(err)
}
