package views

import (
	"context"
	"strings"
	"testing"

	"weft/chat"
	"weft/db"
)

func TestAThreadPagesLiveWatchStartsFromItsLastMessageAndOnlyOnTheThreadsBranch(t *testing.T) {
	msg := func(id int64, live bool) MessageView {
		v := MessageView{MessageItem: chat.MessageItem{Message: db.Message{ID: id, ThreadID: 4, Role: db.RoleAssistant, Status: db.MsgComplete}}}
		if live {
			v.Message.Status = db.MsgStreaming
			v.Run = &db.Run{ID: id * 10, Status: db.RunRunning}
		}
		return v
	}
	render := func(p ThreadPage) string {
		var b strings.Builder
		if err := ThreadLive(p).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name string
		ms   []MessageView
		want string
	}{
		{"no message", nil, `sse-connect="/t/4/watch?leaf=0&amp;run=0"`},
		{"a final answer last", []MessageView{msg(3, false), msg(7, false)}, `sse-connect="/t/4/watch?leaf=7&amp;run=0"`},
		{"an answer being written last", []MessageView{msg(3, false), msg(9, true)}, `sse-connect="/t/4/watch?leaf=9&amp;run=90"`},
	} {
		if got := render(ThreadPage{Thread: db.Thread{ID: 4}, Messages: tc.ms}); !strings.Contains(got, tc.want) || !strings.Contains(got, `id="thread-notice"`) {
			t.Errorf("%s: the watch is %s, want %s", tc.name, got, tc.want)
		}
	}
	// A page reading another branch than the thread's has no watch: the
	// thread's new messages do not continue what it shows.
	if got := render(ThreadPage{Thread: db.Thread{ID: 4}, Messages: []MessageView{msg(3, false)}, OtherBranch: 3}); got != "" {
		t.Errorf("a page on another branch watches the thread: %s", got)
	}
}
