package chat_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"weft/agent"
	"weft/chat"
	"weft/db"
	"weft/internal/testwait"
	"weft/internal/usererr"
)

// newAgentRoomEnv is a roomEnv whose runtime runs agent answers; dir is
// the workspaces' folder.
func newAgentRoomEnv(t *testing.T) (e *roomEnv, dir string) {
	t.Helper()
	e = newRoomEnv(t, chat.Config{Instance: "unused"})
	dir = t.TempDir()
	ag := agent.New(e.store, nil, nil, agent.Config{DataDir: dir, PollEvery: 20 * time.Millisecond})
	e.rt = e.runtime(chat.Config{Agent: ag})
	return e, dir
}

// pendingStep waits for the answer msg's run to wait on a step of kind.
func (e *roomEnv) pendingStep(msg int64, kind string) db.Step {
	e.t.Helper()
	var step db.Step
	testwait.For(e.t, "a pending "+kind, 20*time.Second, func() bool {
		rs, err := e.store.StepsOfMessages(context.Background(), e.user.ID, []int64{msg})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, s := range rs[msg].Steps {
			if s.Kind == kind && s.Status == db.StepPending {
				step = s
				return true
			}
		}
		return false
	})
	return step
}

func TestARoomAgentsApprovalIsDecidedOnlyOnceOrDeniedAndOnlyByTheMemberWhoAsked(t *testing.T) {
	t.Parallel()
	e, dir := newAgentRoomEnv(t)
	e.agent("builder", "toolie", "", "", true)
	other, _ := e.newUser("other@example.com")
	e.join(other)
	ctx := context.Background()

	sent := e.say(e.member, `@builder [[tool:write_file {"path": "a.txt", "content": "hello"}]]`)
	if sent.Runs[0].Kind != db.RouteAgent {
		t.Fatalf("an agent with tools answered on the %s route", sent.Runs[0].Kind)
	}
	step := e.pendingStep(sent.Answers[0].ID, db.StepApproval)
	run := sent.Runs[0].ID
	for _, u := range []db.User{other, e.user} {
		err := e.rt.RoomDecide(ctx, u.ID, e.as(u), run, step.ID, db.DecideOnce)
		if msg, _ := usererr.Message(err); !errors.Is(err, chat.ErrNotAsker) || msg != "Only Max can decide this approval." {
			t.Fatalf("%s decides: %v (%q)", u.Email, err, msg)
		}
	}
	for _, d := range []string{db.DecideThread, db.DecideAlways} {
		if err := e.rt.RoomDecide(ctx, e.member.ID, e.as(e.member), run, step.ID, d); !errors.Is(err, chat.ErrRoomDecision) {
			t.Fatalf("deciding %q in a room: %v", d, err)
		}
	}
	if err := e.rt.RoomDecide(ctx, e.member.ID, e.as(e.member), run+1, step.ID, db.DecideOnce); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a step named with another run: %v", err)
	}
	if err := e.rt.RoomDecide(ctx, e.member.ID, e.as(e.member), run, step.ID, db.DecideOnce); err != nil {
		t.Fatalf("the asker decides: %v", err)
	}
	items := e.settled()
	if items[1].Message.Status != db.MsgComplete || items[1].Speaker != "builder" || len(items[1].Steps) == 0 {
		t.Fatalf("the builder's answer: %s, %q, %d steps", items[1].Message.Status, items[1].Speaker, len(items[1].Steps))
	}
	b, err := os.ReadFile(filepath.Join(dir, "workspaces", strconv.FormatInt(e.ws.ID, 10), "a.txt"))
	if err != nil || string(b) != "hello" {
		t.Fatalf("the approved write: %q, %v", b, err)
	}
	grants, err := e.store.ThreadGrants(ctx, e.user.ID, e.room.ThreadID)
	if err != nil || len(grants) != 0 {
		t.Fatalf("the room's thread has grants %v (%v)", grants, err)
	}
}

func TestARoomAgentsToolPolicyNarrowsTheWorkspacesAndItsQuestionGoesToTheAsker(t *testing.T) {
	t.Parallel()
	e, _ := newAgentRoomEnv(t)
	ctx := context.Background()
	careful := e.agent("careful", "toolie", "", "", true)
	mustExec(t, e.store, `UPDATE room_agents SET tool_policy = '{"list_files": "ask", "write_file": "deny", "read_file": "auto"}' WHERE id = $1`, careful.ID)

	// list_files runs without asking in the workspace: this agent asks.
	sent := e.say(e.member, `@careful [[tool:list_files {}]]`)
	step := e.pendingStep(sent.Answers[0].ID, db.StepApproval)
	if step.Data.Tool != "list_files" {
		t.Fatalf("the approval asked is for %q", step.Data.Tool)
	}
	if err := e.rt.RoomDecide(ctx, e.member.ID, e.as(e.member), sent.Runs[0].ID, step.ID, db.DecideDeny); err != nil {
		t.Fatal(err)
	}
	e.settled()
	reqs := chatRequests(e.fake)
	sys := reqs[0].Chat.Messages[0].Content
	if !strings.Contains(sys, "write_file (Denied for this agent of the room.)") || !strings.Contains(sys, "wait for the user's approval before they run: list_files") {
		t.Fatalf("the agent's execution context: %q", sys)
	}
	for _, tool := range reqs[0].Chat.Tools {
		if n := tool.Function.Name; n == "write_file" {
			t.Fatalf("the agent was offered %s", n)
		}
	}

	// ask_user's question is answered by the asker only.
	sent = e.say(e.member, `@careful [[tool:ask_user {"questions": [{"question": "Which?", "options": ["a", "b"]}]}]]`)
	q := e.pendingStep(sent.Answers[0].ID, db.StepQuestion)
	err := e.rt.RoomAnswer(ctx, e.user.ID, e.as(e.user), sent.Runs[0].ID, q.ID, []string{"a"})
	if msg, _ := usererr.Message(err); !errors.Is(err, chat.ErrNotAsker) || msg != "Only Max can answer this question." {
		t.Fatalf("the owner answers: %v (%q)", err, msg)
	}
	if err := e.rt.RoomDecide(ctx, e.member.ID, e.as(e.member), sent.Runs[0].ID, q.ID, db.DecideOnce); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a question decided as an approval: %v", err)
	}
	if err := e.rt.RoomAnswer(ctx, e.member.ID, e.as(e.member), sent.Runs[0].ID, q.ID, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	if items := e.settled(); items[len(items)-1].Message.Status != db.MsgComplete {
		t.Fatalf("the answer after the question: %s %q", items[len(items)-1].Message.Status, items[len(items)-1].Message.Error)
	}
}

func TestARoomAgentsAnswerInterruptedByAShutdownSaysSoWithoutPointingToAResumeRoomsLack(t *testing.T) {
	t.Parallel()
	e, _ := newAgentRoomEnv(t)
	e.agent("builder", "toolie", "", "", true)
	ctx := context.Background()
	sent := e.say(e.member, "@builder [[hang]] take your time")
	testwait.For(t, "the agent to ask the model", 10*time.Second, func() bool { return e.fake.ActiveStreams() == 1 })
	sctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	e.rt.Shutdown(sctx) // the server stops with the answer being written
	m := e.message(sent.Answers[0].ID)
	if m.Status != db.MsgInterrupted || m.Error != "The server stopped while the agent was working." {
		t.Fatalf("the interrupted answer: %s %q", m.Status, m.Error)
	}
}
