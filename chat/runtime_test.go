package chat_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"weft/chat"
	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testwait"
)

func TestAnAnswerStreamsToSubscribersAndIsStoredCompleteWithUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	first := e.send(0, "Hello there")
	e.wait(first)
	sent := e.send(first.Thread.ID, "[[slow:20ms]][[tokens:30]] count")

	snap, events, unsubscribe, ok := e.rt.Subscribe(sent.Run.ID)
	if !ok {
		t.Fatal("a run just sent is not live on this instance")
	}
	defer unsubscribe()
	var got strings.Builder
	got.WriteString(snap.Content)
	var final db.Message
	for ev := range events {
		switch ev.Kind {
		case chat.EventDelta:
			got.WriteString(ev.Text)
		case chat.EventDone:
			final = *ev.Message
		}
	}
	want := tokens(1, 30)
	if got.String() != want {
		t.Fatalf("streamed text = %q, want %q", got.String(), want)
	}
	run, stored := e.wait(sent)
	if run.Status != db.RunCompleted || stored.Status != db.MsgComplete || stored.Content != want || final.Content != want {
		t.Fatalf("run %s, message %s %q", run.Status, stored.Status, stored.Content)
	}
	var meta struct {
		Route, Model string
		Usage        map[string]any
	}
	if err := json.Unmarshal(stored.Metadata.Raw, &meta); err != nil {
		t.Fatal(err)
	}
	num := func(k string) float64 { f, _ := meta.Usage[k].(float64); return f }
	if meta.Route != "chat" || num("output_tokens") != 30 || num("prompt_tokens") <= 0 ||
		num("tokens_per_second") <= 0 || num("num_ctx") != 4096 {
		t.Fatalf("metadata = %s", stored.Metadata.Raw)
	}

	// The model saw the whole active path and an explicit num_ctx.
	reqs := chatRequests(e.fake)
	last := reqs[len(reqs)-1]
	if last.NumCtx != 4096 || last.Chat.Options["num_ctx"] == nil {
		t.Fatalf("num_ctx not sent explicitly: %+v", last.Chat.Options)
	}
	roles := []string{}
	for _, m := range last.Chat.Messages {
		roles = append(roles, m.Role+":"+strings.Fields(m.Content)[0])
	}
	if strings.Join(roles, " ") != "user:Hello assistant:You user:[[slow:20ms]][[tokens:30]]" {
		t.Fatalf("messages sent = %v", roles)
	}
}

func TestPartialAnswersAreFlushedWhileStreaming(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{FlushEvery: 100 * time.Millisecond})
	sent := e.send(0, "[[slow:40ms]][[tokens:40]]")
	testwait.For(t, "a partial flush", 0, func() bool {
		m := e.message(sent.Assistant.ID)
		return m.Status == db.MsgStreaming && strings.HasPrefix(m.Content, "tok1 tok2 ")
	})
	e.wait(sent)
}

func TestStopCancelsTheModelRequestAndKeepsThePartialAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	sent := e.send(0, "[[slow:30ms]][[tokens:500]]")
	if err := e.fake.WaitChunks(context.Background(), 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Cancel(context.Background(), e.user.ID, sent.Run.ID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.fake.WaitCancelled(ctx, 1); err != nil {
		t.Fatalf("the model request was not cancelled: %v", err)
	}
	run, m := e.wait(sent)
	if run.Status != db.RunCancelled || m.Status != db.MsgCancelled {
		t.Fatalf("after stop: run %s, message %s", run.Status, m.Status)
	}
	if !strings.HasPrefix(m.Content, "tok1 tok2 tok3 ") || strings.Contains(m.Content, "tok500") {
		t.Fatalf("partial text = %q", m.Content)
	}
}

func TestALeavingSubscriberDoesNotStopTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	sent := e.send(0, "[[slow:10ms]][[tokens:30]]")
	_, _, unsubscribe, ok := e.rt.Subscribe(sent.Run.ID)
	if !ok {
		t.Fatal("not live")
	}
	unsubscribe()
	run, m := e.wait(sent)
	if run.Status != db.RunCompleted || m.Content != tokens(1, 30) || e.fake.Cancellations() != 0 {
		t.Fatalf("run %s, %q, cancellations %d", run.Status, m.Content, e.fake.Cancellations())
	}
}

func TestModelErrorsAreStoredWithTheirPartialTextAndAClearMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	for _, tc := range []struct {
		content, wantText, wantErr string
	}{
		{"[[error-after:3]][[tokens:10]]", tokens(1, 3), "The model stopped with an error: fake: model crashed"},
		{"[[error-before:404]]", "", `Model "tiny:latest" is not available on the Ollama server at ` + e.fake.URL + ". An administrator can pull it on the Models page (/admin/models"},
	} {
		run, m := e.wait(e.send(0, tc.content))
		if run.Status != db.RunFailed || m.Status != db.MsgError {
			t.Errorf("%s: run %s, message %s", tc.content, run.Status, m.Status)
		}
		if m.Content != tc.wantText || !strings.HasPrefix(m.Error, tc.wantErr) {
			t.Errorf("%s: text %q, error %q", tc.content, m.Content, m.Error)
		}
	}
}

func TestAnUnreachableOllamaFailsTheRunWithAnExplanation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	e.fake.SetDown(true)
	run, m := e.wait(e.send(0, "hello"))
	if run.Status != db.RunFailed || !strings.Contains(m.Error, "Ollama is not reachable at "+e.fake.URL) {
		t.Fatalf("run %s, error %q", run.Status, m.Error)
	}
	// Retry once it is back: a new sibling answer completes.
	e.fake.SetDown(false)
	again, err := e.rt.Retry(context.Background(), e.user.ID, m.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	run, m2 := e.wait(again)
	if run.Status != db.RunCompleted || m2.Content != "You said: hello" || *m2.ParentID != *m.ParentID {
		t.Fatalf("retry: run %s, %q, parent %v vs %v", run.Status, m2.Content, m2.ParentID, m.ParentID)
	}
	if e.message(m.ID).Status != db.MsgError {
		t.Fatal("the failed answer was overwritten instead of kept as a sibling")
	}
}

func TestMessagesSentDuringARunQueueAndRunInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	a := e.send(0, "[[slow:30ms]][[tokens:10]] A")
	b := e.send(a.Thread.ID, "[[slow:10ms]][[tokens:3]] B")
	c := e.send(a.Thread.ID, "[[slow:10ms]][[tokens:3]] C")
	if b.Run.Status != db.RunQueued || c.Run.Status != db.RunQueued {
		t.Fatalf("later sends are %s, %s; want queued", b.Run.Status, c.Run.Status)
	}
	for _, s := range []db.Sent{a, b, c} {
		if run, _ := e.wait(s); run.Status != db.RunCompleted {
			t.Fatalf("run %d: %s", run.ID, run.Status)
		}
	}
	reqs := chatRequests(e.fake)
	if len(reqs) != 3 {
		t.Fatalf("%d chat requests, want 3", len(reqs))
	}
	for i, want := range []string{" A", " B", " C"} {
		msgs := reqs[i].Chat.Messages
		if got := msgs[len(msgs)-1].Content; !strings.HasSuffix(got, want) {
			t.Fatalf("request %d answered %q, want the message ending %q", i, got, want)
		}
	}
	// B's request carries A's full answer: it started after A finished.
	bMsgs := reqs[1].Chat.Messages
	if got := bMsgs[len(bMsgs)-2].Content; got != tokens(1, 10) {
		t.Fatalf("B saw A's answer as %q", got)
	}
}

func TestAQueuedRunCanBeCancelledBeforeItStarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	a := e.send(0, "[[slow:30ms]][[tokens:20]]")
	b := e.send(a.Thread.ID, "never asked")
	if _, err := e.rt.Cancel(context.Background(), e.user.ID, b.Run.ID); err != nil {
		t.Fatal(err)
	}
	e.wait(a)
	run, m := e.wait(b)
	if run.Status != db.RunCancelled || m.Status != db.MsgCancelled {
		t.Fatalf("queued run after cancel: %s / %s", run.Status, m.Status)
	}
	for _, r := range chatRequests(e.fake) {
		for _, msg := range r.Chat.Messages {
			if msg.Content == "never asked" {
				t.Fatal("the cancelled message reached the model")
			}
		}
	}
}

func TestRunsOfOneUserAreCappedAndOtherUsersRunInParallel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{PerUserRuns: 1})
	a := e.send(0, "[[slow:30ms]][[tokens:15]] first")
	b := e.send(0, "[[slow:1ms]][[tokens:2]] second thread")
	if b.Run.Status != db.RunQueued {
		t.Fatalf("second thread's run is %s while the user is at the cap", b.Run.Status)
	}
	other, ows := e.newUser("other@example.com")
	o, err := e.rt.Send(context.Background(), other.ID, chat.Input{WorkspaceID: ows.ID, Content: "[[slow:1ms]][[tokens:2]] other"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Run.Status != db.RunRunning {
		t.Fatalf("another user's run is %s, want running at once", o.Run.Status)
	}
	e.wait(a)
	if run, _ := e.wait(b); run.Status != db.RunCompleted {
		t.Fatalf("the capped run ended %s", run.Status)
	}
}

func TestARunWaitingForApprovalHoldsItsSlotUnderThePerUserCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{PerUserRuns: 1})
	// An agent run of the user waiting for an approval, on this instance.
	waiting, err := e.store.SendMessage(context.Background(), e.user.ID, db.Send{WorkspaceID: e.ws.ID, Content: "q", Kind: "chat", Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, e.store, `UPDATE runs SET status = 'waiting', instance_id = $2, started_at = now() WHERE id = $1`, waiting.Run.ID, t.Name())
	next := e.send(0, "[[tokens:2]] another thread")
	if next.Run.Status != db.RunQueued {
		t.Fatalf("the next run is %s while the user's only slot is held by a waiting run, want queued", next.Run.Status)
	}
	if r, err := e.store.Run(context.Background(), e.user.ID, next.Run.ID); err != nil || r.Status != db.RunQueued {
		t.Fatalf("the next run is %s (%v), want still queued", r.Status, err)
	}
}

func TestAStopRequestedOnAnotherInstanceReachesTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{Instance: "A", FlushEvery: 50 * time.Millisecond})
	other := e.runtime(chat.Config{Instance: "B"})
	sent := e.send(0, "[[slow:20ms]][[tokens:1000]]")
	if err := e.fake.WaitChunks(context.Background(), 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Cancel(context.Background(), e.user.ID, sent.Run.ID); err != nil {
		t.Fatal(err)
	}
	run, m := e.wait(sent)
	if run.Status != db.RunCancelled || m.Content == "" || e.fake.Cancellations() != 1 {
		t.Fatalf("run %s, text %q, cancellations %d", run.Status, m.Content, e.fake.Cancellations())
	}
}

func TestARestartInterruptsTheRunsOfItsPreviousLifeKeepingTheirText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{Instance: "first-life"})
	// A run left running by a process that died: its row says running on
	// this instance and its answer holds the text of the last flush.
	sent := e.sendRunningOn("crashed")
	mustExec(t, e.store, `UPDATE messages SET content = 'half an ans' WHERE id = $1`, sent.Assistant.ID)

	e.runtime(chat.Config{Instance: "crashed"}) // the same instance, started again
	run, m := e.wait(sent)
	if run.Status != db.RunInterrupted || m.Status != db.MsgInterrupted || m.Content != "half an ans" || m.Error == "" {
		t.Fatalf("after restart: run %s, message %s %q %q", run.Status, m.Status, m.Content, m.Error)
	}
}

func TestRunsOfAnInstanceThatStoppedBeatingAreInterrupted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{HeartbeatEvery: 50 * time.Millisecond, StaleAfter: time.Second})
	mustExec(t, e.store, `INSERT INTO instances (id, heartbeat_at) VALUES ('gone', now() - interval '1 minute')`)
	sent := e.sendRunningOn("gone")
	if run, _ := e.wait(sent); run.Status != db.RunInterrupted {
		t.Fatalf("run of a dead instance is %s", run.Status)
	}
}

func TestShutdownInterruptsRunsThatOutlastTheGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	rt := e.runtime(chat.Config{Instance: "leaving"})
	sent, err := rt.Send(context.Background(), e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Content: "[[slow:20ms]][[tokens:1000]]"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fake.WaitChunks(context.Background(), 0, 3); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	rt.Shutdown(ctx)
	run, m := e.wait(sent)
	if run.Status != db.RunInterrupted || m.Status != db.MsgInterrupted || !strings.HasPrefix(m.Content, "tok1 ") {
		t.Fatalf("after shutdown: %s / %s %q", run.Status, m.Status, m.Content)
	}
}

func TestTheFirstAnswerGivesTheThreadAGeneratedTitleUnlessTheUserRenamedIt(t *testing.T) {
	t.Parallel()
	titles := make(chan titleOffer, 4)
	e := newEnvWrapped(t, chat.Config{}, func(s *db.DB) chat.Store { return titleSpy{s, titles} })
	ctx := context.Background()
	sent := e.send(0, "Why is the sky blue at noon?")
	changed, release := e.rt.TitleChanged(sent.Thread.ID)
	defer release()
	e.wait(sent)
	testwait.Closed(t, "a generated title", 10*time.Second, changed)
	th, err := e.store.Thread(ctx, e.user.ID, sent.Thread.ID)
	if err != nil || th.Title != "Why is the" || th.TitleState != "generated" {
		t.Fatalf("title %q (%s), %v", th.Title, th.TitleState, err)
	}
	var titleReq *api.ChatRequest
	for _, r := range e.fake.Requests() {
		if r.Chat != nil && r.Chat.Stream != nil && !*r.Chat.Stream {
			titleReq = r.Chat
		}
	}
	if titleReq == nil || titleReq.Model != "tiny:latest" {
		t.Fatalf("title request not made with the thread's model: %+v", titleReq)
	}
	if o := testwait.Recv(t, "the first title offered to the store", 0, titles); o.thread != sent.Thread.ID || !o.stored {
		t.Fatalf("first title offer = %+v, want stored for thread %d", o, sent.Thread.ID)
	}

	// The next answer is held at the model until the user has renamed its
	// thread: the run read the thread while its title was provisional, so
	// it does write a title, which the store must refuse.
	gate := make(chan struct{})
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(gate) }) })
	e.fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		if req.Stream == nil || *req.Stream {
			<-gate
		}
		return fakeollama.DefaultReply(req)
	})
	renamed := e.send(0, "Another question entirely")
	wctx, cancel := context.WithTimeout(ctx, testwait.Timeout)
	defer cancel()
	if err := e.fake.WaitRequests(wctx, 3); err != nil { // the first answer, its title, this answer
		t.Fatalf("the second answer never reached the model: %v", err)
	}
	if err := e.store.RenameThread(ctx, e.user.ID, renamed.Thread.ID, "Mine"); err != nil {
		t.Fatal(err)
	}
	open.Do(func() { close(gate) })
	e.wait(renamed)
	if o := testwait.Recv(t, "the second title offered to the store", 0, titles); o.thread != renamed.Thread.ID || o.stored {
		t.Fatalf("second title offer = %+v, want refused for thread %d", o, renamed.Thread.ID)
	}
	if th, _ := e.store.Thread(ctx, e.user.ID, renamed.Thread.ID); th.Title != "Mine" {
		t.Fatalf("a generated title replaced the user's: %q", th.Title)
	}
}

// titleOffer is one generated title the runtime offered to the store.
type titleOffer struct {
	thread int64
	stored bool // false: refused (the user named the thread)
}

// titleSpy is the database, telling on offers which generated titles the
// runtime tried to store and whether they were.
type titleSpy struct {
	*db.DB
	offers chan<- titleOffer
}

func (s titleSpy) SetGeneratedTitle(ctx context.Context, user, id int64, title string) (bool, error) {
	stored, err := s.DB.SetGeneratedTitle(ctx, user, id, title)
	if err == nil {
		s.offers <- titleOffer{thread: id, stored: stored}
	}
	return stored, err
}

func TestSendRejectsEmptyAndOverlongMessagesBeforeStoringAnything(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	for _, content := range []string{"", "  \n\t ", strings.Repeat("é", chat.MaxMessageRunes+1)} {
		_, err := e.rt.Send(context.Background(), e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Content: content})
		if err != chat.ErrEmpty && err != chat.ErrTooLong {
			t.Fatalf("send %d chars: err = %v", len(content), err)
		}
	}
	page, _, err := e.store.SidebarThreads(context.Background(), e.user.ID, e.ws.ID, nil, 10)
	if err != nil || len(page) != 0 {
		t.Fatalf("a rejected message created a thread: %v %v", page, err)
	}
}

func chatRequests(f *fakeollama.Server) []fakeollama.Recorded {
	var out []fakeollama.Recorded
	for _, r := range f.Requests() {
		if r.Chat != nil && (r.Chat.Stream == nil || *r.Chat.Stream) {
			out = append(out, r)
		}
	}
	return out
}

func mustExec(t *testing.T, store *db.DB, sql string, args ...any) {
	t.Helper()
	if _, err := store.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestContinueAppendsToAStoppedAnswerAndSendsItAsTheModelsOwnBeginning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	sent := e.send(0, "[[slow:20ms]][[tokens:300]]")
	if err := e.fake.WaitChunks(context.Background(), 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Cancel(context.Background(), e.user.ID, sent.Run.ID); err != nil {
		t.Fatal(err)
	}
	_, stopped := e.wait(sent)
	e.fake.SetScript(func(req *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Chunks: []string{"and ", "the ", "rest."}}
	})
	cont, err := e.rt.Continue(context.Background(), e.user.ID, stopped.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cont.Assistant.ID != stopped.ID {
		t.Fatal("continue made a new message instead of going on with the stopped one")
	}
	run, m := e.wait(cont)
	if run.Status != db.RunCompleted || m.Status != db.MsgComplete || m.Content != stopped.Content+"and the rest." {
		t.Fatalf("continued: run %s, %s %q (was %q)", run.Status, m.Status, m.Content, stopped.Content)
	}
	reqs := chatRequests(e.fake)
	last := reqs[len(reqs)-1].Chat.Messages
	if final := last[len(last)-1]; final.Role != "assistant" || final.Content != stopped.Content {
		t.Fatalf("the continuation request ends with %s %q, want the partial answer", final.Role, final.Content)
	}
}

func TestDeletingAMessageStopsTheAnswerBeingWrittenBelowIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chat.Config{})
	sent := e.send(0, "[[slow:20ms]][[tokens:1000]]")
	if err := e.fake.WaitChunks(context.Background(), 0, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.DeleteMessage(context.Background(), e.user.ID, sent.User.ID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.fake.WaitCancelled(ctx, 1); err != nil {
		t.Fatalf("the model kept writing an answer that was deleted: %v", err)
	}
	if _, err := e.store.Message(context.Background(), e.user.ID, sent.Assistant.ID); err == nil {
		t.Fatal("the deleted answer came back")
	}
}

// sendRunningOn sends a message whose run then reads as running on
// instance, as a process that died would have left it. The env's own
// runtime may claim the queued run first (it tries queued runs when its
// listener connects): then the test sends again, until the run is taken
// over while still queued.
func (e *env) sendRunningOn(instance string) db.Sent {
	e.t.Helper()
	for range 20 {
		sent, err := e.store.SendMessage(context.Background(), e.user.ID, db.Send{WorkspaceID: e.ws.ID, Content: "q", Kind: "chat", Model: "tiny"})
		if err != nil {
			e.t.Fatal(err)
		}
		tag, err := e.store.Pool.Exec(context.Background(), `UPDATE runs SET status = 'running', instance_id = $2
			WHERE id = $1 AND status = 'queued'`, sent.Run.ID, instance)
		if err != nil {
			e.t.Fatal(err)
		}
		if tag.RowsAffected() == 1 {
			return sent
		}
		e.wait(sent) // claimed here first: let it end, then send again
	}
	e.t.Fatal("every run was claimed before the test could take it over")
	return db.Sent{}
}
