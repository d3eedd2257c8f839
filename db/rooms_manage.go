package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Managing rooms (issue 20): creating, listing, members, agents, settings,
// deleting. Reads go through the acting user's membership row (a room that
// is not theirs is ErrNotFound); every change but leaving is the owner's
// and is authorized in its query by rooms.owner_id, so a member's attempt
// is ErrNotFound too (the handlers refuse it with a message first). Every
// change sends the room thread's change note (NoteThreadChanged) in its
// transaction, so open room streams on every instance re-read the room
// and end for someone who is no longer a member.

// ErrRoomNoUser is an invitation to an email address that no active
// account of this instance has.
var ErrRoomNoUser = errors.New("db: no active account with that email")

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

// RoomSummary is a room in a member's lists (the sidebar, /rooms).
type RoomSummary struct {
	ID        int64     `db:"id"`
	Name      string    `db:"name"`
	MyRole    string    `db:"my_role"`
	OwnerName string    `db:"owner_name"` // display name, else email
	Members   int       `db:"members"`
	Agents    int       `db:"agents"`
	UpdatedAt time.Time `db:"updated_at"`
}

// MemberRooms lists the rooms the user is a member of (owned or invited
// to, in any workspace), by name, at most limit.
func (d *DB) MemberRooms(ctx context.Context, user int64, limit int) ([]RoomSummary, error) {
	rows, err := d.q().Query(ctx, `SELECT r.id, r.name, m.role AS my_role,
			COALESCE(NULLIF(o.display_name, ''), o.email) AS owner_name,
			(SELECT count(*) FROM room_members x WHERE x.room_id = r.id)::int AS members,
			(SELECT count(*) FROM room_agents a WHERE a.room_id = r.id)::int AS agents,
			r.updated_at
		FROM room_members m JOIN rooms r ON r.id = m.room_id JOIN users o ON o.id = r.owner_id
		WHERE m.user_id = $1 ORDER BY lower(r.name), r.id LIMIT $2`, user, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[RoomSummary])
}

// RoomPerson is one member of a room, as the room shows them.
type RoomPerson struct {
	UserID      int64     `db:"user_id"`
	Email       string    `db:"email"`
	DisplayName string    `db:"display_name"`
	Role        string    `db:"role"`
	CreatedAt   time.Time `db:"created_at"`
}

// Name is how the room shows the member: their display name, else email.
func (m RoomPerson) Name() string {
	if m.DisplayName != "" {
		return m.DisplayName
	}
	return m.Email
}

const roomMemberCols = `x.user_id, u.email, u.display_name, x.role, x.created_at`

// RoomMembers lists a room's members, the owner first, for one of them.
func (d *DB) RoomMembers(ctx context.Context, user, room int64) ([]RoomPerson, error) {
	rows, err := d.q().Query(ctx, `SELECT `+roomMemberCols+` FROM room_members x
		JOIN room_members m ON m.room_id = x.room_id AND m.user_id = $1
		JOIN users u ON u.id = x.user_id
		WHERE x.room_id = $2 ORDER BY x.role = 'owner' DESC, lower(u.display_name), lower(u.email), x.user_id`, user, room)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[RoomPerson])
}

// ownedRoomThread returns the thread of a room the user owns, locking the
// room's thread (FOR KEY SHARE: only the room's deletion waits for it),
// then the room's row (ErrNotFound: not a room of theirs). The thread
// comes first because the room's deletion takes it first and the room's
// row last, through the cascade (run_locks.go).
func ownedRoomThread(ctx context.Context, tx pgx.Tx, owner, room int64) (int64, error) {
	var thread int64
	err := tx.QueryRow(ctx, "SELECT thread_id FROM rooms WHERE id = $2 AND owner_id = $1", owner, room).Scan(&thread)
	if err != nil {
		return 0, mapErr(err)
	}
	if err := execOne(ctx, tx, "SELECT 1 FROM threads WHERE id = $1 FOR KEY SHARE", thread); err != nil {
		return 0, err
	}
	err = tx.QueryRow(ctx, "SELECT thread_id FROM rooms WHERE id = $2 AND owner_id = $1 FOR UPDATE", owner, room).Scan(&thread)
	return thread, mapErr(err)
}

// InviteRoomMember adds the active account with that email (any case) to a
// room the owner owns, as a member. ErrRoomNoUser: no such active
// account; ErrConflict: already a member (the owner included).
func (d *DB) InviteRoomMember(ctx context.Context, owner, room int64, email string) (RoomPerson, error) {
	var out RoomPerson
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		thread, err := ownedRoomThread(ctx, tx, owner, room)
		if err != nil {
			return err
		}
		var invitee int64
		err = tx.QueryRow(ctx, "SELECT id FROM users WHERE lower(email) = lower($1) AND NOT disabled", email).Scan(&invitee)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrRoomNoUser
		} else if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO room_members (room_id, user_id, role, invited_by) VALUES ($1, $2, 'member', $3)
			ON CONFLICT DO NOTHING`, room, invitee, owner)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrConflict
		}
		if err := NoteThreadChanged(ctx, tx, thread); err != nil {
			return err
		}
		out, err = oneRow[RoomPerson](ctx, tx, `SELECT `+roomMemberCols+` FROM room_members x JOIN users u ON u.id = x.user_id
			WHERE x.room_id = $1 AND x.user_id = $2`, room, invitee)
		return err
	})
	return out, mapErr(err)
}

// RemoveRoomMember takes a member (never the owner) out of a room the
// owner owns. Their access ends with the commit.
func (d *DB) RemoveRoomMember(ctx context.Context, owner, room, member int64) error {
	return d.InTx(ctx, func(tx pgx.Tx) error {
		thread, err := ownedRoomThread(ctx, tx, owner, room)
		if err != nil {
			return err
		}
		if err := execOne(ctx, tx, "DELETE FROM room_members WHERE room_id = $1 AND user_id = $2 AND role = 'member'", room, member); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, thread)
	})
}

// LeaveRoom takes the user out of a room they are a member of. The owner
// cannot leave (they delete the room): ErrNotFound.
func (d *DB) LeaveRoom(ctx context.Context, user, room int64) error {
	return d.InTx(ctx, func(tx pgx.Tx) error {
		var thread int64
		err := tx.QueryRow(ctx, `DELETE FROM room_members m USING rooms r
			WHERE r.id = m.room_id AND m.room_id = $2 AND m.user_id = $1 AND m.role = 'member'
			RETURNING r.thread_id`, user, room).Scan(&thread)
		if err != nil {
			return mapErr(err)
		}
		return NoteThreadChanged(ctx, tx, thread)
	})
}

// RoomRunsToStop lists the room's queued, running and waiting runs that
// member asked for (0: anyone's) and agent answers (0: any agent's), for
// the room's owner: what ends with a member's access, or with an agent.
func (d *DB) RoomRunsToStop(ctx context.Context, owner, room, member, agent int64) ([]int64, error) {
	if err := execOne(ctx, d.q(), "SELECT 1 FROM rooms WHERE id = $2 AND owner_id = $1", owner, room); err != nil {
		return nil, err
	}
	rows, err := d.q().Query(ctx, `SELECT u.id FROM runs u JOIN rooms r ON r.thread_id = u.thread_id
		WHERE r.id = $2 AND r.owner_id = $1 AND u.status IN ('queued', 'running', 'waiting')
		  AND ($3::bigint = 0 OR u.asked_by = $3) AND ($4::bigint = 0 OR u.room_agent_id = $4)
		ORDER BY u.id`, owner, room, member, agent)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// RoomSettings are what a room's owner sets on its settings form.
type RoomSettings struct {
	Name            string
	DefaultAgentID  *int64 // nil: unmentioned messages get no answer
	MentionDepth    int
	SummarizeAt     int
	HistoryMessages int
	KeepRecent      int
}

// UpdateRoomSettings saves a room's settings (and names its thread after
// it). The default agent must be one of the room's: ErrNotFound otherwise,
// as for a room the user does not own.
func (d *DB) UpdateRoomSettings(ctx context.Context, owner, room int64, s RoomSettings) error {
	return d.InTx(ctx, func(tx pgx.Tx) error {
		// The thread (renamed with the room) before the room's row, as
		// the room's deletion takes them (run_locks.go).
		var thread int64
		err := tx.QueryRow(ctx, `UPDATE threads t SET title = $3, updated_at = now() FROM rooms r
			WHERE r.id = $2 AND r.owner_id = $1 AND t.id = r.thread_id RETURNING t.id`, owner, room, s.Name).Scan(&thread)
		if err != nil {
			return mapErr(err)
		}
		if err := execOne(ctx, tx, `UPDATE rooms r SET name = $3, default_agent_id = $4, mention_depth = $5,
				summarize_at = $6, history_messages = $7, keep_recent = $8, updated_at = now()
			WHERE r.id = $2 AND r.owner_id = $1
			  AND ($4::bigint IS NULL OR EXISTS (SELECT 1 FROM room_agents a WHERE a.id = $4 AND a.room_id = r.id))`,
			owner, room, s.Name, s.DefaultAgentID, s.MentionDepth, s.SummarizeAt, s.HistoryMessages, s.KeepRecent); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, thread)
	})
}

// RoomAgentInput is what a room's owner writes into an agent.
type RoomAgentInput struct {
	Name   string
	Model  string
	Prompt string
	Params RoleParams // stored as roles.params are
	Tools  bool
	// ToolPolicy narrows the workspace's tool governance for this agent:
	// tool name (or skill:NAME) → auto, ask or deny.
	ToolPolicy map[string]string
	// KBs are knowledge bases of the room's workspace that the owner owns;
	// any other id is ErrNotFound.
	KBs []int64
}

// AddRoomAgent adds an agent to a room the owner owns. ErrConflict: the
// room has an agent of that name (in any case).
func (d *DB) AddRoomAgent(ctx context.Context, owner, room int64, in RoomAgentInput) (RoomAgent, error) {
	params, policy, err := agentJSON(in)
	if err != nil {
		return RoomAgent{}, err
	}
	var out RoomAgent
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		thread, err := ownedRoomThread(ctx, tx, owner, room)
		if err != nil {
			return err
		}
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO room_agents (room_id, name, model, prompt, params, tools, tool_policy)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, room, in.Name, in.Model, in.Prompt, params, in.Tools, policy).Scan(&id); err != nil {
			return mapErr(err)
		}
		if out, err = saveAgentKBs(ctx, tx, owner, room, id, in.KBs); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, thread)
	})
	return out, mapErr(err)
}

// UpdateRoomAgent replaces an agent's profile (its knowledge bases too).
func (d *DB) UpdateRoomAgent(ctx context.Context, owner, room, agent int64, in RoomAgentInput) (RoomAgent, error) {
	params, policy, err := agentJSON(in)
	if err != nil {
		return RoomAgent{}, err
	}
	var out RoomAgent
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		thread, err := ownedRoomThread(ctx, tx, owner, room)
		if err != nil {
			return err
		}
		if err := execOne(ctx, tx, `UPDATE room_agents SET name = $3, model = $4, prompt = $5, params = $6, tools = $7,
				tool_policy = $8, updated_at = now()
			WHERE id = $2 AND room_id = $1`, room, agent, in.Name, in.Model, in.Prompt, params, in.Tools, policy); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM room_agent_kbs WHERE agent_id = $1", agent); err != nil {
			return err
		}
		if out, err = saveAgentKBs(ctx, tx, owner, room, agent, in.KBs); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, thread)
	})
	return out, mapErr(err)
}

// DeleteRoomAgent removes an agent from a room the owner owns (a room whose
// default it was then has none). Its past answers keep their speaker name.
func (d *DB) DeleteRoomAgent(ctx context.Context, owner, room, agent int64) error {
	return d.InTx(ctx, func(tx pgx.Tx) error {
		thread, err := ownedRoomThread(ctx, tx, owner, room)
		if err != nil {
			return err
		}
		// Its runs before its answers (run_locks.go): left to the foreign
		// keys' cascade, the answers would be written first and the runs
		// last, waiting for an answer's settling (the run, then the
		// answer) while it waits for the answer.
		if _, err := tx.Exec(ctx, `UPDATE runs SET room_agent_id = NULL
			WHERE room_agent_id = (SELECT id FROM room_agents WHERE id = $2 AND room_id = $1)`, room, agent); err != nil {
			return err
		}
		if err := execOne(ctx, tx, "DELETE FROM room_agents WHERE id = $2 AND room_id = $1", room, agent); err != nil {
			return err
		}
		return NoteThreadChanged(ctx, tx, thread)
	})
}

func agentJSON(in RoomAgentInput) (params, policy []byte, err error) {
	if params, err = json.Marshal(in.Params); err != nil {
		return nil, nil, fmt.Errorf("agent params: %w", err)
	}
	p := in.ToolPolicy
	if p == nil {
		p = map[string]string{}
	}
	if policy, err = json.Marshal(p); err != nil {
		return nil, nil, fmt.Errorf("agent tool policy: %w", err)
	}
	return params, policy, nil
}

// saveAgentKBs attaches knowledge bases to an agent: each must be the
// owner's and of the room's workspace (else ErrNotFound). It returns the
// agent as stored.
func saveAgentKBs(ctx context.Context, tx pgx.Tx, owner, room, agent int64, kbs []int64) (RoomAgent, error) {
	if len(kbs) > 0 {
		tag, err := tx.Exec(ctx, `INSERT INTO room_agent_kbs (agent_id, kb_id)
			SELECT $3, k.id FROM knowledge_bases k JOIN rooms r ON r.workspace_id = k.workspace_id
			WHERE r.id = $2 AND k.owner_id = $1 AND k.id = ANY($4::bigint[])
			ON CONFLICT DO NOTHING`, owner, room, agent, kbs)
		if err != nil {
			return RoomAgent{}, err
		}
		if int(tag.RowsAffected()) != len(uniq(kbs)) {
			return RoomAgent{}, ErrNotFound
		}
	}
	return oneRow[RoomAgent](ctx, tx, `SELECT `+roomAgentCols+` FROM room_agents a WHERE a.id = $1`, agent)
}

// RoomOfThread returns the room a thread of the user's backs: the thread
// pages send its owner there. ErrNotFound: not a room's thread of theirs.
func (d *DB) RoomOfThread(ctx context.Context, user, thread int64) (int64, error) {
	var room int64
	err := d.q().QueryRow(ctx, `SELECT r.id FROM rooms r JOIN threads t ON t.id = r.thread_id
		WHERE t.id = $1 AND t.owner_id = $2`, thread, user).Scan(&room)
	return room, mapErr(err)
}

// What a thread route's id names, for InRoomThread.
const (
	ObjThread  = "thread"
	ObjMessage = "message"
	ObjRun     = "run"
	ObjStep    = "step"
)

// InRoomThread reports whether the object (ObjThread, ObjMessage, ObjRun or
// ObjStep) belongs to a room's thread that the user owns: the thread
// routes treat it as missing (a room's messages, runs and approvals are
// reached only through the room's own routes and rules).
func (d *DB) InRoomThread(ctx context.Context, user int64, kind string, id int64) (bool, error) {
	var thread string
	switch kind {
	case ObjThread:
		thread = "$1"
	case ObjMessage:
		thread = "(SELECT thread_id FROM messages WHERE id = $1)"
	case ObjRun:
		thread = "(SELECT thread_id FROM runs WHERE id = $1)"
	case ObjStep:
		thread = "(SELECT r.thread_id FROM run_steps s JOIN runs r ON r.id = s.run_id WHERE s.id = $1)"
	default:
		return false, fmt.Errorf("in room thread: unknown kind %q", kind)
	}
	var in bool
	err := d.q().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM threads WHERE id = `+thread+` AND owner_id = $2 AND is_room)`,
		id, user).Scan(&in)
	return in, err
}

// AgentParams reads the agent's generation parameters as a role's.
func (a RoomAgent) AgentParams() RoleParams {
	var p RoleParams
	if b, err := json.Marshal(a.Params); err == nil {
		_ = json.Unmarshal(b, &p) // stored by AddRoomAgent from a RoleParams
	}
	return p
}

// NoteRoomChanged sends a room thread's change note on its own, right after
// a commit that could not send it (a room deleted with its thread): the
// room's open streams re-read it and end.
func (d *DB) NoteRoomChanged(ctx context.Context, thread int64) error {
	return NoteThreadChanged(ctx, d.q(), thread)
}

// RoomMessageForMember returns a message of a room's line to one of the
// room's members (its citations open for every member, not only for the
// owner whose thread it is). ErrNotFound: not a message of a room of
// theirs.
func (d *DB) RoomMessageForMember(ctx context.Context, user, id int64) (Message, error) {
	return oneRow[Message](ctx, d.q(), "SELECT "+liveCols("m.")+` FROM messages m
		JOIN rooms r ON r.thread_id = m.thread_id
		JOIN room_members x ON x.room_id = r.id AND x.user_id = $2
		WHERE m.id = $1`, id, user)
}
