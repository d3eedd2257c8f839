package rag_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"weft/db"
	"weft/internal/testenv"
	"weft/internal/testwait"
	"weft/media"
	"weft/rag"
)

// Read-aloud jobs that take for ever (a speech server that never answers)
// fill the media queue; a document uploaded meanwhile is still ingested,
// because media jobs have workers of their own.
func TestSlowMediaJobsDoNotHoldUpIngestion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	var started atomic.Int32
	reached := make(chan struct{}, 3) // one per read-aloud job
	release := make(chan struct{})
	tts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		select {
		case reached <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "gave up", http.StatusServiceUnavailable)
	}))
	t.Cleanup(tts.Close)
	// One ingestion worker: with media jobs in its queue, one stuck job
	// would be enough to stop ingestion.
	q := newQueue(t, store, map[string]int{rag.Queue: 1, media.Queue: 1})
	ms, err := media.NewService(store, q, media.Config{DataDir: t.TempDir(), MaxPendingPerUser: 10})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, store, q, rag.Config{})
	t.Cleanup(func() { close(release) }) // before the queue stops (cleanups run last first)
	if err := ms.SaveSettings(ctx, media.Settings{TTSEngine: "openai", TTSURL: tts.URL, TTSModel: "tts-1", TTSVoice: "alloy"}); err != nil {
		t.Fatal(err)
	}
	var answers []int64
	for range 3 {
		sent, err := store.SendMessage(ctx, e.user.ID, db.Send{WorkspaceID: e.ws.ID, Content: "q", Kind: "chat", Model: "tiny"})
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, store, "UPDATE messages SET content = 'An answer to read.', status = 'complete' WHERE id = $1", sent.Assistant.ID)
		answers = append(answers, sent.Assistant.ID)
	}
	for _, a := range answers {
		if md, err := ms.ReadAloud(ctx, e.user.ID, a); err != nil || md.Status != db.MediaPending {
			t.Fatalf("read aloud: %+v %v", md, err)
		}
	}
	testwait.Recv(t, "a read-aloud job to reach the speech server", 30*time.Second, reached)

	kb := e.kb(e.user, e.ws, "Manuals", "embedder")
	if d := e.wait(e.user, e.add(e.user, kb, "a.md", "# A\n\nSome text about rivers.")); d.Status != db.DocReady {
		t.Fatalf("the document is %s (%s) while media jobs are stuck", d.Status, d.Error)
	}
	if n := started.Load(); n != 1 {
		t.Errorf("%d read-aloud jobs ran at once with one media worker", n)
	}
}
