package agent

import "weft/db"

// Rooms (issue 20): an agent run answering in a room works under the
// workspace's governance narrowed by its agent's tool policy (tool name or
// skill:NAME → auto, ask or deny). Narrowing never widens: deny takes a
// tool away, ask makes an automatic tool ask first (the member who
// mentioned the agent decides), auto leaves the workspace's rule as it is.
// The memory tools are off in a room (memories are each user's own, and
// the room's thread is its owner's), and the thread's "allow for this
// thread" grants do not apply (a room has several askers).

// Reasons shown for tools a room's agent cannot use.
const (
	reasonRoomDenied = "Denied for this agent of the room."
	reasonRoomMemory = "Not in a room: memories belong to each user."
)

// narrowRoom applies a room agent's tool policy to avail (nil: a thread's
// run, nothing changes).
func narrowRoom(avail []Availability, room *db.RoomProfile) {
	if room == nil {
		return
	}
	policy := room.Agent.ToolPolicy
	for i := range avail {
		av := &avail[i]
		if !av.Available {
			continue
		}
		switch {
		case av.Tool.Name == ToolRemember || av.Tool.Name == ToolForget:
			av.Available, av.Asks, av.Reason = false, false, reasonRoomMemory
		case policy[av.Tool.Name] == ModeDeny:
			av.Available, av.Asks, av.Reason = false, false, reasonRoomDenied
		case policy[av.Tool.Name] == ModeAsk && av.Tool.Class != ClassAsk:
			av.Mode, av.Asks = ModeAsk, true
		}
	}
}

// narrowSkills switches off the skills a room agent's policy denies
// (skill:NAME → deny; nil policy: a thread's run).
func narrowSkills(all []Skill, policy map[string]string) []Skill {
	for i := range all {
		if policy[SkillRule(all[i].Name)] == ModeDeny {
			all[i].Enabled = false
		}
	}
	return all
}
