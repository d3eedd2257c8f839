package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Rooms (issue 20): a room is backed by one thread of its owner's workspace
// (threads.is_room), reached only through the room by its members. Every
// room query takes the acting user and reads the room through their
// membership row, so a room that is not theirs is ErrNotFound (a 404). The
// room's thread is then worked on as its owner (Room.OwnerID): the thread
// machinery authorizes by the thread's owner, and the room's own rules
// (who may stop a run, who answers an approval) are checked by the room's
// callers before they act for the owner.

// Room roles.
const (
	RoomOwner  = "owner"
	RoomMember = "member"
)

// Room is a room as one member sees it.
type Room struct {
	ID              int64     `db:"id"`
	WorkspaceID     int64     `db:"workspace_id"`
	OwnerID         int64     `db:"owner_id"`
	ThreadID        int64     `db:"thread_id"`
	Name            string    `db:"name"`
	DefaultAgentID  *int64    `db:"default_agent_id"`
	MentionDepth    int       `db:"mention_depth"`
	SummarizeAt     int       `db:"summarize_at"`     // percent of the context that triggers a summary
	HistoryMessages int       `db:"history_messages"` // at most this many messages of history (0: all that fit)
	KeepRecent      int       `db:"keep_recent"`      // recent messages always kept word for word
	CreatedAt       time.Time `db:"created_at"`
	UpdatedAt       time.Time `db:"updated_at"`
	// MyRole is the acting user's role in the room (RoomOwner or RoomMember).
	MyRole string `db:"my_role"`
}

// IsOwner reports whether the acting user owns the room.
func (r Room) IsOwner() bool { return r.MyRole == RoomOwner }

const roomCols = `r.id, r.workspace_id, r.owner_id, r.thread_id, r.name, r.default_agent_id, r.mention_depth,
	r.summarize_at, r.history_messages, r.keep_recent, r.created_at, r.updated_at, m.role AS my_role`

// roomFrom reads a room through the acting user's membership ($1).
const roomFrom = ` FROM rooms r JOIN room_members m ON m.room_id = r.id AND m.user_id = $1`

// RoomAgent is one agent profile of a room.
type RoomAgent struct {
	ID         int64             `db:"id"`
	RoomID     int64             `db:"room_id"`
	Name       string            `db:"name"`
	Model      string            `db:"model"`
	Prompt     string            `db:"prompt"`
	Params     map[string]any    `db:"params"`
	Tools      bool              `db:"tools"`
	ToolPolicy map[string]string `db:"tool_policy"`
	KBs        []int64           `db:"kbs"`
	CreatedAt  time.Time         `db:"created_at"`
	UpdatedAt  time.Time         `db:"updated_at"`
}

const roomAgentCols = `a.id, a.room_id, a.name, a.model, a.prompt, a.params, a.tools, a.tool_policy,
	COALESCE((SELECT array_agg(k.kb_id ORDER BY k.kb_id) FROM room_agent_kbs k WHERE k.agent_id = a.id), '{}') AS kbs,
	a.created_at, a.updated_at`

// RoomForMember returns the room if the user is one of its members.
func (d *DB) RoomForMember(ctx context.Context, user, room int64) (Room, error) {
	return oneRow[Room](ctx, d.q(), "SELECT "+roomCols+roomFrom+" WHERE r.id = $2", user, room)
}

// RoomAgents lists a room's agents by name, for one of its members.
func (d *DB) RoomAgents(ctx context.Context, user, room int64) ([]RoomAgent, error) {
	rows, err := d.q().Query(ctx, `SELECT `+roomAgentCols+` FROM room_agents a
		JOIN room_members m ON m.room_id = a.room_id AND m.user_id = $1
		WHERE a.room_id = $2 ORDER BY lower(a.name), a.id`, user, room)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[RoomAgent])
}
