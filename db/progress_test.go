package db_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
)

func mustMessage(t *testing.T, store *db.DB, user, id int64) db.Message {
	t.Helper()
	m, err := store.Message(context.Background(), user, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// progressRows is the message's progress as stored: row count and bytes.
func progressRows(t *testing.T, store *db.DB, msg int64) (rows, bytes int) {
	t.Helper()
	err := store.Pool.QueryRow(context.Background(), `SELECT count(*), COALESCE(sum(octet_length(content) + octet_length(thinking)), 0)
		FROM message_progress WHERE message_id = $1`, msg).Scan(&rows, &bytes)
	if err != nil {
		t.Fatal(err)
	}
	return rows, bytes
}

func TestProgressAppendsOnlyTheNewTextAndEveryReaderSeesTheWholeAnswer(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	u, ws := newUser(t, store, "p@example.com")
	sent := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q"})
	msg := sent.Assistant.ID
	mustExec(t, store, `UPDATE runs SET status = 'running', instance_id = 'here' WHERE id = $1`, sent.Run.ID)

	// The first save also drops whatever the row held (a run writes its
	// answer anew); then each save appends.
	mustExec(t, store, `UPDATE messages SET content = 'stale' WHERE id = $1`, msg)
	var want, thinking strings.Builder
	saves := []db.Progress{
		{Message: msg, Seq: 0, Thinking: "Let me ", Restart: true},
		{Message: msg, Seq: 1, Thinking: "think.", Content: "Here "},
		{Message: msg, Seq: 2, Content: "is the «answer» "},
		{Message: msg, Seq: 3, Content: "so far."},
	}
	for _, p := range saves {
		stop, _, err := store.SaveProgress(ctx, []db.Progress{p}, []int64{sent.Run.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(stop) != 0 {
			t.Fatalf("a running run nobody stopped is told to stop: %v", stop)
		}
		want.WriteString(p.Content)
		thinking.WriteString(p.Thinking)
	}
	// The stored bytes are the answer's, once: nothing is rewritten.
	if rows, bytes := progressRows(t, store, msg); rows != 4 || bytes != want.Len()+thinking.Len() {
		t.Fatalf("progress: %d rows, %d bytes; want 4 rows, %d bytes", rows, bytes, want.Len()+thinking.Len())
	}
	var raw string
	if err := store.Pool.QueryRow(ctx, "SELECT content FROM messages WHERE id = $1", msg).Scan(&raw); err != nil || raw != "" {
		t.Fatalf("the message row holds %q (%v) while streaming, want it left alone after the restart", raw, err)
	}

	// Every way of reading the message gives the text so far.
	m, err := store.Message(ctx, u.ID, msg)
	if err != nil {
		t.Fatal(err)
	}
	if m.Content != want.String() || m.Metadata.Thinking != thinking.String() || m.Status != db.MsgStreaming {
		t.Fatalf("Message: %s %q thinking %q", m.Status, m.Content, m.Metadata.Thinking)
	}
	path, _, err := store.ActivePath(ctx, u.ID, sent.Thread.ID, 10)
	if err != nil || len(path) != 2 || path[1].Content != want.String() || path[1].Metadata.Thinking != thinking.String() {
		t.Fatalf("ActivePath: %+v %v", path, err)
	}
	turns, err := store.TurnsTo(ctx, u.ID, msg, 10)
	if err != nil || len(turns) != 2 || turns[1].Content != want.String() {
		t.Fatalf("TurnsTo: %+v %v", turns, err)
	}
	tree, err := store.TreeMessages(ctx, u.ID, sent.Thread.ID)
	if err != nil || len(tree) != 2 || tree[1].Content != want.String() {
		t.Fatalf("TreeMessages: %+v %v", tree, err)
	}
	if _, err := store.Message(ctx, u.ID+1000, msg); err == nil {
		t.Fatal("another user read the streaming answer")
	}

	// The final write stores the whole text once and drops the progress.
	final, err := store.FinishRun(ctx, sent.Run.ID, msg, db.Finish{RunStatus: db.RunCompleted, MsgStatus: db.MsgComplete,
		Content: want.String(), Thinking: thinking.String()})
	if err != nil {
		t.Fatal(err)
	}
	if rows, _ := progressRows(t, store, msg); rows != 0 || final.Content != want.String() || final.Metadata.Thinking != thinking.String() {
		t.Fatalf("after the final write: %d progress rows, %q / %q", rows, final.Content, final.Metadata.Thinking)
	}
	// A late save of a settled answer writes nothing.
	if _, _, err := store.SaveProgress(ctx, []db.Progress{{Message: msg, Seq: 4, Content: "late"}}, []int64{sent.Run.ID}); err != nil {
		t.Fatal(err)
	}
	if rows, _ := progressRows(t, store, msg); rows != 0 || mustMessage(t, store, u.ID, msg).Content != want.String() {
		t.Fatal("a save after the final write changed the answer")
	}
}

func TestARetriedSaveReplacesItsRowSoNothingIsDuplicatedOrLost(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	u, ws := newUser(t, store, "r@example.com")
	sent := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q"})
	msg := sent.Assistant.ID
	save := func(p db.Progress) {
		t.Helper()
		if _, _, err := store.SaveProgress(ctx, []db.Progress{p}, []int64{sent.Run.ID}); err != nil {
			t.Fatal(err)
		}
	}
	save(db.Progress{Message: msg, Seq: 0, Content: "one "})
	// The commit of seq 1 reached the database but its caller saw an
	// error: the retry sends seq 1 again, from the same offset, with the
	// text that came meanwhile.
	save(db.Progress{Message: msg, Seq: 1, Content: "two "})
	save(db.Progress{Message: msg, Seq: 1, Content: "two three "})
	save(db.Progress{Message: msg, Seq: 2, Content: "four"})
	if got := mustMessage(t, store, u.ID, msg).Content; got != "one two three four" {
		t.Fatalf("content = %q", got)
	}
	// An agent's next round drops the text before it.
	save(db.Progress{Message: msg, Seq: 3, Content: "next round", Restart: true})
	if got := mustMessage(t, store, u.ID, msg).Content; got != "next round" {
		t.Fatalf("after a restart: %q", got)
	}
}

func TestSaveProgressTellsWhichRunsToStopInTheSameRoundTrip(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	u, ws := newUser(t, store, "s@example.com")
	a := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "a"})
	b := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "b"})
	c := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "c"})
	mustExec(t, store, `UPDATE runs SET status = 'running', instance_id = 'here' WHERE id = ANY($1)`, []int64{a.Run.ID, b.Run.ID, c.Run.ID})
	if _, err := store.CancelRun(ctx, u.ID, b.Run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := store.DeleteThread(ctx, u.ID, c.Thread.ID); err != nil {
		t.Fatal(err)
	}
	parts := []db.Progress{
		{Message: a.Assistant.ID, Seq: 0, Content: "A"},
		{Message: b.Assistant.ID, Seq: 0, Content: "B"},
		{Message: c.Assistant.ID, Seq: 0, Content: "C"}, // deleted: skipped, not an error
	}
	stop, _, err := store.SaveProgress(ctx, parts, []int64{a.Run.ID, b.Run.ID, c.Run.ID})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(stop)
	if want := []int64{b.Run.ID, c.Run.ID}; !slices.Equal(stop, want) {
		t.Fatalf("stop = %v, want %v (stopped, deleted)", stop, want)
	}
	if mustMessage(t, store, u.ID, a.Assistant.ID).Content != "A" {
		t.Fatal("the running run's text was not saved")
	}
}

func TestARunOfADeadInstanceKeepsItsProgressWhenSettled(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	u, ws := newUser(t, store, "d@example.com")
	sent := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q"})
	msg := sent.Assistant.ID
	mustExec(t, store, `INSERT INTO instances (id, heartbeat_at) VALUES ('dead', now() - interval '1 minute')`)
	mustExec(t, store, `UPDATE runs SET status = 'running', instance_id = 'dead' WHERE id = $1`, sent.Run.ID)
	mustExec(t, store, `UPDATE messages SET content = 'Before: ' WHERE id = $1`, msg) // a continued answer
	mustExec(t, store, `INSERT INTO message_progress (message_id, seq, content, thinking)
		VALUES ($1, 0, 'half ', 'hm'), ($1, 2, 'answer', ''), ($1, 1, 'an ', '...')`, msg)

	runs, err := store.InterruptOrphanedRuns(ctx, "alive", 20*time.Second)
	if err != nil || len(runs) != 1 {
		t.Fatalf("interrupted %d runs: %v", len(runs), err)
	}
	m := mustMessage(t, store, u.ID, msg)
	if m.Status != db.MsgInterrupted || m.Content != "Before: half an answer" || m.Metadata.Thinking != "hm..." || m.Error == "" {
		t.Fatalf("settled: %s %q thinking %q error %q", m.Status, m.Content, m.Metadata.Thinking, m.Error)
	}
	if rows, _ := progressRows(t, store, msg); rows != 0 {
		t.Fatalf("%d progress rows left", rows)
	}
	// The search column was computed from the whole text.
	var found bool
	if err := store.Pool.QueryRow(ctx, `SELECT search @@ to_tsquery('simple', 'answer') FROM messages WHERE id = $1`, msg).Scan(&found); err != nil || !found {
		t.Fatalf("the settled answer is not searchable by its text (%v)", err)
	}
}

// A row whose asynchronous commit was acknowledged and then lost (a
// PostgreSQL crash) would leave a gap in the middle of the answer: the
// next row is refused and its message reported broken, and a restarting
// row with all the text repairs it.
func TestARowAfterALostOneIsRefusedAndTheAnswerWrittenAnew(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	u, ws := newUser(t, store, "gap@example.com")
	sent := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q"})
	msg := sent.Assistant.ID
	save := func(p db.Progress) []int64 {
		t.Helper()
		_, broken, err := store.SaveProgress(ctx, []db.Progress{p}, []int64{sent.Run.ID})
		if err != nil {
			t.Fatal(err)
		}
		return broken
	}
	if b := save(db.Progress{Message: msg, Seq: 0, Content: "one ", Restart: true}); len(b) != 0 {
		t.Fatalf("the first row: broken %v", b)
	}
	if b := save(db.Progress{Message: msg, Seq: 1, Content: "two "}); len(b) != 0 {
		t.Fatalf("the second row: broken %v", b)
	}
	mustExec(t, store, "DELETE FROM message_progress WHERE message_id = $1 AND seq = 1", msg) // the lost commit
	if b := save(db.Progress{Message: msg, Seq: 2, Content: "three"}); len(b) != 1 || b[0] != msg {
		t.Fatalf("a row after a lost one: broken %v, want [%d]", b, msg)
	}
	if got := mustMessage(t, store, u.ID, msg).Content; got != "one " {
		t.Fatalf("the refused row was written: %q", got)
	}
	if b := save(db.Progress{Message: msg, Seq: 2, Content: "one two three", Restart: true}); len(b) != 0 {
		t.Fatalf("the rewrite: broken %v", b)
	}
	if got := mustMessage(t, store, u.ID, msg).Content; got != "one two three" {
		t.Fatalf("after the rewrite: %q", got)
	}
	if b := save(db.Progress{Message: msg, Seq: 3, Content: " four"}); len(b) != 0 || mustMessage(t, store, u.ID, msg).Content != "one two three four" {
		t.Fatalf("after the rewrite, the next row: broken %v, %q", b, mustMessage(t, store, u.ID, msg).Content)
	}
	// NUL cannot be stored as text: it is left out, and the round works.
	if b := save(db.Progress{Message: msg, Seq: 4, Content: " fi\x00ve"}); len(b) != 0 || mustMessage(t, store, u.ID, msg).Content != "one two three four five" {
		t.Fatalf("a NUL: broken %v, %q", b, mustMessage(t, store, u.ID, msg).Content)
	}
}

// A run another instance settled (it took this one for dead) is told to
// stop at the next round, as a cancelled one is.
func TestARunSettledElsewhereIsToldToStop(t *testing.T) {
	t.Parallel()
	store := testenv.NewDB(t)
	ctx := context.Background()
	u, ws := newUser(t, store, "zombie@example.com")
	sent := send(t, store, u.ID, db.Send{WorkspaceID: ws.ID, Content: "q"})
	mustExec(t, store, `UPDATE runs SET status = 'running', instance_id = 'here' WHERE id = $1`, sent.Run.ID)
	if stop, _, err := store.SaveProgress(ctx, nil, []int64{sent.Run.ID}); err != nil || len(stop) != 0 {
		t.Fatalf("a running run: stop %v, %v", stop, err)
	}
	mustExec(t, store, `UPDATE runs SET status = 'interrupted' WHERE id = $1`, sent.Run.ID)
	if stop, _, err := store.SaveProgress(ctx, nil, []int64{sent.Run.ID}); err != nil || len(stop) != 1 || stop[0] != sent.Run.ID {
		t.Fatalf("a run settled elsewhere: stop %v, %v", stop, err)
	}
}
