package chat_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
)

// transcript is a request's messages as "role: content".
func transcript(msgs []api.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role + ": " + m.Content
	}
	return out
}

func TestEachAgentAnswersWithItsOwnModelPromptAndParametersAndReadsWhoSaidWhat(t *testing.T) {
	t.Parallel()
	var answered []int64
	var mu sync.Mutex
	e := newRoomEnv(t, chat.Config{Answered: func(_, _, msg int64) { mu.Lock(); answered = append(answered, msg); mu.Unlock() }})
	ctx := context.Background()
	mustExec(t, e.store, "UPDATE users SET instructions = 'OWNER-ONLY instructions' WHERE id = $1", e.user.ID)
	if _, err := e.store.AddMemory(ctx, e.user.ID, db.MemoryInput{Fact: "The owner's secret project is Zephyr", Source: db.MemoryManual}); err != nil {
		t.Fatal(err)
	}
	e.agent("Writer", "thinker", "You write drafts.", `{"temperature": 0.3, "num_ctx": 2048}`, false)
	e.agent("critic", "tiny", "You criticize drafts.", "", false)

	e.say(e.member, "@writer draft a haiku")
	e.settled()
	e.say(e.user, "@critic what do you think?")
	e.settled()

	reqs := chatRequests(e.fake)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	w, c := reqs[0].Chat, reqs[1].Chat
	if w.Model != "thinker" || w.Options["temperature"] != 0.3 || reqs[0].NumCtx != 2048 {
		t.Fatalf("the writer asked %s with %v", w.Model, w.Options)
	}
	if c.Model != "tiny" || c.Options["temperature"] != nil || reqs[1].NumCtx != 4096 {
		t.Fatalf("the critic asked %s with %v", c.Model, c.Options)
	}
	for i, want := range []string{"You write drafts.", "You criticize drafts."} {
		sys := reqs[i].Chat.Messages[0]
		name := []string{"Writer", "critic"}[i]
		if sys.Role != "system" || !strings.Contains(sys.Content, want) || !strings.Contains(sys.Content, "You are "+name+", an AI agent in the chat room \"Planning\"") {
			t.Fatalf("request %d's system message: %q", i, sys.Content)
		}
		if strings.Contains(sys.Content, "OWNER-ONLY") || strings.Contains(sys.Content, "Zephyr") {
			t.Fatalf("the owner's instructions or memories reached a room's agent: %q", sys.Content)
		}
	}
	got := transcript(c.Messages[1:])
	want := []string{"user: Max: @writer draft a haiku", "user: Writer (agent): You said: Max: @writer draft a haiku",
		"user: Olivia: @critic what do you think?"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the critic read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Its own answers are its own: the writer, asked again, reads its
	// draft as the assistant's.
	e.say(e.member, "@Writer once more")
	e.settled()
	reqs = chatRequests(e.fake)
	got = transcript(reqs[2].Chat.Messages[1:])
	if got[1] != "assistant: You said: Max: @writer draft a haiku" || got[2] != "user: Olivia: @critic what do you think?" {
		t.Fatalf("the writer read %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answered) != 0 {
		t.Fatalf("room answers were handed to the owner's after-answer work (memories, read-aloud): %v", answered)
	}
}

// byAgent answers as the agent a request's system message names.
func byAgent(replies map[string]string) func(req *api.ChatRequest) fakeollama.Reply {
	return func(req *api.ChatRequest) fakeollama.Reply {
		if req.Stream != nil && !*req.Stream {
			return fakeollama.DefaultReply(req)
		}
		for name, text := range replies {
			if len(req.Messages) > 0 && strings.Contains(req.Messages[0].Content, "You are "+name+",") {
				return fakeollama.Reply{Chunks: []string{text}}
			}
		}
		return fakeollama.DefaultReply(req)
	}
}

func TestAgentsMentioningEachOtherHandOnUpToTheRoomsDepthAndNeverToThemselves(t *testing.T) {
	t.Parallel()
	e := newRoomEnv(t, chat.Config{})
	ping := e.agent("ping", "tiny", "", "", false)
	pong := e.agent("pong", "tiny", "", "", false)
	e.fake.SetScript(byAgent(map[string]string{
		"ping": "@pong your turn (not mine, @ping)",
		"pong": "back to you @PING",
	}))
	ctx := context.Background()

	sent := e.say(e.member, "@ping start") // the room's default depth: 2
	got := line(e.settled())
	want := []string{"Max: @ping start", "@ping: @pong your turn (not mine, @ping)", "@pong: back to you @PING",
		"@ping: @pong your turn (not mine, @ping)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("line:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	v, err := e.rt.RoomView(ctx, e.member.ID, e.as(e.member), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range v.Messages[1:] {
		var r db.Run
		if err := e.store.Pool.QueryRow(ctx, "SELECT id FROM runs WHERE assistant_message_id = $1", it.Message.ID).Scan(&r.ID); err != nil {
			t.Fatal(err)
		}
		r, _ = e.store.Run(ctx, e.user.ID, r.ID)
		agent := []int64{ping.ID, pong.ID, ping.ID}[i]
		asked := sent.User.ID
		if i > 0 {
			asked = v.Messages[i].Message.ID // the answer that mentioned it
		}
		if r.MentionDepth != i || *r.RoomAgentID != agent || *r.AskedBy != e.member.ID || *r.UserMessageID != asked {
			t.Fatalf("turn %d: depth %d, agent %v, asked by %v, answering %v", i, r.MentionDepth, *r.RoomAgentID, *r.AskedBy, *r.UserMessageID)
		}
	}

	// A room whose agents do not hand on.
	mustExec(t, e.store, "UPDATE rooms SET mention_depth = 0 WHERE id = $1", e.room.ID)
	e.say(e.member, "@ping again")
	if got := line(e.settled()); len(got) != 6 || !strings.HasPrefix(got[5], "@ping: ") {
		t.Fatalf("with a depth of 0 the line goes on as %q", got[4:])
	}
	last := chatRequests(e.fake)
	if sys := last[len(last)-1].Chat.Messages[0].Content; !strings.Contains(sys, "Mentioning them now does not make them answer.") {
		t.Fatalf("an agent that cannot hand on is told it can: %q", sys)
	}
}

func TestARoomSummarizesByItsOwnSettingsKeepingItsRecentMessagesAndCapsItsHistory(t *testing.T) {
	t.Parallel()
	e := newRoomEnv(t, chat.Config{})
	e.agent("helper", "tiny", "", "", false)
	mustExec(t, e.store, "UPDATE rooms SET summarize_at = 10, keep_recent = 2 WHERE id = $1", e.room.ID)
	ctx := context.Background()
	long := func(who string, i int) string {
		return who + " point " + string(rune('A'+i)) + ": " + strings.Repeat("lorem ipsum dolor sit amet ", 20)
	}
	for i := range 4 {
		u := []db.User{e.member, e.user}[i%2]
		if got := e.say(u, long([]string{"Max", "Olivia"}[i%2], i)); len(got.Runs) != 0 {
			t.Fatal("a message without a mention was answered")
		}
	}
	e.say(e.member, "@helper sum up")
	items := e.settled()

	var summary *fakeollama.Recorded
	for _, r := range e.fake.Requests() {
		if r.Chat != nil && r.Chat.Stream != nil && !*r.Chat.Stream {
			summary = &r
		}
	}
	if summary == nil {
		t.Fatal("nothing was summarized at 10% of the window")
	}
	if conv := summary.Chat.Messages[1].Content; !strings.Contains(conv, "Max: Max point A") || !strings.Contains(conv, "Olivia: Olivia point B") ||
		!strings.Contains(conv, "Max: Max point C") || strings.Contains(conv, "point D") {
		t.Fatalf("the summary's transcript: %q", conv)
	}
	reqs := chatRequests(e.fake)
	got := transcript(reqs[0].Chat.Messages)
	if len(got) != 3 || !strings.Contains(got[0], "Summary of the earlier part of this conversation") ||
		!strings.HasPrefix(got[1], "user: Olivia: Olivia point D") || got[2] != "user: Max: @helper sum up" {
		t.Fatalf("the helper was sent %q", got)
	}
	if items[2].Compaction == nil || items[1].Compaction != nil || items[3].Compaction != nil {
		t.Fatal("the summary's marker is not shown under the last message it covers")
	}

	// At most two messages of history, and no summary below 100%.
	mustExec(t, e.store, "UPDATE rooms SET summarize_at = 100, history_messages = 2 WHERE id = $1", e.room.ID)
	e.say(e.member, "@helper again")
	e.settled()
	reqs = chatRequests(e.fake)
	got = transcript(reqs[1].Chat.Messages[1:])
	if len(got) != 2 || got[0] != "assistant: You said: Max: @helper sum up" || got[1] != "user: Max: @helper again" {
		t.Fatalf("with a history of 2 the helper was sent %q", got)
	}
	if nodes, err := e.store.Compactions(ctx, e.user.ID, e.room.ThreadID, []int64{items[2].Message.ID, items[5].Message.ID}); err != nil || len(nodes) != 1 {
		t.Fatalf("%d summaries (%v), want the first one only", len(nodes), err)
	}
}

func TestARoomAnswersFailureIsStoredAndShownAfterwards(t *testing.T) {
	t.Parallel()
	e := newRoomEnv(t, chat.Config{})
	e.agent("ghost", "nope", "", "", false)
	e.agent("slow", "tiny", "", "", false)
	gone := e.agent("gone", "tiny", "", "", false)
	ctx := context.Background()

	e.say(e.member, "@ghost hello")
	e.settled()
	sent := e.say(e.member, "@slow [[hang]] first, then @gone")
	mustExec(t, e.store, "DELETE FROM room_agents WHERE id = $1", gone.ID)
	if err := e.rt.RoomStop(ctx, e.member.ID, e.as(e.member), sent.Runs[0].ID); err != nil {
		t.Fatal(err)
	}
	items := e.settled()
	ghost, removed := items[1].Message, items[4].Message
	if ghost.Status != db.MsgError || !strings.Contains(ghost.Error, `Model "nope" is not available`) || items[1].Speaker != "ghost" {
		t.Fatalf("the ghost's answer: %s %q by %q", ghost.Status, ghost.Error, items[1].Speaker)
	}
	if removed.Status != db.MsgError || removed.Error != "This agent was removed from the room before it could answer." ||
		items[4].Speaker != "gone" || items[4].SpeakerKind != chat.SpeakerAgent {
		t.Fatalf("the removed agent's answer: %s %q by %q", removed.Status, removed.Error, items[4].Speaker)
	}
	if r, _ := e.store.Run(ctx, e.user.ID, sent.Runs[1].ID); r.Status != db.RunFailed {
		t.Fatalf("the removed agent's run is %s", r.Status)
	}
}

// kbRetriever returns one source and records the knowledge bases searched.
type kbRetriever struct {
	mu       sync.Mutex
	searched [][]int64
}

func (r *kbRetriever) Retrieve(_ context.Context, _ int64, kbs []db.KnowledgeBase, _, _ string, _, _ int) ([]db.Source, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []int64
	for _, kb := range kbs {
		ids = append(ids, kb.ID)
	}
	r.searched = append(r.searched, ids)
	return []db.Source{{N: 1, KBID: kbs[0].ID, KB: kbs[0].Name, Document: "a.md", Text: "a passage"}}, nil
}

func TestAnAgentWithKnowledgeBasesSearchesItsOwnAndOthersChat(t *testing.T) {
	t.Parallel()
	rec := &kbRetriever{}
	e := newRoomEnv(t, chat.Config{Retriever: rec})
	ctx := context.Background()
	manuals, err := e.store.CreateKB(ctx, e.user.ID, e.ws.ID, db.KBInput{Name: "Manuals", EmbedModel: "embedder", Dims: 8})
	if err != nil {
		t.Fatal(err)
	}
	librarian := e.agent("librarian", "tiny", "", "", false)
	mustExec(t, e.store, "INSERT INTO room_agent_kbs (agent_id, kb_id) VALUES ($1, $2)", librarian.ID, manuals.ID)
	e.agent("chatty", "tiny", "", "", false)

	sent := e.say(e.member, "@librarian what do the manuals say? @chatty too")
	if sent.Runs[0].Kind != db.RouteRAG || sent.Runs[1].Kind != db.RouteChat {
		t.Fatalf("routes %s and %s, want rag and chat", sent.Runs[0].Kind, sent.Runs[1].Kind)
	}
	items := e.settled()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.searched) != 1 || len(rec.searched[0]) != 1 || rec.searched[0][0] != manuals.ID {
		t.Fatalf("searched %v, want the librarian's knowledge base once", rec.searched)
	}
	if src := items[1].Message.Metadata.Sources; len(src) != 1 || src[0].KBID != manuals.ID {
		t.Fatalf("the librarian's answer cites %+v", src)
	}
}
