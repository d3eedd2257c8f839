package chat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testwait"
)

// One run whose text PostgreSQL refuses (a NUL byte, which a model can emit
// as "\u0000" and the JSON decoder passes on) must not stop the progress of
// every other run of the instance, nor a Stop sent to them from another
// instance: before the batched writer each run flushed on its own.
func TestOneRunsUnstorableTextDoesNotStallEveryRunsProgressAndStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{Instance: "A", FlushEvery: 50 * time.Millisecond})
	e.fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		last := req.Messages[len(req.Messages)-1].Content
		if strings.Contains(last, "poison") {
			return fakeollama.Reply{Chunks: []string{"bad \x00 byte"}, Hang: true}
		}
		return fakeollama.DefaultReply(req)
	})
	good := e.send(0, "[[tokens:2]][[hang]]")
	testwait.For(t, "the good run's text saved", 10*time.Second, func() bool {
		return e.message(good.Assistant.ID).Content == tokens(1, 2)
	})
	bad := e.send(0, "poison")
	defer func() { _, _ = e.rt.Cancel(context.Background(), e.user.ID, bad.Run.ID) }()
	if err := e.fake.WaitChunks(context.Background(), 1, 1); err != nil {
		t.Fatal(err)
	}
	other := e.runtime(chat.Config{Instance: "B"})
	if _, err := other.Cancel(context.Background(), e.user.ID, good.Run.ID); err != nil {
		t.Fatal(err)
	}
	if !testwait.Until(5*time.Second, func() bool {
		r, err := e.store.Run(context.Background(), e.user.ID, good.Run.ID)
		return err == nil && !r.Active()
	}) {
		t.Fatal("a Stop sent from another instance never reached a healthy run: every progress round fails on the other run's text")
	}
	if run, _ := e.wait(good); run.Status != db.RunCancelled {
		t.Fatalf("good run %s", run.Status)
	}
}
