package chat_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"weft/chat"
	"weft/db"
	"weft/internal/testwait"
	"weft/internal/usererr"
)

func TestAMessageMentioningTwoAgentsIsAnsweredByEachInTheOrderOfFirstMention(t *testing.T) {
	t.Parallel()
	e := newRoomEnv(t, chat.Config{})
	writer := e.agent("Writer", "tiny", "", "", false)
	critic := e.agent("critic", "tiny", "", "", false)
	// The fake echoes the message, mentions included: no hand-on here.
	mustExec(t, e.store, "UPDATE rooms SET mention_depth = 0 WHERE id = $1", e.room.ID)

	sent := e.say(e.member, "@Critic look, then @writer and @critic again")
	if len(sent.Answers) != 2 || len(sent.Runs) != 2 {
		t.Fatalf("answers %d, runs %d; want 2 each", len(sent.Answers), len(sent.Runs))
	}
	u := sent.User
	if u.Speaker != "Max" || u.AuthorID == nil || *u.AuthorID != e.member.ID || u.ParentID != nil {
		t.Fatalf("the member's message = %+v", u)
	}
	for i, want := range []db.RoomAgent{critic, writer} {
		a, r := sent.Answers[i], sent.Runs[i]
		parent := u.ID
		if i > 0 {
			parent = sent.Answers[i-1].ID
		}
		if a.Speaker != want.Name || a.RoomAgentID == nil || *a.RoomAgentID != want.ID || *a.ParentID != parent {
			t.Fatalf("answer %d = %+v, want %s's under %d", i, a, want.Name, parent)
		}
		if *r.RoomAgentID != want.ID || *r.AskedBy != e.member.ID || r.MentionDepth != 0 ||
			*r.UserMessageID != u.ID || *r.AssistantMessageID != a.ID || r.OwnerID != e.user.ID {
			t.Fatalf("run %d = %+v", i, r)
		}
	}
	got := line(e.settled())
	if len(got) != 3 || !strings.HasPrefix(got[0], "Max: @Critic look") ||
		!strings.HasPrefix(got[1], "@critic: ") || !strings.HasPrefix(got[2], "@Writer: ") {
		t.Fatalf("line = %q", got)
	}
	// One at a time: the second answer started after the first ended.
	first, _ := e.store.Run(context.Background(), e.user.ID, sent.Runs[0].ID)
	second, _ := e.store.Run(context.Background(), e.user.ID, sent.Runs[1].ID)
	if first.Status != db.RunCompleted || second.Status != db.RunCompleted || second.StartedAt.Before(*first.FinishedAt) {
		t.Fatalf("runs %s %v..%v and %s from %v", first.Status, first.StartedAt, first.FinishedAt, second.Status, second.StartedAt)
	}
}

func TestAMessageWithoutAMentionGoesToTheDefaultAgentOrIsOnlyPosted(t *testing.T) {
	t.Parallel()
	e := newRoomEnv(t, chat.Config{})
	helper := e.agent("helper", "tiny", "", "", false)

	posted := e.say(e.user, "just a note for @Max")
	if len(posted.Runs) != 0 || len(posted.Answers) != 0 {
		t.Fatalf("a room without a default agent answered: %+v", posted)
	}
	mustExec(t, e.store, "UPDATE rooms SET default_agent_id = $2 WHERE id = $1", e.room.ID, helper.ID)
	asked := e.say(e.member, "what now?")
	if len(asked.Runs) != 1 || *asked.Runs[0].RoomAgentID != helper.ID || *asked.Answers[0].ParentID != asked.User.ID ||
		*asked.User.ParentID != posted.User.ID {
		t.Fatalf("the default agent did not answer under the line: %+v", asked)
	}
	got := line(e.settled())
	if len(got) != 3 || got[0] != "Olivia: just a note for @Max" || got[1] != "Max: what now?" || !strings.HasPrefix(got[2], "@helper: ") {
		t.Fatalf("line = %q", got)
	}
	if _, err := e.rt.RoomSend(context.Background(), e.member.ID, e.as(e.member), "  "); !errors.Is(err, chat.ErrEmpty) {
		t.Fatalf("an empty message: err = %v, want ErrEmpty", err)
	}
}

func TestAnAnswerIsStoppedByItsAskerOrTheOwnerButNotByAnotherMember(t *testing.T) {
	t.Parallel()
	e := newRoomEnv(t, chat.Config{})
	e.agent("slow", "tiny", "", "", false)
	other, _ := e.newUser("other@example.com")
	e.join(other)
	ctx := context.Background()

	first := e.say(e.member, "@slow [[hang]] one")
	second := e.say(e.member, "@slow [[hang]] two")
	testwait.For(t, "the first answer to run", 10*time.Second, func() bool {
		r, _ := e.store.Run(ctx, e.user.ID, first.Runs[0].ID)
		return r.Status == db.RunRunning
	})
	err := e.rt.RoomStop(ctx, other.ID, e.as(other), first.Runs[0].ID)
	if msg, _ := usererr.Message(err); !errors.Is(err, chat.ErrNotAsker) || msg != "Only Max or the room's owner can stop this answer." {
		t.Fatalf("another member stops it: err = %v (%q)", err, msg)
	}
	if err := e.rt.RoomStop(ctx, e.member.ID, e.as(e.member), first.Runs[0].ID); err != nil {
		t.Fatalf("the asker stops it: %v", err)
	}
	if err := e.rt.RoomStop(ctx, e.user.ID, e.as(e.user), second.Runs[0].ID); err != nil {
		t.Fatalf("the owner stops it: %v", err)
	}
	e.settled()
	for _, id := range []int64{first.Runs[0].ID, second.Runs[0].ID} {
		if r, _ := e.store.Run(ctx, e.user.ID, id); r.Status != db.RunCancelled {
			t.Fatalf("run %d is %s, want cancelled", id, r.Status)
		}
	}
	// A run of another thread is not the room's.
	sent := e.send(0, "a thread of the owner's")
	e.wait(sent)
	if err := e.rt.RoomStop(ctx, e.user.ID, e.as(e.user), sent.Run.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("stopping a run of another thread: err = %v, want ErrNotFound", err)
	}
}

func TestTheRoomsLineAndQueueAreReadByMembersOnly(t *testing.T) {
	t.Parallel()
	e := newRoomEnv(t, chat.Config{})
	e.agent("slow", "tiny", "", "", false)
	e.agent("fast", "tiny", "", "", false)
	ctx := context.Background()

	sent := e.say(e.member, "@slow [[hang]] then @fast")
	testwait.For(t, "the first answer to run", 10*time.Second, func() bool {
		r, _ := e.store.Run(ctx, e.user.ID, sent.Runs[0].ID)
		return r.Status == db.RunRunning
	})
	v, err := e.rt.RoomView(ctx, e.member.ID, e.as(e.member), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Messages) != 3 || v.Messages[0].SpeakerKind != chat.SpeakerMember || v.Messages[1].Speaker != "slow" ||
		v.Messages[1].SpeakerKind != chat.SpeakerAgent || v.Messages[1].Run == nil || v.Messages[2].Speaker != "fast" {
		t.Fatalf("view = %q", line(v.Messages))
	}
	if len(v.Queue) != 2 || v.Queue[0].Agent != "slow" || v.Queue[0].Status != db.RunRunning || v.Queue[0].Asker != "Max" ||
		v.Queue[0].Message != sent.Answers[0].ID || v.Queue[1].Agent != "fast" || v.Queue[1].Status != db.RunQueued {
		t.Fatalf("queue = %+v", v.Queue)
	}
	after, err := e.rt.RoomMessagesAfter(ctx, e.member.ID, e.as(e.member), sent.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 || after[0].Message.ID != sent.Answers[0].ID || after[1].Message.ID != sent.Answers[1].ID {
		t.Fatalf("after the message: %q", line(after))
	}
	older, err := e.rt.RoomView(ctx, e.member.ID, e.as(e.member), sent.Answers[0].ID)
	if err != nil || len(older.Messages) != 1 || older.Messages[0].Message.ID != sent.User.ID {
		t.Fatalf("the page above the first answer: %q, %v", line(older.Messages), err)
	}

	stranger, _ := e.newUser("stranger@example.com")
	room := e.room
	room.MyRole = db.RoomMember // a forged room value does not get past the membership check
	if _, err := e.rt.RoomView(ctx, stranger.ID, room, 0); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a non-member reads the room: %v", err)
	}
	if _, err := e.rt.RoomMessagesAfter(ctx, stranger.ID, room, 0); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a non-member reads the line: %v", err)
	}
	if _, err := e.rt.RoomSend(ctx, stranger.ID, room, "hi"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a non-member posts: %v", err)
	}
	if err := e.rt.RoomStop(ctx, stranger.ID, room, sent.Runs[0].ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a non-member stops: %v", err)
	}
	if err := e.rt.RoomStop(ctx, e.user.ID, e.as(e.user), sent.Runs[0].ID); err != nil {
		t.Fatal(err)
	}
}

func TestAMemberHasAtMostTenAnswersWaitingInARoomAndMayStillTalk(t *testing.T) {
	t.Parallel()
	e := newRoomEnv(t, chat.Config{})
	e.agent("slow", "tiny", "", "", false)
	other, _ := e.newUser("other@example.com")
	e.join(other)
	ctx := context.Background()

	var sent []chat.RoomSent
	for i := range chat.RoomPendingPerMember {
		sent = append(sent, e.say(e.member, fmt.Sprintf("@slow [[hang]] %d", i)))
	}
	_, err := e.rt.RoomSend(ctx, e.member.ID, e.as(e.member), "@slow one more")
	if msg, _ := usererr.Message(err); !errors.Is(err, chat.ErrRoomBusy) ||
		msg != "You already have 10 answers waiting in this room: wait for them, or stop one, before you ask again." {
		t.Fatalf("an eleventh answer asked for: err = %v (%q)", err, msg)
	}
	// A message for nobody is still posted, and another member asks for
	// answers of their own.
	if s := e.say(e.member, "just talking"); len(s.Runs) != 0 {
		t.Fatalf("a message without a mention queued %d answers", len(s.Runs))
	}
	e.say(other, "@slow [[hang]] mine")
	// One of hers stopped, she may ask again.
	if err := e.rt.RoomStop(ctx, e.member.ID, e.as(e.member), sent[0].Runs[0].ID); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the stopped answer to end and the next to run", 10*time.Second, func() bool {
		r, _ := e.store.Run(ctx, e.user.ID, sent[0].Runs[0].ID)
		next, _ := e.store.Run(ctx, e.user.ID, sent[1].Runs[0].ID)
		return r.Status == db.RunCancelled && next.Status == db.RunRunning
	})
	e.say(e.member, "@slow [[hang]] again")
	// The queued answers first, the running one last: nothing starts
	// while they are stopped.
	q, err := e.store.RoomQueue(ctx, e.user.ID, e.room.ThreadID)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(q) - 1; i >= 0; i-- {
		if err := e.rt.RoomStop(ctx, e.user.ID, e.as(e.user), q[i].Run); err != nil {
			t.Fatal(err)
		}
	}
	e.settled()
}
