package chat

import (
	"context"

	"weft/db"
)

// MessageItem is one message as a page or a stream shows it: the message
// with what surrounds it, all read from one snapshot. It is chat's read
// model; views renders it and handlers never assemble it themselves.
type MessageItem struct {
	Message db.Message
	Run     *db.Run // the active run writing this answer, if any
	Branch  db.Branch
	// Compaction is the summary hanging under this message (the marker
	// shown after it); CompactionOff says the thread does not use it.
	Compaction    *db.Message
	CompactionOff bool
	// Cleared is the context clear hanging under this message (/clear: the
	// marker shown after it, with its Undo).
	Cleared *db.Message
	// Steps are the steps of the agent run that wrote this answer, and
	// AgentRun that run (nil for other routes).
	Steps    []db.Step
	AgentRun *db.Run
	// Attachments are the files of a user message; Media the generated
	// audio and images of an answer.
	Attachments []db.Attachment
	Media       []db.Media
	// Speaker is who wrote a room's message (issue 20), as it was then, and
	// SpeakerKind whether a member (SpeakerMember) or an agent
	// (SpeakerAgent); both "" in a thread (SpeakerOf).
	Speaker     string
	SpeakerKind string
	// AwaitTitle asks the page to fetch the generated title once it
	// exists (set on the final event of a thread's first answer).
	AwaitTitle bool
}

// itemReader is what messageItems reads; a *db.DB inside ReadSnapshot.
type itemReader interface {
	ActiveRuns(ctx context.Context, user, thread int64) ([]db.Run, error)
	Branches(ctx context.Context, user, thread int64, msgs []db.Message) (map[int64]db.Branch, error)
	Compactions(ctx context.Context, user, thread int64, under []int64) ([]db.Message, error)
	ContextClears(ctx context.Context, user, thread int64, under []int64) ([]db.Message, error)
	StepsOfMessages(ctx context.Context, user int64, msgs []int64) (map[int64]db.RunSteps, error)
	Attachments(ctx context.Context, user int64, msgs []int64) (map[int64][]db.Attachment, error)
	MediaOf(ctx context.Context, user int64, msgs []int64) (map[int64][]db.Media, error)
}

// messageItems pairs each message of thread t with its branch position,
// the summary hanging under it, its files and, for an answer being
// written, its active run. Read through one snapshot, a streaming answer
// always comes with its run: there is no moment between reading the
// messages and the runs in which the run could end.
func messageItems(ctx context.Context, s itemReader, user int64, t db.Thread, msgs []db.Message) ([]MessageItem, error) {
	active, err := s.ActiveRuns(ctx, user, t.ID)
	if err != nil {
		return nil, err
	}
	branches, err := s.Branches(ctx, user, t.ID, msgs)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	nodes, err := s.Compactions(ctx, user, t.ID, ids)
	if err != nil {
		return nil, err
	}
	summaries := map[int64]*db.Message{}
	for i := range nodes { // newest first
		if p := nodes[i].ParentID; p != nil && summaries[*p] == nil {
			summaries[*p] = &nodes[i]
		}
	}
	clears, err := s.ContextClears(ctx, user, t.ID, ids)
	if err != nil {
		return nil, err
	}
	cleared := map[int64]*db.Message{}
	for i := range clears { // newest first
		if p := clears[i].ParentID; p != nil && cleared[*p] == nil {
			cleared[*p] = &clears[i]
		}
	}
	byMsg := map[int64]*db.Run{}
	for i := range active {
		if m := active[i].AssistantMessageID; m != nil {
			byMsg[*m] = &active[i]
		}
	}
	var agentIDs []int64
	for _, m := range msgs {
		if m.Role == db.RoleAssistant && m.Metadata.Route == db.RouteAgent {
			agentIDs = append(agentIDs, m.ID)
		}
	}
	steps, err := s.StepsOfMessages(ctx, user, agentIDs)
	if err != nil {
		return nil, err
	}
	files, err := s.Attachments(ctx, user, ids)
	if err != nil {
		return nil, err
	}
	generated, err := s.MediaOf(ctx, user, ids)
	if err != nil {
		return nil, err
	}
	out := make([]MessageItem, len(msgs))
	for i, m := range msgs {
		out[i] = MessageItem{Message: m, Run: byMsg[m.ID], Branch: branches[m.ID],
			Compaction: summaries[m.ID], CompactionOff: !t.Compaction, Cleared: cleared[m.ID],
			Attachments: files[m.ID], Media: generated[m.ID]}
		out[i].Speaker, out[i].SpeakerKind = SpeakerOf(m)
		if rs, ok := steps[m.ID]; ok {
			out[i].Steps, out[i].AgentRun = rs.Steps, &rs.Run
		}
	}
	return out, nil
}
