package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"weft/db"
	"weft/internal/usererr"
)

// A room run executes with its agent's profile instead of the thread's
// settings: the run's model (the agent's, chosen when it was queued), the
// agent's prompt and parameters in place of a role, its knowledge bases
// for the rag route, its tool policy narrowing the workspace's for the
// agent route (package agent reads AgentHost.Room), the room's compression
// settings, and the line up to its answer with every speaker named. The
// owner's custom instructions and memories are never sent (they are the
// owner's, not the room's), and nothing is extracted into memories.

// roomContext is a room run's profile while its requests are assembled.
type roomContext struct {
	db.RoomProfile
	depth int // the run's mention depth
}

// canMention reports whether the answer may hand on to another agent.
func (c *roomContext) canMention() bool {
	return c.depth+1 <= c.Room.MentionDepth && len(c.Agents) > 1
}

// ErrAgentRemoved fails a room answer whose agent was removed from the
// room before it ran.
var ErrAgentRemoved = usererr.New("This agent was removed from the room before it could answer.")

// roomOf reads the profile of run r: nil for a thread's run.
func (rt *Runtime) roomOf(ctx context.Context, r db.Run) (*roomContext, error) {
	if r.RoomAgentID == nil {
		if r.AskedBy != nil {
			return nil, ErrAgentRemoved // the agent's row went, its runs stayed
		}
		return nil, nil
	}
	p, err := rt.store.RoomRunProfile(ctx, r.OwnerID, r.ThreadID, *r.RoomAgentID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, ErrAgentRemoved
	}
	if err != nil {
		return nil, fmt.Errorf("load the room's agent: %w", err)
	}
	return &roomContext{RoomProfile: p, depth: r.MentionDepth}, nil
}

// agentRole is an agent's prompt and parameters as the role of its
// requests: the options, window and answer reserve follow from it as from
// a thread's role. Parameters that do not decode are left out.
func agentRole(a db.RoomAgent) *db.Role {
	role := &db.Role{Name: a.Name, Prompt: a.Prompt}
	if len(a.Params) > 0 {
		raw, err := json.Marshal(a.Params)
		if err == nil {
			err = json.Unmarshal(raw, &role.Params)
		}
		if err != nil {
			slog.Warn("room agent parameters", "agent", a.ID, "err", err)
			role.Params = db.RoleParams{}
		}
	}
	return role
}

// roomPreamble tells the agent where it speaks and how the line reads.
func roomPreamble(c *roomContext) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s, an AI agent in the chat room %q, where several people and AI agents talk together. "+
		"Each message from someone else starts with their name and a colon (an agent's name is followed by \"(agent)\"); "+
		"your own earlier messages are shown as yours. Answer as %s, without writing your name first.",
		c.Agent.Name, c.Room.Name, c.Agent.Name)
	var others []string
	for _, a := range c.Agents {
		if a.ID != c.Agent.ID {
			others = append(others, "@"+a.Name)
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(&b, " The other agents here: %s.", strings.Join(others, ", "))
		if c.canMention() {
			b.WriteString(" To hand a task to one of them, mention it as @name in your answer: it answers after you. " +
				"Mention an agent only when you need it to act.")
		} else {
			b.WriteString(" Mentioning them now does not make them answer.")
		}
	}
	return b.String()
}

// speakerTurns is the line as the agent self reads it: its own answers
// stay the assistant's; every other message becomes a user message
// starting with its speaker's name ("Max: …", "critic (agent): …").
// Answers without text say nothing and are left out.
func speakerTurns(turns []db.Message, self int64) []db.Message {
	out := make([]db.Message, 0, len(turns))
	for _, m := range turns {
		if m.Role == db.RoleAssistant && m.Content == "" {
			continue
		}
		switch {
		case m.Role == db.RoleAssistant && m.RoomAgentID != nil && *m.RoomAgentID == self:
		case m.Role == db.RoleAssistant, m.Role == db.RoleUser:
			m.Content = speakerLabel(m) + ": " + m.Content
			m.Role = db.RoleUser
		}
		out = append(out, m)
	}
	return out
}

// speakerLabel names who wrote m in a room's transcript.
func speakerLabel(m db.Message) string {
	name, kind := SpeakerOf(m)
	switch {
	case kind == SpeakerAgent:
		return name + " (agent)"
	case name != "":
		return name
	case m.Role == db.RoleAssistant:
		return "An agent"
	}
	return "A member"
}

// roomLeaf is the last message a room run's request sends: the message
// its answer hangs under (the member's message, or the answer before it
// in the line). A thread's run sends up to its user message.
func (rt *Runtime) roomLeaf(ctx context.Context, r db.Run, room *roomContext) (int64, error) {
	if room == nil || r.AssistantMessageID == nil {
		return *r.UserMessageID, nil
	}
	m, err := rt.store.Message(ctx, r.OwnerID, *r.AssistantMessageID)
	if err != nil {
		return 0, fmt.Errorf("load answer: %w", err)
	}
	if m.ParentID == nil {
		return *r.UserMessageID, nil
	}
	return *m.ParentID, nil
}

// handOn queues the turns of the agents a complete room answer mentions
// (not its own agent), one mention further, while the room's mention depth
// allows; the thread's queue runs them after the turns already waiting.
// It is called before the answer's run settles, so that the room's queue
// never shows empty between the answer and the turns it hands on to.
func (rt *Runtime) handOn(ctx context.Context, r db.Run, room *roomContext, answer string) {
	if room == nil || !room.canMention() {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var ids []int64
	model := ""
	for _, a := range mentionedAgents(answer, room.Agents) {
		if a.ID == room.Agent.ID {
			continue
		}
		ids = append(ids, a.ID)
		if a.Model == "" && model == "" {
			model = rt.models.Default(wctx)
		}
	}
	if len(ids) == 0 {
		return
	}
	if _, err := rt.store.QueueRoomMentions(wctx, r, ids, model, ChooseRoute); err != nil {
		slog.Error("queue the agents an answer mentions", "run", r.ID, "err", err)
	}
}

// roomRun reports whether r answers in a room (its agent or its asker is
// known).
func roomRun(r db.Run) bool { return r.RoomAgentID != nil || r.AskedBy != nil }
