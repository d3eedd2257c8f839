package db

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
)

// A room's conversation (issue 20) is one line of its thread: every new
// message, a member's or an agent's answer, goes under the thread's active
// leaf, which the thread row's lock serializes. An answer is a streaming
// message with its queued run, as in a thread; the thread's runs run one
// at a time in order (ClaimNextRun), which is the room's visible queue.

// speakerName is how a member is named in a room: their display name, else
// their email (of the users row u).
const speakerName = `COALESCE(NULLIF(btrim(u.display_name), ''), u.email)`

// RoomPost is a member's message to a room and the agents that answer it.
type RoomPost struct {
	Room    int64
	Content string
	// Agents answer, in this order, each under the previous answer (none:
	// the message is only posted).
	Agents []int64
	// DefaultModel answers for an agent that names no model, when the
	// room's thread has none either.
	DefaultModel string
	// Route chooses each answer's route from its agent's profile: tools
	// on → agent mode, knowledge bases → searched (chat.ChooseRoute).
	Route Router
	// MaxPending, when > 0, refuses a post that asks agents while the
	// member already has that many answers queued, running or waiting in
	// the room (ErrRoomQueueFull): the room's runs are its owner's, and
	// its queue everyone's.
	MaxPending int
}

// ErrRoomQueueFull refuses a member's post that asks agents for answers
// while that member already has RoomPost.MaxPending of them waiting.
var ErrRoomQueueFull = errors.New("db: too many answers waiting for this member in the room")

// RoomPosted is what a post created.
type RoomPosted struct {
	Thread  Thread
	User    Message
	Answers []Message
	Runs    []Run
}

// PostToRoom stores a member's message under the room's active leaf, then
// for each agent a streaming answer with its queued run (asked by the
// member, depth 0), each under the one before, in one transaction that
// holds the thread's row (two posts never attach to one leaf) and the
// member's (a removal waits for it, or it finds no member: ErrNotFound). An
// agent that is not the room's (removed meanwhile) is ErrNotFound.
func (d *DB) PostToRoom(ctx context.Context, user int64, p RoomPost) (RoomPosted, error) {
	var out RoomPosted
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		// The thread first, then the member's row (run_locks.go): the
		// room's deletion takes the thread, then, by the cascade, the
		// members' rows.
		var thread int64
		err := tx.QueryRow(ctx, `SELECT r.thread_id FROM rooms r
			JOIN room_members m ON m.room_id = r.id AND m.user_id = $1 WHERE r.id = $2`, user, p.Room).Scan(&thread)
		if err != nil {
			return err
		}
		if out.Thread, err = oneRow[Thread](ctx, tx, "SELECT "+threadCols+" FROM threads WHERE id = $1 FOR UPDATE", thread); err != nil {
			return err
		}
		var speaker string
		err = tx.QueryRow(ctx, `SELECT `+speakerName+` FROM rooms r
			JOIN room_members m ON m.room_id = r.id AND m.user_id = $1
			JOIN users u ON u.id = m.user_id
			WHERE r.id = $2 AND r.thread_id = $3 FOR SHARE OF m`, user, p.Room, thread).Scan(&speaker)
		if err != nil {
			return err
		}
		t := out.Thread
		if p.MaxPending > 0 && len(p.Agents) > 0 {
			var pending int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM runs WHERE thread_id = $1 AND asked_by = $2
				AND status IN ('queued', 'running', 'waiting') AND parent_run_id IS NULL`, t.ID, user).Scan(&pending); err != nil {
				return err
			}
			if pending >= p.MaxPending {
				return ErrRoomQueueFull
			}
		}
		if out.User, err = insertNewMessage(ctx, tx, newMessage{Thread: t.ID, Parent: t.ActiveLeafID, Role: RoleUser,
			Content: noNUL(p.Content), Status: MsgComplete, Author: &user, Speaker: speaker}); err != nil {
			return err
		}
		// The message is the line's end until its answers follow it.
		if _, err := tx.Exec(ctx, `UPDATE threads SET active_leaf_id = $2, last_activity_at = now(), updated_at = now()
			WHERE id = $1`, t.ID, out.User.ID); err != nil {
			return err
		}
		parent := out.User.ID
		for _, agent := range p.Agents {
			m, r, err := insertRoomAnswer(ctx, tx, t, p.Room, agent, parent, out.User.ID, &user, 0, p.DefaultModel, p.Route)
			if err != nil {
				return err
			}
			out.Answers, out.Runs = append(out.Answers, m), append(out.Runs, r)
			parent = m.ID
		}
		return NoteThreadChanged(ctx, tx, t.ID)
	})
	return out, mapErr(err)
}

// insertRoomAnswer adds agent's answer under parent, answering userMsg,
// with its queued run; the model is the agent's, else the thread's, else
// defaultModel, and route chooses the route from the agent's tools and
// knowledge bases.
func insertRoomAnswer(ctx context.Context, tx pgx.Tx, t Thread, room, agent, parent, userMsg int64, askedBy *int64,
	depth int, defaultModel string, route Router) (Message, Run, error) {
	var name, model string
	var f RouteFacts
	err := tx.QueryRow(ctx, `SELECT a.name, a.model, a.tools, EXISTS (SELECT 1 FROM room_agent_kbs k WHERE k.agent_id = a.id),
			COALESCE((SELECT btrim(content) <> '' FROM messages WHERE id = $3), false)
		FROM room_agents a WHERE a.id = $1 AND a.room_id = $2`, agent, room, userMsg).
		Scan(&name, &model, &f.Agent, &f.HasKBs, &f.HasText)
	if err != nil {
		return Message{}, Run{}, err
	}
	if model == "" {
		model = t.Model
	}
	if model == "" {
		model = defaultModel
	}
	kind, note := route(f)
	return insertAnswerRow(ctx, tx, t, answerRow{Parent: parent, UserMsg: userMsg, Kind: kind, Note: note, Model: model,
		Room: &roomAnswer{Agent: agent, Speaker: name, AskedBy: askedBy, Depth: depth}})
}

// QueueRoomMentions queues the turns of the agents an answer mentions:
// r is the room run that wrote it (completed). Each agent answers under
// the room's active leaf, in the order given, asked by r's asker, at r's
// depth + 1 — only while that depth is within the room's mention depth
// (none beyond: no loops) and the asker is still a member (none for
// someone who left, was removed or whose account is gone). The agent that
// wrote it and agents that
// already have a queued turn in the room are skipped. Nothing is queued
// when r is not a room run of a room of its owner, or when its asker is no
// longer a member (removed or left as the answer ended, or the account
// is gone): their access ended, and so do the turns they started. The
// asker's membership row is held as PostToRoom holds it, so a removal
// either waits and then stops the turns queued here, or comes first.
func (d *DB) QueueRoomMentions(ctx context.Context, r Run, agents []int64, defaultModel string, route Router) (RoomPosted, error) {
	var out RoomPosted
	if r.AssistantMessageID == nil || r.AskedBy == nil || len(agents) == 0 {
		return out, nil
	}
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		var room int64
		var maxDepth int
		err := tx.QueryRow(ctx, `SELECT r.id, r.mention_depth FROM rooms r
			JOIN room_members m ON m.room_id = r.id AND m.user_id = $3
			WHERE r.thread_id = $1 AND r.owner_id = $2`,
			r.ThreadID, r.OwnerID, *r.AskedBy).Scan(&room, &maxDepth)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		depth := r.MentionDepth + 1
		if depth > maxDepth {
			return nil
		}
		if out.Thread, err = oneRow[Thread](ctx, tx, "SELECT "+threadCols+" FROM threads WHERE id = $1 FOR UPDATE", r.ThreadID); err != nil {
			return err
		}
		// The turns are the asker's (their approvals and questions go to
		// them): none for someone who left or was removed. The member's
		// row is held (after the thread's, run_locks.go), so a removal
		// waits and then stops these turns too.
		err = tx.QueryRow(ctx, "SELECT 1 FROM room_members WHERE room_id = $1 AND user_id = $2 FOR SHARE", room, *r.AskedBy).Scan(new(int))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT DISTINCT room_agent_id FROM runs
			WHERE thread_id = $1 AND status = 'queued' AND room_agent_id IS NOT NULL`, r.ThreadID)
		if err != nil {
			return err
		}
		queued, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		t := out.Thread
		for _, agent := range agents {
			if (r.RoomAgentID != nil && agent == *r.RoomAgentID) || slices.Contains(queued, agent) {
				continue
			}
			parent := *r.AssistantMessageID
			if t.ActiveLeafID != nil {
				parent = *t.ActiveLeafID
			}
			m, run, err := insertRoomAnswer(ctx, tx, t, room, agent, parent, *r.AssistantMessageID, r.AskedBy, depth, defaultModel, route)
			if errors.Is(err, pgx.ErrNoRows) {
				continue // removed meanwhile: nobody to ask
			}
			if err != nil {
				return err
			}
			t.ActiveLeafID = &m.ID
			queued = append(queued, agent)
			out.Answers, out.Runs = append(out.Answers, m), append(out.Runs, run)
		}
		if len(out.Runs) == 0 {
			return nil
		}
		return NoteThreadChanged(ctx, tx, t.ID)
	})
	return out, mapErr(err)
}

// RoomProfile is what a room run answers with: its room, its agent, the
// names of the room's agents and the agent's knowledge bases.
type RoomProfile struct {
	Room   Room
	Agent  RoomAgent
	Agents []RoomAgent
	// KBs are the agent's knowledge bases that the room's owner owns.
	KBs []KnowledgeBase
}

// RoomRunProfile reads the profile of a room run of owner's: the room of
// thread and its agent (ErrNotFound when the thread backs no room of
// owner's, or the agent is not the room's).
func (d *DB) RoomRunProfile(ctx context.Context, owner, thread, agent int64) (RoomProfile, error) {
	var p RoomProfile
	err := d.ReadSnapshot(ctx, func(s *DB) error {
		var err error
		if p.Room, err = oneRow[Room](ctx, s.q(), "SELECT "+roomCols+roomFrom+" WHERE r.thread_id = $2 AND r.owner_id = $1", owner, thread); err != nil {
			return err
		}
		if p.Agents, err = s.RoomAgents(ctx, owner, p.Room.ID); err != nil {
			return err
		}
		found := false
		for _, a := range p.Agents {
			if a.ID == agent {
				p.Agent, found = a, true
			}
		}
		if !found {
			return ErrNotFound
		}
		rows, err := s.q().Query(ctx, "SELECT "+prefixed("k.", kbCols)+` FROM room_agent_kbs ak
			JOIN knowledge_bases k ON k.id = ak.kb_id
			WHERE ak.agent_id = $1 AND k.owner_id = $2 ORDER BY k.name, k.id`, agent, owner)
		if err != nil {
			return err
		}
		p.KBs, err = pgx.CollectRows(rows, pgx.RowToStructByName[KnowledgeBase])
		return err
	})
	return p, mapErr(err)
}

// RoomTurn is one answer of a room's queue, or one run of the room.
type RoomTurn struct {
	Run     int64  `db:"run"`
	Message int64  `db:"message"` // the answer being (or to be) written
	Agent   string `db:"agent"`   // its name now (as it was, when removed)
	AgentID *int64 `db:"agent_id"`
	AskedBy *int64 `db:"asked_by"`
	Asker   string `db:"asker"` // "" when their account is gone
	Status  string `db:"status"`
	Depth   int    `db:"depth"`
}

const roomTurnSelect = `SELECT r.id AS run, COALESCE(r.assistant_message_id, 0) AS message,
		COALESCE(a.name, msg.speaker, '') AS agent, r.room_agent_id AS agent_id, r.asked_by,
		COALESCE(` + speakerName + `, '') AS asker, r.status, r.mention_depth AS depth
	FROM runs r
	LEFT JOIN room_agents a ON a.id = r.room_agent_id
	LEFT JOIN messages msg ON msg.id = r.assistant_message_id
	LEFT JOIN users u ON u.id = r.asked_by`

// RoomQueue lists the answers of a room's thread (of owner's) that are
// queued, running or waiting, in the order they run.
func (d *DB) RoomQueue(ctx context.Context, owner, thread int64) ([]RoomTurn, error) {
	rows, err := d.q().Query(ctx, roomTurnSelect+`
		WHERE r.thread_id = $1 AND r.owner_id = $2 AND r.status IN ('queued', 'running', 'waiting') AND r.parent_run_id IS NULL
		ORDER BY r.id`, thread, owner)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[RoomTurn])
}

// RoomRun reads one run of a room's thread (of owner's); a run of another
// thread is ErrNotFound.
func (d *DB) RoomRun(ctx context.Context, owner, thread, run int64) (RoomTurn, error) {
	return oneRow[RoomTurn](ctx, d.q(), roomTurnSelect+`
		WHERE r.id = $1 AND r.thread_id = $2 AND r.owner_id = $3 AND r.parent_run_id IS NULL`, run, thread, owner)
}

// RoomLineAfter returns the messages of the line of a room's thread (of
// owner's: its active path) newer than after, oldest first, at most limit
// (the oldest ones).
func (d *DB) RoomLineAfter(ctx context.Context, owner, thread, after int64, limit int) ([]Message, error) {
	return d.BranchFrom(ctx, owner, thread, after+1, limit)
}
