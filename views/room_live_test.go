package views

import (
	"context"
	"strings"
	"testing"

	"weft/chat"
	"weft/db"
)

func TestARoomPageResumesItsStreamBeforeItsOldestAnswerStillBeingWritten(t *testing.T) {
	msg := func(id int64, live bool) MessageView {
		v := MessageView{MessageItem: chat.MessageItem{Message: db.Message{ID: id, Status: db.MsgComplete}}}
		if live {
			v.Message.Status = db.MsgStreaming
			v.Run = &db.Run{ID: id * 10, Status: db.RunRunning}
		}
		return v
	}
	for _, tc := range []struct {
		name string
		ms   []MessageView
		want int64
	}{
		{"empty room", nil, 0},
		{"nothing being written", []MessageView{msg(3, false), msg(7, false)}, 7},
		{"two answers being written", []MessageView{msg(3, false), msg(7, true), msg(9, true)}, 6},
	} {
		if got := RoomResumePoint(tc.ms); got != tc.want {
			t.Errorf("%s: resume after %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestAnApprovalInARoomPostsToTheRoomAndOffersOnlyOnceOrDeny(t *testing.T) {
	step := db.Step{ID: 5, RunID: 9, Kind: db.StepApproval, Status: db.StepPending, Data: db.StepData{Tool: "write_file"}}
	var b strings.Builder
	if err := InRoom(3, ApprovalCard(step, true)).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	if !strings.Contains(got, `hx-post="/rooms/3/runs/9/steps/5/decide"`) {
		t.Errorf("the room's approval posts elsewhere: %s", got)
	}
	for _, d := range []string{"thread", "always"} {
		if strings.Contains(got, `data-decision="`+d+`"`) {
			t.Errorf("the room's approval offers %q: %s", d, got)
		}
	}
	b.Reset()
	if err := ApprovalCard(step, true).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `hx-post="/steps/5/decide"`) || !strings.Contains(b.String(), `data-decision="always"`) {
		t.Errorf("a thread's approval changed: %s", b.String())
	}
}
