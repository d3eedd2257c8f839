package chat_test

import (
	"context"
	"sync"
	"testing"

	"weft/chat"
	"weft/db"
)

// recordingRetriever returns one source and records the room each
// retrieval was given.
type recordingRetriever struct {
	mu       sync.Mutex
	numCtx   []int
	maxChars []int
}

func (r *recordingRetriever) Retrieve(_ context.Context, _ int64, kbs []db.KnowledgeBase, _, _ string, numCtx, maxChars int) ([]db.Source, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.numCtx = append(r.numCtx, numCtx)
	r.maxChars = append(r.maxChars, maxChars)
	return []db.Source{{N: 1, KBID: kbs[0].ID, KB: kbs[0].Name, Document: "a.md", Text: "a passage"}}, nil
}

func TestTheSourcesOfAnAnswerGetHalfTheRoomOfTheWindowItIsAskedWith(t *testing.T) {
	t.Parallel()
	rec := &recordingRetriever{}
	e := newEnv(t, chat.Config{Retriever: rec})
	ctx := context.Background()
	kb, err := e.store.CreateKB(ctx, e.user.ID, e.ws.ID, db.KBInput{Name: "Manuals", EmbedModel: "embedder", Dims: 8})
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.rt.Send(ctx, e.user.ID, chat.Input{WorkspaceID: e.ws.ID, Content: "what does the manual say?", SetKBs: true, KBs: []int64{kb.ID}})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(first)
	// The same thread with a small window of its own.
	if err := e.store.UpdateThreadSettings(ctx, e.user.ID, first.Thread.ID, db.ThreadSettings{NumCtx: 1024}); err != nil {
		t.Fatal(err)
	}
	e.wait(e.send(first.Thread.ID, "and then?"))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.maxChars) != 2 {
		t.Fatalf("%d retrievals, want 2", len(rec.maxChars))
	}
	if rec.numCtx[1] != 1024 || rec.numCtx[0] <= 1024 {
		t.Fatalf("the windows retrieved for: %v, want the model's then 1024", rec.numCtx)
	}
	// Before any answer the model is not calibrated: 4 characters a token.
	if want := chat.SourceChars(rec.numCtx[0], nil, 4); rec.maxChars[0] != want {
		t.Errorf("%d characters of sources for a window of %d, want %d", rec.maxChars[0], rec.numCtx[0], want)
	}
	// After it, the model's own characters a token (the fake's are near 4):
	// 1,024 tokens less the answer's 256, halved.
	if got := float64(rec.maxChars[1]) / (768 * 0.5); got < 3 || got > 5 {
		t.Errorf("a window of 1,024 gives its sources %d characters: %.2f a token", rec.maxChars[1], got)
	}
	if rec.maxChars[1] >= rec.maxChars[0] {
		t.Errorf("the smaller window gives its sources %d characters, the larger %d", rec.maxChars[1], rec.maxChars[0])
	}
}
